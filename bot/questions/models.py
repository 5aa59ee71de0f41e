"""The seam's vocabulary as pydantic models: requests in, answers out. Attributes are snake_case,
the wire JSON camelCase (``multiSelect``); ``to_wire()`` gives back exactly the keys given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, field_validator
from pydantic.alias_generators import to_camel

from bot.questions.abort import AbortSignal
from bot.questions.review import ReviewPolicy


class WireModel(BaseModel):
    """Base of the wire models: camelCase aliases, strict types, unknown keys refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        strict=True,
        extra="forbid",
        frozen=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The wire JSON: camelCase, only the keys that were set; a key set to ``null`` is
        left out, as the checks treat it (absent), so the wire says what was read."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude_none=True)


class AskUserQuestionOption(WireModel):
    """One selectable answer; ``label`` is both what the user sees and the value returned."""

    label: str
    description: str | None = None


class PlanReviewIntent(WireModel):
    """A plan submitted for review: ``detail`` is the plan, ``approve`` the approving label."""

    kind: Literal["plan-review"]
    approve: str


# A discriminated union on ``kind`` so further intents can be added beside plan-review.
AskUserQuestionIntent = Annotated[PlanReviewIntent, Field(discriminator="kind")]


class AskUserQuestionItem(WireModel):
    """One question in a request; ``id`` is echoed in its answer."""

    id: str
    question: str
    detail: str | None = None
    header: str | None = None
    options: list[AskUserQuestionOption] | None = None
    multi_select: bool | None = None
    intent: AskUserQuestionIntent | None = None

    @property
    def is_multi_select(self) -> bool:
        """``multiSelect`` with its default (single-select) applied."""
        return bool(self.multi_select)

    @property
    def option_labels(self) -> list[str]:
        """The labels of the options, in order (empty when there are none)."""
        return [option.label for option in self.options or ()]


class AskOptions(BaseModel):
    """How one request is asked, beside its questions; a provider reads what it supports. It
    travels on the request object (excluded from the wire JSON, like ``signal``).

    ``channel``/``thread_ts``: where (default: the provider's destination). ``key``: asking
    again with it attaches to the open request (a replayed frame, a retried POST).
    ``request_id``: the id to use. ``label``: who asks, shown. ``note``: shown; with a ``key``
    whose request ended, it reopens the request. ``on_posted(request_id)``: called once the
    question is posted. ``review``: how a team decides a plan review (default: the first
    approval or decline). ``revises``: the plan review this one revises. ``timeout``: seconds
    before ``ASK_TIMEOUT``, shown as the deadline. ``reminders``: seconds before the deadline
    to remind; ``escalate_after``/``escalate_to``: seconds after asking to mention a ``U…``/``S…``
    id; ``remind``: ids reminders mention. ``link``: an ``http(s)`` URL shown as a button.
    ``callback``: an ``http(s)`` URL the outcome is POSTed to, by the bot's webhooks
    (``bot.app.embedded.embed_webhooks`` in process; unwired: ``BAD_CALLBACK``). ``asked_by``:
    who asks, for the audit trail. ``detached``: owned by no process (the HTTP API's), so it
    outlives its waiter's process; default: the waiter owns it and it fails if that dies.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    channel: str | None = None
    thread_ts: str | None = None
    key: str | None = None
    request_id: str | None = None
    label: str | None = None
    note: str | None = None
    on_posted: Callable[[str], None] | None = None
    review: ReviewPolicy | None = None
    revises: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    reminders: tuple[float, ...] = ()
    escalate_after: float | None = Field(default=None, gt=0)
    escalate_to: str | None = Field(default=None, pattern=r"^[UWS][A-Z0-9]{2,20}$")
    remind: tuple[Annotated[str, Field(pattern=r"^[UWS][A-Z0-9]{2,20}$")], ...] = Field(
        default=(), max_length=20
    )
    link: str | None = Field(default=None, max_length=3000, pattern=r"^https?://[^\s<>|]+$")
    callback: str | None = Field(default=None, max_length=2000, pattern=r"^https?://[^\s<>|]+$")
    asked_by: str | None = None
    detached: bool = False


class AskUserQuestionRequest(WireModel):
    """A request for a human answer: the questions; the live ``agent``, a ``signal`` and
    ``options`` are in-process objects, never part of the wire JSON."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    questions: list[AskUserQuestionItem]
    agent: Any = Field(default=None, exclude=True)
    signal: AbortSignal | None = Field(default=None, exclude=True)
    # An instance only: a wire ``options`` key is refused like any unknown key.
    options: InstanceOf[AskOptions] | None = Field(default=None, exclude=True)

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_is_no_json(cls, value: Any) -> Any:
        """A wire ``agent`` key (any JSON value) is refused: only an in-process object is one."""
        if isinstance(value, dict | list | str | int | float | bool):
            raise ValueError("an in-process agent object, never part of the wire JSON")
        return value


class AskUserQuestionAnswerItem(WireModel):
    """The answer to one question: chosen labels and optional free text."""

    id: str
    selected: list[str]
    custom: str | None = None


class AskUserQuestionAnswer(WireModel):
    """The answers, one item per question id."""

    answers: list[AskUserQuestionAnswerItem]


@runtime_checkable
class UserQuestionProvider(Protocol):
    """A UI surface that asks a person and returns their answer."""

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Ask the questions and return the answer (or raise a ``UserQuestionError``)."""
        ...
