"""What the HTTP API accepts: the bodies of ``POST /v1/questions`` and ``/v1/approvals`` and the
checks beyond their models (wire names only, empty texts, repeated labels, deadlines that could
never apply)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Self, TypeVar

from pydantic import (
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from adapters.slack import ApprovalView
from bot.questions.models import AskUserQuestionItem, WireModel
from bot.questions.review import ReviewPolicy

MAX_TIMEOUT: Final = 7 * 24 * 3600.0
"""The longest a question may wait for its answer (and the latest reminder), in seconds."""
LINK_MESSAGE: Final = (
    "must be an http:// or https:// URL without spaces (nor <, > or |), at most 3000 characters"
)
_URL: Final = r"^https?://[^\s<>|]+$"
_WHO: Final = r"^[UWS][A-Z0-9]{2,20}$"


class Destination(WireModel):
    """Where to post: a channel, DM or user id, and optionally a thread."""

    channel: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z0-9]+$")
    thread_ts: str | None = Field(default=None, pattern=r"^\d{1,12}\.\d{1,8}$")


def _plain_link(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """The checks of ``link``, with one plain message naming the argument."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("link", LINK_MESSAGE) from None


def _seconds(description: str) -> Any:
    return Field(default=None, gt=0, le=MAX_TIMEOUT, description=description)


Where = Annotated[
    Destination | None, Field(description="Where to ask (default: the bot's SLACK_CHANNEL).")
]
Label = Annotated[
    str | None,
    Field(
        max_length=120,
        description="Who is asking, shown on the message (for example the project or task).",
    ),
]
Link = Annotated[
    str | None,
    Field(
        max_length=3000,
        pattern=_URL,
        description="A URL back to where the question comes from (a pull request, a run), "
        "shown as a link button: http:// or https://, without spaces.",
    ),
    WrapValidator(_plain_link),
]
Callback = Annotated[
    str | None,
    Field(
        max_length=2000,
        pattern=_URL,
        description="A URL the bot POSTs the question's outcome to when it ends (the body of "
        "GET /v1/questions/{id}, signed with the asking token's secret); its host must be one "
        "the operator allows (WEBHOOK_HOSTS). Each delivery carries X-Webhook-Timestamp, "
        "X-Webhook-Signature (v0= HMAC-SHA256 of v0:timestamp:body), X-Webhook-Id (the "
        "question's id, the same on every attempt) and X-Webhook-Attempt; non-2xx answers are "
        "retried with backoff for a day; redirects are not followed.",
    ),
]


class QuestionPost(WireModel):
    """The body of ``POST /v1/questions`` and the MCP tool's arguments: the seam's wire
    request plus where to ask and how."""

    questions: list[AskUserQuestionItem] = Field(
        description="The questions, asked together in one Slack message, in this order."
    )
    destination: Where = None
    label: Label = None
    review: ReviewPolicy | None = Field(
        default=None,
        description="How a team decides a plan review: approvals needed, who may vote, "
        "required sets, declines that end it.",
    )
    revises: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The id of an earlier plan review this one revises: the message links to "
        "it, quotes its feedback and shows the plan's line diff (BAD_REVIEW if unknown).",
    )
    timeout: float | None = _seconds(
        "Seconds to wait for an answer; then ASK_TIMEOUT (default: the bot's QUESTION_TIMEOUT)."
    )
    reminders: list[Annotated[float, Field(gt=0, le=MAX_TIMEOUT)]] | None = Field(
        default=None,
        max_length=10,
        description="Seconds before the deadline at which a thread reply reminds the people "
        "who may answer; each less than the timeout.",
    )
    escalate_after: float | None = _seconds(
        "Seconds after asking at which escalateTo is mentioned if nobody has answered; needs "
        "escalateTo, less than the timeout."
    )
    escalate_to: str | None = Field(
        default=None,
        pattern=_WHO,
        description="A user (U…, W…) or user group id (S…) to mention on escalation; needs "
        "escalateAfter.",
    )
    remind: list[Annotated[str, Field(pattern=_WHO)]] | None = Field(
        default=None,
        max_length=20,
        description="User (U…, W…) or user group ids (S…) each reminder mentions besides who "
        "may answer (default: the bot's SLACK_REMIND). With nobody to mention, a reminder is a "
        "top-level message in the channel.",
    )
    link: Link = None
    callback: Callback = None


class ApprovalPost(WireModel):
    """The body of ``POST /v1/approvals``: what an agent asks to run, and why; decided once."""

    tool: str = Field(
        min_length=1, max_length=200, description="The tool that would run (e.g. bash, write)."
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        max_length=100_000,
        description="The command the tool would run, shown whole (long ones in the thread).",
    )
    path: str | None = Field(
        default=None, min_length=1, max_length=4096, description="The file the tool would touch."
    )
    reason: str = Field(
        min_length=1, max_length=2000, description="Why the agent asks: the panel's headline."
    )
    destination: Where = None
    label: Label = None
    link: Link = None
    callback: Callback = None

    @model_validator(mode="after")
    def _names_what(self) -> Self:
        if self.command is None and self.path is None:
            raise ValueError("name the command or the path the tool would act on")
        return self

    def view(self) -> ApprovalView:
        """The panel this approval is shown as."""
        return ApprovalView(
            tool_name=self.tool, headline=self.reason, command=self.command, path=self.path
        )


