"""Pure team plan reviews: a review policy, the votes cast under it, and their tally.

Without a policy a plan review is decided by the first allowed click, as any question is.
With one, each Approve or decline is a *vote* kept on the record; the review ends when the
tally says so, and its answer keeps the seam's encoding: approved is the approve label, as
a single reviewer's approval would be; declined is ``selected: []`` with every decliner's
feedback combined into ``custom``, one attributed line each (or the decline label when
nobody wrote any). An intent changes presentation only, never the protocol.

Group membership is read when a vote is cast (as for ``allowed_usergroups``) and kept on
the vote, so the tally itself needs no Web API call and any process can compute it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Outcome",
    "RequiredApprovals",
    "ReviewPolicy",
    "Revision",
    "ReviewerSet",
    "Tally",
    "Vote",
    "cast",
    "combined_feedback",
    "tally",
]

Outcome = Literal["approved", "declined"]


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


UserId = Annotated[str, StringConstraints(pattern=r"^[UW][A-Z0-9]{2,30}$")]
GroupId = Annotated[str, StringConstraints(pattern=r"^S[A-Z0-9]{2,30}$")]


class ReviewerSet(_Wire):
    """People named by user id and by user group id (ids only: they become mentions)."""

    users: list[UserId] = Field(default_factory=list, max_length=100)
    usergroups: list[GroupId] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.users and not self.usergroups:
            raise ValueError("name at least one user or user group")
        return self

    def contains(self, user: str, groups_of_user: frozenset[str]) -> bool:
        """Whether ``user`` (a member of ``groups_of_user``) is in this set."""
        return user in self.users or any(g in groups_of_user for g in self.usergroups)


class RequiredApprovals(ReviewerSet):
    """At least ``count`` of the approvals must come from these people."""

    count: int = Field(default=1, ge=1, le=50)


class ReviewPolicy(_Wire):
    """How a plan review is decided by a team.

    ``approvals``: approvals needed. ``reviewers``: who may vote (default: whoever may
    answer the question). ``required``: sets of people a number of those approvals must
    come from ("one of them from @platform-leads"); one approver counts toward every set
    they belong to. ``declines``: declines that end the review declined (default 1: any
    one decline does).
    """

    approvals: int = Field(default=1, ge=1, le=50)
    reviewers: ReviewerSet | None = None
    required: list[RequiredApprovals] = Field(default_factory=list, max_length=10)
    declines: int = Field(default=1, ge=1, le=50)

    @model_validator(mode="after")
    def _reachable(self) -> Self:
        for index, group in enumerate(self.required):
            if group.count > self.approvals:
                raise ValueError(
                    f"required[{index}].count ({group.count}) is more than approvals "
                    f"({self.approvals})"
                )
        return self

    @property
    def usergroups(self) -> frozenset[str]:
        """Every user group whose membership the policy reads."""
        groups = {g for r in self.required for g in r.usergroups}
        if self.reviewers is not None:
            groups.update(self.reviewers.usergroups)
        return frozenset(groups)


class Vote(_Wire):
    """One reviewer's current vote."""

    user: str
    name: str | None = None
    approve: bool
    feedback: str | None = None
    at: float
    required: list[int] = Field(default_factory=list)
    """Indices of the policy's ``required`` sets the voter belonged to when voting."""


def cast(votes: Sequence[Vote], vote: Vote) -> list[Vote]:
    """The votes after ``vote``: a reviewer's new vote replaces their earlier one."""
    return [v for v in votes if v.user != vote.user] + [vote]


@dataclass(frozen=True, slots=True)
class Tally:
    """Where a review stands."""

    approvals: int
    needed: int
    declines: int
    waiting: tuple[tuple[RequiredApprovals, int], ...]
    """Required sets still short of approvals, with how many each still needs."""
    outcome: Outcome | None

    @property
    def still_needed(self) -> int:
        """Approvals still needed in all (at least the largest shortfall of a set)."""
        shortfall = max((n for _, n in self.waiting), default=0)
        return max(self.needed - self.approvals, shortfall)


def tally(policy: ReviewPolicy, votes: Sequence[Vote]) -> Tally:
    """Count ``votes`` under ``policy``; ``outcome`` is set once the review is decided."""
    approvers = [v for v in votes if v.approve]
    declines = len(votes) - len(approvers)
    waiting = tuple(
        (group, group.count - have)
        for index, group in enumerate(policy.required)
        if (have := sum(1 for v in approvers if index in v.required)) < group.count
    )
    outcome: Outcome | None = None
    if declines >= policy.declines:
        outcome = "declined"
    elif len(approvers) >= policy.approvals and not waiting:
        outcome = "approved"
    return Tally(len(approvers), policy.approvals, declines, waiting, outcome)


def combined_feedback(votes: Sequence[Vote]) -> str | None:
    """Every decliner's feedback, one attributed line each (``None`` when there is none)."""
    lines = [
        f"{v.name or v.user}: {v.feedback.strip()}"
        for v in votes
        if not v.approve and v.feedback and v.feedback.strip()
    ]
    return "\n".join(lines) if lines else None


class Revision(_Wire):
    """What a revised plan review revises: the earlier review, its plan and its feedback."""

    previous_id: str
    previous_plan: str
    previous_link: str | None = None
    feedback: str | None = None
