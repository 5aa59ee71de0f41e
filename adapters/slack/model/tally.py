"""Pure team plan reviews: a review policy, the votes cast under it, and their tally."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from bot.questions.review import RequiredApprovals, ReviewPolicy

Outcome = Literal["approved", "declined"]


class Wire(BaseModel):
    """Stored and shown as JSON with camelCase names; frozen."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class Vote(Wire):
    """One reviewer's current vote."""

    user: str
    name: str | None = None
    approve: bool
    feedback: str | None = None
    at: float
    required: list[int] = Field(default_factory=list)
    """Indices of the policy's ``required`` sets the voter belonged to when voting."""
    unreadable: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """The policy's user groups Slack would not list when this vote was cast, with its error."""
    opened_whole_plan: bool | None = Field(default=None, exclude_if=lambda v: v is None)
    """As ``PendingRecord.opened_whole_plan``, for this vote."""


class Membership(frozenset[str]):
    """The user groups a person is in, as read from Slack, and Slack's lasting error for each
    group asked about that it would not list (``unreadable``)."""

    unreadable: Mapping[str, str]

    def __new__(
        cls, groups: Iterable[str] = (), unreadable: Mapping[str, str] | None = None
    ) -> Membership:
        membership = super().__new__(cls, groups)
        membership.unreadable = dict(unreadable or {})
        return membership


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


class Revision(Wire):
    """What a revised plan review revises: the earlier review, its plan and its feedback."""

    previous_id: str
    previous_plan: str
    previous_link: str | None = None
    feedback: str | None = None
