"""Review policies: how a team decides a plan review (``AskOptions.review``, not on the wire).
Without one, one approval decides; with one, a provider collects votes until it is met."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

PersonId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]{2,40}$")]
"""A user or user-group id of the provider (letters and digits only: it becomes a mention)."""


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class ReviewerSet(_Wire):
    """People named by user id and by user group id."""

    users: list[PersonId] = Field(default_factory=list, max_length=100)
    usergroups: list[PersonId] = Field(default_factory=list, max_length=20)

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
    """``approvals`` needed; ``reviewers``: who may vote (default: who may answer); ``required``:
    sets some approvals must come from (an approver counts toward each set they are in);
    ``declines`` that end the review declined (default 1)."""

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
