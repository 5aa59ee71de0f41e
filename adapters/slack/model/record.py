"""The pending request as stored: everything any process needs to render and resolve it."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.slack.model.tally import Revision, Vote
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.review import ReviewPolicy

State = Literal["pending", "answered", "cancelled", "aborted", "failed"]
TERMINAL_STATES: frozenset[str] = frozenset({"answered", "cancelled", "aborted", "failed"})


class Draft(BaseModel):
    """A question's answer in progress: chosen option indices and free text."""

    model_config = ConfigDict(extra="forbid")

    selected: list[int] = Field(default_factory=list)
    custom: str | None = None


class ApprovalView(BaseModel):
    """A tool-permission approval shown in Slack (no questions): what asks, and the decision."""

    model_config = ConfigDict(extra="forbid")

    tool_name: str
    headline: str
    command: str | None = None
    path: str | None = None
    outcome: Literal["allowed-once", "rejected"] | None = None


class PendingRecord(BaseModel):
    """One open (or just finished) request and its Slack message."""

    model_config = ConfigDict(extra="forbid")

    id: str
    version: int = 0
    state: State = "pending"
    owner: str | None = None
    """The process whose ``ask()`` waits on it (``None``: no process's end can fail it); a
    ``detached`` record's, the process to post its message until it is posted."""
    detached: bool = False
    """Asked detached (the HTTP API's): owned by no process once posted; until then a stop
    leaves it to the next process and an orphan sweep takes it up, never fails it."""
    questions: list[AskUserQuestionItem]
    channel: str
    thread_ts: str | None = None
    message_channel: str | None = None
    message_ts: str | None = None
    label: str | None = None
    mention: str | None = None
    key: str | None = None
    allowed_users: list[str] | None = None
    allowed_usergroups: list[str] | None = None
    drafts: list[Draft] = Field(default_factory=list)
    user_drafts: dict[str, list[Draft]] = Field(default_factory=dict)
    note: str | None = None
    in_flight: bool = False
    """Answered here, not yet taken by its asker (a dsh host out of reach): shown as sent."""
    answer: AskUserQuestionAnswer | None = None
    answered_by: str | None = None
    answered_by_name: str | None = None
    review: ReviewPolicy | None = None
    votes: list[Vote] = Field(default_factory=list)
    plan_readers: list[str] = Field(default_factory=list)
    """Who may decide and opened the whole plan, first one first."""
    opened_whole_plan: bool | None = None
    """Whether who decided a plan longer than its message had opened it whole."""
    revision: Revision | None = None
    approval: ApprovalView | None = None
    asked_by: str | None = None
    """Who asked: ``api`` (or the API token's name), the dsh host, or the asking code."""
    error_code: str | None = None
    created_at: float = Field(default_factory=time.time)
    deadline: float | None = None
    reminders: list[float] = Field(default_factory=list)
    escalate_at: float | None = None
    escalate_to: str | None = None
    remind: list[str] | None = None
    """Who reminders mention besides who may answer."""
    reminded: int = 0
    """How many of ``reminders`` were taken (by compare-and-set, before posting: never twice)."""
    escalated: bool = False
    """Whether the escalation was taken (as ``reminded``)."""
    link: str | None = None
    replaced_by: str | None = None
    """The link to the revised plan review that superseded this one."""
    callback: str | None = None
    """Where the outcome is POSTed when the request ends."""
    finished_at: float | None = None
    consumed_at: float | None = None
    """When the answer was consumed by its executor (``POST …/consume``): once only."""
    shown_sha256: str | None = None
    """``shown_digest`` of ``questions``, taken when the record is made (``None``: not kept)."""

    @property
    def is_open(self) -> bool:
        """Whether the request still waits for an answer."""
        return self.state == "pending"

    def draft(self, question: int, user: str | None = None) -> Draft:
        """Question ``question``'s draft: ``user``'s own if given, else the shared one of an
        older record (empty when none was made)."""
        drafts = self.drafts if user is None else self.user_drafts.get(user, [])
        return drafts[question] if 0 <= question < len(drafts) else Draft()

    def next(self, **changes: object) -> PendingRecord:
        """A copy with ``changes`` applied and the version bumped (for compare-and-set)."""
        update = {**changes, "version": self.version + 1}
        if "questions" in changes and "shown_sha256" not in changes:
            update["shown_sha256"] = None  # the digest was of the questions replaced
        return self.model_copy(update=update)

    def dump(self) -> str:
        """The record as JSON (``None`` left out, so questions reload exactly as given)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def load(cls, data: str | bytes, *, of: str | None = None) -> PendingRecord:
        """Parse a stored record (of this version or another); ``of``: its id, for the error."""
        try:
            return cls.model_validate_json(data, extra="ignore")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'record'}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False)[:3]
            )
            which = "a record" if of is None else f"record {of}"
            raise UserQuestionError(
                f"the pending store holds {which} this version of the bot cannot read "
                f"(stored by a newer version?): {problems}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc
