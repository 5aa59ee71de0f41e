"""The model-facing ``ask_user_question`` tool: its schema and ``execute``, which maps the
model's snake_case arguments to a request, asks the service and renders the answer as JSON text;
every failure is an error result the model can read (only cancellation propagates)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from bot.questions.abort import AbortSignal
from bot.questions.errors import HarnessError
from bot.questions.jsontext import stringify
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem, AskUserQuestionRequest
from bot.questions.service import Agent, UserQuestionService

TOOL_NAME: Final = "ask_user_question"

DESCRIPTION: Final = (
    "Ask the user a concise question when you need confirmation, a choice, or missing "
    "information before proceeding. Send one or more questions, each with a stable id that "
    "will be echoed in the answer."
)


def _typed(kind: str, description: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **more}


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """An object the schema describes; keys it does not name are allowed (as upstream)."""
    return {
        "type": "object",
        "additionalProperties": True,
        "properties": properties,
        "required": list(required),
    }


_OPTION: Final = _object(
    {
        "label": _typed("string", "Short user-facing option label."),
        "description": _typed("string", "One sentence explaining the tradeoff or impact."),
    },
    "label",
)
_QUESTION: Final = _object(
    {
        "id": _typed("string", "Stable id for this question; echoed in the answer."),
        "question": _typed("string", "The specific question to ask the user."),
        "header": _typed(
            "string",
            'Optional short heading for the question, such as "Confirm" or "Choose Mode".',
        ),
        "options": _typed(
            "array",
            "Optional choices to show the user. If you recommend one, put it first and append "
            '"(Recommended)" to that label.',
            items=_OPTION,
        ),
        "multi_select": _typed(
            "boolean", "Whether the user may select more than one option. Defaults to false."
        ),
    },
    "id",
    "question",
)
# The JSON Schema the model receives, as upstream generates it (docs/tool-catalog.md); no
# ``minItems`` on ``questions``: an empty batch reaches the service (EMPTY_QUESTIONS).
PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "questions": _typed(
            "array", "Questions to ask the user before continuing.", items=_QUESTION
        ),
    },
    "required": ["questions"],
}
SCHEMA: Final[dict[str, Any]] = {
    "name": TOOL_NAME,
    "description": DESCRIPTION,
    "parameters": PARAMETERS,
}
"""One entry of a tool list, as a tool registry hands it to a model."""

INVALID_ARGS: Final = "INVALID_ARGS"
INVALID_TOOL_OUTPUT: Final = "INVALID_TOOL_OUTPUT"
TOOL_CALL_ABORTED: Final = "tool call aborted"
"""The message of the cancellation result a success becomes once the caller aborted."""


class _SchemaError(HarnessError):
    """Values that break a schema: ``violations`` lists each ``path: message``."""

    what: ClassVar[str]
    error_code: ClassVar[str]

    def __init__(self, violations: list[str]) -> None:
        super().__init__(f"{self.what}: {'; '.join(violations)}", self.error_code)
        self.violations = violations


class ToolArgsError(_SchemaError):
    """The model's arguments do not match ``PARAMETERS`` (code ``INVALID_ARGS``)."""

    what, error_code = "invalid arguments", INVALID_ARGS


class ToolOutputError(_SchemaError):
    """The provider's answer cannot be rendered as the tool's output (``INVALID_TOOL_OUTPUT``)."""

    what, error_code = "invalid tool output", INVALID_TOOL_OUTPUT


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the model gets back, as upstream's ``{content, isError, error: {message, info?}}``;
    ``error["info"]`` (``{name, code}``) is present only for a ``HarnessError``."""

    is_error: bool
    content: list[dict[str, str]]
    value: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The text of the content blocks, joined."""
        return "".join(block["text"] for block in self.content)

    def to_dict(self) -> dict[str, Any]:
        """The upstream camelCase shape: ``{content, isError, value?, error?}``."""
        result: dict[str, Any] = {"content": self.content, "isError": self.is_error}
        if self.value is not None:
            result["value"] = self.value
        if self.error is not None:
            result["error"] = self.error
        return result


# The arguments as the model sends them. TypedDicts keep exactly the keys that were given
# (so absent keys stay absent) and drop the keys the schema does not name.
@with_config(ConfigDict(strict=True))
class _OptionArgs(TypedDict):
    label: str
    description: NotRequired[str]


@with_config(ConfigDict(strict=True))
class _QuestionArgs(TypedDict):
    id: str
    question: str
    header: NotRequired[str]
    options: NotRequired[list[_OptionArgs]]
    multi_select: NotRequired[bool]


