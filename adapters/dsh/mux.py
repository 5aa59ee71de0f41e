"""The dsh 0.2 wire, pure: one WebSocket carries streams (``open`` out; ``item`` / ``end`` /
``error`` back): ``$events`` gives ``ready``, ``waterfall`` and ``cancel``; ``session/follow``
a session's log. JSON is decoded with bounded nesting and no lone surrogates; questions and
approvals parsed to typed models (unknown keys dropped, as the host's own schema does);
one-line errors; the rules an answer obeys."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError

from adapters.urls import split_token
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem, WireModel

CONNECT_PATH: Final = "/connect"
MUX_PATH: Final = "/api/remote.mux"
RESULT_PATH: Final = "/api/$events/result"
EVENTS_STREAM: Final = "ev"
"""The streamId of the ``$events`` stream; a session's log stream is ``log:<sessionId>``."""
LOG_PREFIX: Final = "log:"
DISMISSED: Final = {
    "kind": "rejected",
    "error": {
        "name": "UserQuestionError",
        "message": "the user cancelled ask_user_question",
        "code": "ASK_CANCELLED",
    },
}
"""The outcome of a dismissed question (the tool fails with ``ASK_CANCELLED``)."""
QUESTION_EVENT: Final = "user-questions/request"
APPROVAL_EVENT: Final = "approval/request"
MAX_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted in a frame (the real host's is about 10)."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def scrub_text(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (JSON may escape half a pair) replaced by
    U+FFFD, since no UTF-8 encoder takes one."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def _scrub(value: Any, depth: int = 1) -> Any:
    """Decoded JSON with every lone surrogate in its strings, keys too, replaced by U+FFFD;
    ``ValueError`` past ``MAX_DEPTH`` levels (so it recurses at most that deep)."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, list | dict) and depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, list):
        return [_scrub(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {scrub_text(key): _scrub(item, depth + 1) for key, item in value.items()}
    return value


def load_json(text: str | bytes, what: str) -> Any:
    """Decode ``text``; ``ValueError`` names ``what`` and the problem (never RecursionError)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to decode") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from exc
    try:
        return _scrub(data)
    except ValueError as exc:
        raise ValueError(f"{what} is {exc}") from None


def describe_validation_error(error: ValidationError) -> str:
    """Pydantic's errors as one line: ``loc.path: message; …`` (wire names)."""
    parts = []
    for item in error.errors(include_url=False):
        path = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {message}" if path else message)
    return "; ".join(parts)


class QuestionRequested(WireModel):
    """A question waterfall's request, read with ``extra="ignore"`` (§7, zod's default): unknown
    keys dropped at every level (an LLM may add ``"recommended": true`` and the host relays
    it), an unknown intent ``kind`` still refused, as the host's schema does."""

    questions: Annotated[list[AskUserQuestionItem], Field(min_length=1)]


class ApprovalRequested(WireModel):
    """An approval waterfall's request: a tool waits for permission (``call_id``: its call)."""

    tool_name: str
    call_id: str | None = None
    reason: str | None = None


def approval_headline(payload: ApprovalRequested) -> str:
    """The panel's headline: the reason, or "Tool {toolName} requests privileged execution"."""
    reason = (payload.reason or "").strip()
    return reason or f"Tool {payload.tool_name} requests privileged execution"


def split_host_url(url: str) -> tuple[str, str | None]:
    """``(base, token)`` from ``DSH_HOST_URL``: no token, fragment or trailing ``/``."""
    rest, token = split_token(url)
    parts = urlsplit(rest)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/"), fragment="")), token


def open_frame(stream_id: str, endpoint: str, args: dict[str, Any]) -> dict[str, Any]:
    """The ``open`` frame of stream ``stream_id``: ``endpoint`` called with ``args``."""
    return {"type": "open", "streamId": stream_id, "endpoint": endpoint, "payload": {"args": args}}


def follow_frame(session_id: str) -> dict[str, Any]:
    """The ``open`` frame following a session's log (stream ``log:<sessionId>``)."""
    address = {"kind": "session", "sessionId": session_id}
    return open_frame(LOG_PREFIX + session_id, "session/follow", {"request": {"address": address}})


@dataclass(frozen=True, slots=True)
class MuxFrame:
    """One frame of the mux: ``item`` (with ``value``), ``end`` or ``error`` of a stream."""

    kind: Literal["item", "end", "error"]
    stream_id: str
    value: Any


def parse_mux(text: str | bytes) -> MuxFrame:
    """One mux message; ``ValueError`` says what is wrong (not JSON, too deep, no stream)."""
    data = load_json(text, "frame")
    if not isinstance(data, dict):
        raise ValueError(f"frame is not a JSON object but {type(data).__name__}")
    kind, stream = data.get("type"), data.get("streamId")
    if kind not in ("item", "end", "error") or not isinstance(stream, str):
        raise ValueError(f"not a mux item: type {str(kind)[:40]!r}, streamId {str(stream)[:40]!r}")
    return MuxFrame(kind, stream, data.get("value", data.get("error")))


@dataclass(frozen=True, slots=True)
class Ready:
    """``$events`` opened: answers on this socket carry ``client_id``."""

    client_id: str


@dataclass(frozen=True, slots=True)
class Waterfall:
    """A request of the host: a question batch (``questions``) or an approval (``approval``)."""

    event_id: str
    session_id: str
    questions: list[AskUserQuestionItem] = field(default_factory=list)
    approval: ApprovalRequested | None = None
    call_id: str | None = None
    """The tool call asking: an approval's ``callId``, a plan review's ``intent.callId``."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """The host withdrew request ``event_id`` (answered elsewhere, turn aborted, shutdown)."""

    event_id: str


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


def _waterfall(value: dict[str, Any]) -> Waterfall | None:
    event_id = _text(value.get("eventId"), "eventId")
    session_id = _text(value.get("agentId"), "agentId")
    request, event = value.get("request"), value.get("event")
    if not isinstance(request, dict):
        raise ValueError("waterfall request must be an object")
    try:
        if event == QUESTION_EVENT:
            asked = QuestionRequested.model_validate(request, extra="ignore").questions
            # As given: a key sent as null is left out, as the seam's checks read it.
            questions = [AskUserQuestionItem.model_validate(q.to_wire()) for q in asked]
            intent = request["questions"][0].get("intent")  # valid: a list of objects
            call = intent.get("callId") if isinstance(intent, dict) else None
            call_id = call if isinstance(call, str) else None
            return Waterfall(event_id, session_id, questions, call_id=call_id)
        if event == APPROVAL_EVENT:
            approval = ApprovalRequested.model_validate(request, extra="ignore")
            return Waterfall(event_id, session_id, approval=approval, call_id=approval.call_id)
    except ValidationError as exc:
        raise ValueError(f"bad {event} waterfall: {describe_validation_error(exc)}") from None
    return None  # another kind of waterfall: not ours to answer


def events_value(value: Any) -> Ready | Waterfall | Cancel | None:
    """An ``$events`` item as ``Ready``, ``Waterfall`` or ``Cancel``; ``None`` for pushes."""
    if not isinstance(value, dict):
        raise ValueError("an $events item must be an object")
    kind = value.get("type")
    if kind == "ready":
        return Ready(_text(value.get("clientId"), "clientId"))
    if kind == "waterfall":
        return _waterfall(value)
    if kind == "cancel":
        return Cancel(_text(value.get("eventId"), "eventId"))
    return None


def result(value: Any) -> dict[str, Any]:
    """The outcome answering a request with ``value``: an answer batch, or a decision."""
    return {"kind": "result", "value": value}


def result_body(
    rpc_id: str, client_id: str, event_id: str, outcome: dict[str, Any]
) -> dict[str, Any]:
    """The body of ``POST /api/$events/result``."""
    return {
        "type": "client-request",
        "rpcId": rpc_id,
        "method": "$events/result",
        "payload": {"args": {"clientId": client_id, "eventId": event_id, "outcome": outcome}},
    }


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
