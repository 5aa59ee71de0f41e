"""The dsh 0.1.1-rc.2 wire (``GET /api/events.mux``, ``POST /api/respond``), pure: frames
parse to typed payloads (other methods: ``OtherPayload``), unknown keys dropped as the host does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    model_validator,
)

from adapters.dsh.wire import Lenient as _Lenient
from adapters.dsh.wire import describe_validation_error, load_json
from bot.questions.models import (
    AskUserQuestionAnswer,
    AskUserQuestionItem,
    WireModel,
)

__all__ = [
    "ANSWERED_METHODS",
    "APPROVAL_REQUESTED",
    "APPROVAL_RESOLVED",
    "CANCELLED_CODE",
    "EVENTS_MUX_PATH",
    "QUESTION_REQUESTED",
    "QUESTION_RESOLVED",
    "RESPOND_PATH",
    "SESSION_HISTORY_PATH",
    "ApprovalOutcome",
    "ApprovalRequested",
    "ApprovalResolved",
    "HostOption",
    "HostPlanReviewIntent",
    "HostQuestion",
    "OtherPayload",
    "Outcome",
    "QuestionRequested",
    "QuestionResolved",
    "Receipt",
    "ReceiptReason",
    "ResolvedOutcome",
    "ServerRequest",
    "answer_problem",
    "answer_response",
    "approval_headline",
    "approval_response",
    "cancel_response",
    "describe_validation_error",
    "parse_frame",
]

EVENTS_MUX_PATH: Final = "/api/events.mux"
RESPOND_PATH: Final = "/api/respond"
SESSION_HISTORY_PATH: Final = "/api/session.history"

APPROVAL_REQUESTED: Final = "approval/requested"
APPROVAL_RESOLVED: Final = "approval/resolved"
APPROVAL_METHODS: Final = frozenset({APPROVAL_REQUESTED, APPROVAL_RESOLVED})

ApprovalOutcome: TypeAlias = Literal["allowed-once", "rejected"]
"""What a client may answer."""
ResolvedOutcome: TypeAlias = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
"""How an approval ended, as ``approval/resolved`` says."""

QUESTION_REQUESTED: Final = "question/requested"
QUESTION_RESOLVED: Final = "question/resolved"
QUESTION_METHODS: Final = frozenset({QUESTION_REQUESTED, QUESTION_RESOLVED})
ANSWERED_METHODS: Final = QUESTION_METHODS | APPROVAL_METHODS
"""The methods whose payloads are read (every other method is a push, kept opaque)."""

CANCELLED_CODE: Final = "cancelled"
CANCEL_MESSAGE: Final = "the user closed this question request"

Outcome: TypeAlias = Literal["answered", "cancelled"]
ReceiptReason: TypeAlias = Literal["not-pending", "bad-response"]


# --------------------------------------------------------------------------- downlink


class HostOption(_Lenient):
    """``AskUserQuestionOption`` as the host's frame schema reads it: other keys dropped."""

    label: str
    description: str | None = None


class HostPlanReviewIntent(_Lenient):
    """``PlanReviewIntent`` as the host's frame schema reads it: other keys dropped."""

    kind: Literal["plan-review"]
    approve: str


class HostQuestion(_Lenient):
    """``AskUserQuestionItem`` as the host's frame schema reads it (§7): unknown keys dropped at
    every level (an LLM may add ``"recommended": true`` and the host relays it), an unknown
    intent ``kind`` still refused, as the host's schema does."""

    id: str
    question: str
    detail: str | None = None
    header: str | None = None
    options: list[HostOption] | None = None
    multi_select: bool | None = None
    intent: Annotated[HostPlanReviewIntent, Field(discriminator="kind")] | None = None

    def to_item(self) -> AskUserQuestionItem:
        """The seam's question from the known keys, as given (no defaults added)."""
        return AskUserQuestionItem.model_validate(self.to_wire())