_PATTERN_HELP: Final = {
    ("destination", "channel"): (
        "must be a Slack conversation or user id such as C0123456789, D… or U… (not a "
        "#name; the sandbox's channel is C0SANDBOX)"
    ),
    ("destination", "threadTs"): "must be a message ts such as 1712345678.123456",
    ("escalateTo",): "must be a Slack user or user group id such as U0123456789 or S0123456789",
}
"""Pydantic's "String should match pattern '…'" for fields a person fills in, said plainly."""


Post = QuestionPost | ApprovalPost
"""A body that asks: a question (``POST /v1/questions``) or a tool approval."""
_Post = TypeVar("_Post", bound=WireModel)


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as the API reports them: ``{loc, msg, type}``, no input echoed."""
    errors = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = [str(part) for part in error["loc"]]
        message = error["msg"]
        if error["type"] == "string_pattern_mismatch":
            said = (help for end, help in _PATTERN_HELP.items() if tuple(loc[-len(end) :]) == end)
            message = next(said, message)
        errors.append(_refused(loc, message, error["type"]))
    return errors


def error_count(count: int) -> str:
    """``1 error``, ``2 errors``."""
    return f"{count} error" if count == 1 else f"{count} errors"


def _refused(loc: list[str], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}


def never_applied(
    post: QuestionPost, timeout: float | None, escalate_after: float | None, escalate_to: str | None
) -> list[dict[str, Any]]:
    """Deadline settings the question could never act on (the record would drop them silently):
    reminders at or after the deadline, an escalation without a time or someone to mention;
    each counts with the default it falls back to (this process's ``QUESTION_TIMEOUT``…)."""
    errors: list[dict[str, Any]] = []
    timeout = post.timeout or timeout
    after, whom = post.escalate_after, post.escalate_to
    if post.reminders and timeout is None:
        why = "reminders are seconds before the deadline: give a timeout (there is no "
        why += "QUESTION_TIMEOUT)"
        errors.append(_refused(["reminders"], why, "reminders_without_timeout"))
    elif post.reminders and timeout is not None:
        errors += [
            _refused(
                ["reminders", str(n)],
                f"a reminder {before:g} s before the deadline is not after the question is "
                f"asked (its timeout is {timeout:g} s)",
                "reminder_before_asked",
            )
            for n, before in enumerate(post.reminders)
            if before >= timeout
        ]
    if after is not None and (whom or escalate_to) is None:
        why = "escalateAfter needs escalateTo (whom to mention)"
        errors.append(_refused(["escalateAfter"], why, "escalation_without_whom"))
    elif whom is not None and (after or escalate_after) is None:
        why = "escalateTo needs escalateAfter (when to mention them)"
        errors.append(_refused(["escalateTo"], why, "escalation_without_when"))
    elif after is not None and timeout is not None and after >= timeout:
        why = f"escalateAfter ({after:g} s) is not before the deadline (its timeout is "
        why += f"{timeout:g} s)"
        errors.append(_refused(["escalateAfter"], why, "escalation_after_deadline"))
    return errors


def _ambiguities(post: WireModel) -> list[dict[str, Any]]:
    """What the API refuses beyond the seam in a body that validated as ``post``: an empty
    question cannot be answered knowingly, and two options with one label are ambiguous (an
    answer names options by label)."""
    errors: list[dict[str, Any]] = []
    for index, question in enumerate(post.questions if isinstance(post, QuestionPost) else []):
        at = ["questions", str(index)]
        if not question.question.strip():
            why = f"question {question.id!r} has no text"
            errors.append(_refused([*at, "question"], why, "empty_question"))
        first: dict[str, int] = {}
        for n, label in enumerate(question.option_labels):
            if label in first:
                why = (
                    f"question {question.id!r} has the option label {label!r} twice (options "
                    f"{first[label] + 1} and {n + 1}); answers name options by label, so each "
                    "label must be unique"
                )
                errors.append(_refused([*at, "options", str(n), "label"], why, "duplicate_label"))
            first.setdefault(label, n)
    return errors


def checked(model: type[_Post], given: Mapping[str, Any]) -> _Post | list[dict[str, Any]]:
    """``given`` (arguments, wire names only) as ``model``, or the errors the API would answer."""
    try:
        post = model.model_validate(given, by_alias=True, by_name=False)
    except ValidationError as exc:
        return validation_errors(exc)
    return _ambiguities(post) or post


def body_problems(given: Any, post: WireModel) -> list[dict[str, Any]]:
    """What the API refuses in a JSON body (``given``, parsed) that validated as ``post``: the
    attribute names (``multi_select``) validating JSON lets by where the API takes only wire
    names (validating Python refuses them), then what ``checked`` refuses beyond the model."""
    found = checked(type(post), given)
    why = "unknown key {!r} (the API takes the seam's wire names)"
    unknown = [
        _refused(e["loc"], why.format(e["loc"][-1]), e["type"])
        for e in (found if isinstance(found, list) else [])
        if e["type"] == "extra_forbidden"
    ]
    unknown.sort(key=lambda error: _place(given, error["loc"]))
    return unknown or _ambiguities(post)


def _place(given: Any, loc: list[str]) -> list[int]:
    """Where ``loc`` stands in the body ``given``, key by key (to name keys in its order)."""
    place = []
    for step in loc:
        keys = [str(key) for key in given] if isinstance(given, dict) else []
        if isinstance(given, list):
            keys = [str(index) for index in range(len(given))]
        if step not in keys:
            break
        place.append(keys.index(step))
        given = given[step] if isinstance(given, dict) else given[int(step)]
    return place