@with_config(ConfigDict(strict=True))
class _Args(TypedDict):
    questions: list[_QuestionArgs]


@with_config(ConfigDict(strict=True, extra="forbid"))
class _AnswerOutput(TypedDict):
    id: str
    selected: list[str]
    custom: NotRequired[str]


@with_config(ConfigDict(strict=True, extra="forbid"))
class _Output(TypedDict):
    answers: list[_AnswerOutput]


_ARGS: Final = TypeAdapter(_Args)
_WIRE_KEYS: Final = {"multi_select": "multiSelect"}
_OUTPUT: Final = TypeAdapter(_Output)


def _violations(error: ValidationError) -> list[str]:
    """``path: message`` for each pydantic error, the path being its dotted ``loc``."""
    return [
        f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
        for item in error.errors()
    ]


def to_request(
    args: object, *, agent: Agent | None = None, signal: AbortSignal | None = None
) -> AskUserQuestionRequest:
    """The request the model's arguments make, as upstream maps them: each question with only
    the keys given (``multiSelect`` on the wire), ``agent`` and ``signal`` only when given;
    :class:`ToolArgsError` when ``args`` does not match the schema."""
    try:
        parsed = _ARGS.validate_python(args)
    except ValidationError as exc:
        raise ToolArgsError(_violations(exc)) from exc
    questions = [
        AskUserQuestionItem.model_validate({_WIRE_KEYS.get(k, k): v for k, v in q.items()})
        for q in parsed["questions"]
    ]
    given = (("agent", agent), ("signal", signal))
    extras: dict[str, Any] = {key: value for key, value in given if value is not None}
    return AskUserQuestionRequest(questions=questions, **extras)


def _output(answer: object) -> dict[str, Any]:
    """``{answers: [{id, selected, custom?}]}``, copied as-is, checked against the output schema."""
    if isinstance(answer, Mapping):
        # A provider's plain object of the answer's shape, as upstream reads any object
        # with ``answers`` (what breaks the shape is still a ToolOutputError).
        try:
            answer = AskUserQuestionAnswer.model_validate(answer)
        except ValidationError as exc:
            raise ToolOutputError(_violations(exc)) from exc
    if not isinstance(answer, AskUserQuestionAnswer):
        raise ToolOutputError(
            [f"<root>: expected an AskUserQuestionAnswer, got {type(answer).__name__}"]
        )
    value: dict[str, Any] = {"answers": []}
    for item in answer.answers:
        projected: dict[str, Any] = {"id": item.id, "selected": list(item.selected)}
        if item.custom is not None:
            projected["custom"] = item.custom
        value["answers"].append(projected)
    try:
        _OUTPUT.validate_python(value)
    except ValidationError as exc:
        raise ToolOutputError(_violations(exc)) from exc
    return value


def error_result(error: BaseException) -> ToolResult:
    """The error result for ``error``: text ``Error: <message>``, ``info`` for a HarnessError."""
    message = error.message if isinstance(error, HarnessError) else str(error)
    failure: dict[str, Any] = {"message": message}
    if isinstance(error, HarnessError):
        failure["info"] = {"name": error.name, "code": error.code}
    return ToolResult(
        is_error=True,
        content=[{"type": "text", "text": f"Error: {message}"}],
        error=failure,
    )


def aborted_result() -> ToolResult:
    """What a successful call becomes when the caller's signal aborted meanwhile."""
    return ToolResult(
        is_error=True,
        content=[{"type": "text", "text": f"Error: {TOOL_CALL_ABORTED}"}],
        error={"message": TOOL_CALL_ABORTED, "info": {"name": "AbortError", "code": "ABORTED"}},
    )


async def execute(
    service: UserQuestionService,
    args: object,
    *,
    agent: Agent | None = None,
    signal: AbortSignal | None = None,
) -> ToolResult:
    """Run ``ask_user_question``: an error result for invalid arguments, for any error the
    service or its provider raises (its ``code`` kept) and for an answer breaking the output
    schema; only ``asyncio.CancelledError`` (and other non-``Exception`` exits) propagates."""
    try:
        request = to_request(args, agent=agent, signal=signal)
        value = _output(await service.ask(request))
    except Exception as exc:  # the model gets every failure as text; cancellation propagates
        return error_result(exc)
    if signal is not None and signal.aborted:
        # As the harness's tool registry does: a success that arrives after the caller's
        # signal aborted becomes the cancellation result (an error result stays as it is).
        return aborted_result()
    return ToolResult(
        is_error=False,
        content=[{"type": "text", "text": stringify(value)}],
        value=value,
    )