class QuestionRequested(_Lenient):
    """Payload of ``question/requested``: a pending ask, answerable with the frame's rpcId;
    ``questions`` are the seam's models, ``host_questions`` what was read (wire: ``questions``)."""

    type: Literal["question/requested"]
    session_id: str
    host_questions: Annotated[list[HostQuestion], Field(min_length=1, alias="questions")]
    _questions: list[AskUserQuestionItem] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _build_seam_questions(self) -> QuestionRequested:
        self._questions = [question.to_item() for question in self.host_questions]
        return self

    @property
    def questions(self) -> list[AskUserQuestionItem]:
        """The questions as the seam's ``AskUserQuestionItem``s, in the host's order."""
        return self._questions


class QuestionResolved(_Lenient):
    """Payload of ``question/resolved``: the ask ``question_rpc_id`` is over."""

    type: Literal["question/resolved"]
    session_id: str
    question_rpc_id: str
    outcome: Outcome


class ApprovalRequested(_Lenient):
    """Payload of ``approval/requested``: a tool waits for permission (answer with the rpcId)."""

    type: Literal["approval/requested"]
    session_id: str
    approval_id: Annotated[str, Field(min_length=1)]
    tool_name: str
    call_id: str | None = None
    reason: str | None = None


class ApprovalResolved(_Lenient):
    """Payload of ``approval/resolved``: approval ``approval_id`` is over."""

    type: Literal["approval/resolved"]
    session_id: str
    approval_id: str
    outcome: ResolvedOutcome


def approval_headline(payload: ApprovalRequested) -> str:
    """The panel's headline: the reason, or "Tool {toolName} requests privileged execution"."""
    reason = (payload.reason or "").strip()
    return reason or f"Tool {payload.tool_name} requests privileged execution"


def approval_response(
    rpc_id: str, session_id: str, approval_id: str, outcome: ApprovalOutcome
) -> dict[str, Any]:
    """The ok ``ClientResponse`` answering approval ``approval_id``."""
    value = {"sessionId": session_id, "approvalId": approval_id, "outcome": outcome}
    return _response(rpc_id, {"ok": True, "value": value})


def _response(rpc_id: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"type": "client-response", "rpcId": rpc_id, "result": result}


class OtherPayload(WireModel):
    """The payload of any other method, kept as is (``model_extra``) and ignored by a client."""

    model_config = ConfigDict(extra="allow")

    @property
    def kind(self) -> Any:
        """The payload's ``type`` key, if any."""
        return (self.model_extra or {}).get("type")


def _method_of(data: dict[str, Any]) -> str | None:
    """The envelope's ``method`` if it is a string (a list or object is no method at all)."""
    method = data.get("method")
    return method if isinstance(method, str) else None


def _payload_tag(value: Any) -> str:
    if isinstance(value, OtherPayload):
        return "other"
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in ANSWERED_METHODS else "other"


_Payload: TypeAlias = Annotated[
    Annotated[QuestionRequested, Tag(QUESTION_REQUESTED)]
    | Annotated[QuestionResolved, Tag(QUESTION_RESOLVED)]
    | Annotated[ApprovalRequested, Tag(APPROVAL_REQUESTED)]
    | Annotated[ApprovalResolved, Tag(APPROVAL_RESOLVED)]
    | Annotated[OtherPayload, Tag("other")],
    Discriminator(_payload_tag),
]


class ServerRequest(_Lenient):
    """One downlink frame; the payload is read by ``method`` (other methods: ``OtherPayload``)."""

    # The question and approval methods get their schema, and a payload ``type`` that disagrees with
    # ``method`` is refused; any other method gets an ``OtherPayload``, whatever it holds.

    type: Literal["server-request"]
    rpc_id: str
    method: str
    payload: _Payload

    @model_validator(mode="before")
    @classmethod
    def _other_methods_stay_opaque(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and _method_of(data) not in ANSWERED_METHODS
            and isinstance(data.get("payload"), dict)
        ):
            return {**data, "payload": OtherPayload.model_validate(data["payload"])}
        return data

    @model_validator(mode="after")
    def _payload_matches_method(self) -> ServerRequest:
        if self.method in ANSWERED_METHODS:
            payload = self.payload
            kind = payload.kind if isinstance(payload, OtherPayload) else payload.type
            if kind != self.method:
                raise ValueError(
                    f"a {self.method} frame needs a payload of type {self.method!r}, "
                    f"got type {kind!r}"
                )
        return self


