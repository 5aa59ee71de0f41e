"""The dsh 0.2 wire, pure: one WebSocket carries streams (``open`` out; ``item`` / ``end`` /
``error`` back): ``$events`` gives ``ready``, ``waterfall`` and ``cancel``; ``session/follow``
a session's log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

from pydantic import ValidationError

from adapters.dsh.protocol import (
    LENIENT,
    ApprovalRequested,
    QuestionRequested,
    describe_validation_error,
    load_json,
)
from adapters.urls import split_token
from bot.questions.models import AskUserQuestionItem

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


def split_host_url(url: str) -> tuple[str, str | None]:
    """``(base, token)`` from ``DSH_HOST_URL``: no token, fragment or trailing ``/``."""
    rest, token = split_token(url)
    parts = urlsplit(rest)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/"), fragment="")), token


def login_path(token: str) -> str:
    """``/connect?token=…&interactions=answer``: logs in as an answering API client."""
    return f"{CONNECT_PATH}?{urlencode({'token': token, 'interactions': 'answer'})}"


def open_events_frame() -> dict[str, Any]:
    """The ``open`` frame of the ``$events`` stream."""
    return _open(EVENTS_STREAM, "$events", {})


def _open(stream_id: str, endpoint: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "open", "streamId": stream_id, "endpoint": endpoint, "payload": {"args": args}}


def follow_frame(session_id: str) -> dict[str, Any]:
    """The ``open`` frame following a session's log (stream ``log:<sessionId>``)."""
    address = {"kind": "session", "sessionId": session_id}
    return _open(LOG_PREFIX + session_id, "session/follow", {"request": {"address": address}})


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
            asked = QuestionRequested.model_validate(request, extra=LENIENT).questions
            # As given: a key sent as null is left out, as the seam's checks read it.
            questions = [AskUserQuestionItem.model_validate(q.to_wire()) for q in asked]
            intent = request["questions"][0].get("intent")  # valid: a list of objects
            call = intent.get("callId") if isinstance(intent, dict) else None
            call_id = call if isinstance(call, str) else None
            return Waterfall(event_id, session_id, questions, call_id=call_id)
        if event == APPROVAL_EVENT:
            approval = ApprovalRequested.model_validate(request, extra=LENIENT)
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