def parse_frame(text: str | bytes) -> ServerRequest:
    """One downlink message as a ``ServerRequest``; ``ValueError`` says what is wrong."""
    data = load_json(text, "frame")
    if not isinstance(data, dict):
        raise ValueError(f"frame is not a JSON object but {type(data).__name__}")
    try:
        return ServerRequest.model_validate(data)
    except ValidationError as exc:
        method = _method_of(data)
        what = f"{method} frame" if method in ANSWERED_METHODS else "server-request envelope"
        raise ValueError(f"bad {what}: {describe_validation_error(exc)}") from None


# --------------------------------------------------------------------------- uplink


def answer_response(rpc_id: str, session_id: str, answer: AskUserQuestionAnswer) -> dict[str, Any]:
    """The ok ``ClientResponse`` carrying one whole answer batch (``custom`` omitted if absent)."""
    value = {"sessionId": session_id, "answer": answer.to_wire()}
    return _response(rpc_id, {"ok": True, "value": value})


def cancel_response(rpc_id: str) -> dict[str, Any]:
    """The cancelled ``ClientResponse``: the user dismissed the ask (host → ``ASK_CANCELLED``)."""
    error = {"code": CANCELLED_CODE, "message": CANCEL_MESSAGE, "details": {}}
    return _response(rpc_id, {"ok": False, "error": error})


class Receipt(_Lenient):
    """The host's answer to a POST: ``{"accepted": true}`` or ``{"accepted": false, reason}``."""

    accepted: bool
    reason: ReceiptReason | None = None


# --------------------------------------------------------------------------- matchesQuestions

# ECMAScript's WhiteSpace and LineTerminator, which ``String.prototype.trim`` removes. Not
# ``str.strip()``'s set: JS trims U+FEFF but not U+001C-U+001F or U+0085.
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _labels(labels: Sequence[str]) -> str:
    return ", ".join(repr(label) for label in labels)


def answer_problem(
    questions: Sequence[AskUserQuestionItem], answer: AskUserQuestionAnswer
) -> str | None:
    """Why the host's ``matchesQuestions`` would refuse ``answer`` (first rule broken), or None."""
    # §6.1 minus the sessionId check, which needs the pending ask: compare it separately.
    answers = answer.answers
    if len(answers) != len(questions):
        return f"expected {len(questions)} answer(s), one per question in order, got {len(answers)}"
    for position, (item, question) in enumerate(zip(answers, questions, strict=True), 1):
        if item.id != question.id:
            return (
                f"answer #{position} has id {item.id!r} but question #{position} is "
                f"{question.id!r}; answers go in question order"
            )
        selected = item.selected
        if len(set(selected)) != len(selected):
            repeated = [label for index, label in enumerate(selected) if label in selected[:index]]
            return f"answer to {question.id!r} selects {repeated[0]!r} more than once"
        if item.custom is not None and item.custom.strip(_JS_WHITESPACE) == "":
            return f"answer to {question.id!r} has blank custom text; leave custom out instead"
        if not question.is_multi_select:
            if item.custom is not None and selected:
                return (
                    f"question {question.id!r} is single-select: custom text replaces the "
                    "choice, so selected must be [] when custom is given "
                    f"(got [{_labels(selected)}])"
                )
            if len(selected) > 1:
                return (
                    f"question {question.id!r} is single-select but {len(selected)} labels "
                    f"are selected ({_labels(selected)})"
                )
        options = question.option_labels
        for label in selected:
            if label not in options:
                if not options:
                    return (
                        f"question {question.id!r} has no options, so selected must be []; "
                        f"got {label!r}"
                    )
                return (
                    f"answer to {question.id!r} selects {label!r}, which is not one of its "
                    f"options ({_labels(options)})"
                )
    return None
