"""Session events and the tool calls they carry, read from host text: pure, no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from adapters.dsh.wire import scrub, scrub_text

__all__ = [
    "SESSION_EVENT",
    "SESSION_HISTORY_PATH",
    "SessionEvent",
    "ToolCall",
    "event_of",
    "history_events",
    "session_event",
    "tool_call_of",
]

SESSION_EVENT: Final = "session/event"
SESSION_HISTORY_PATH: Final = "/api/session.history"

_COMMAND_KEYS: Final = ("command", "cmd", "script")
_PATH_KEYS: Final = ("path", "file_path", "filePath", "file", "filename")


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One ``session/event`` push: its session, event type, sequence number and data."""

    session_id: str
    kind: str
    seq: int | None
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """What a tool call will do: its name and, when its arguments say, command or path."""

    call_id: str
    name: str
    command: str | None = None
    path: str | None = None
    description: str | None = None


def event_of(session_id: Any, event: Any) -> SessionEvent | None:
    if not isinstance(session_id, str) or not isinstance(event, Mapping):
        return None
    kind, data, seq = event.get("type"), event.get("data"), event.get("seq")
    if not isinstance(kind, str):
        return None
    return SessionEvent(
        scrub_text(session_id),
        scrub_text(kind),
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        data if isinstance(data, Mapping) else {},
    )


def session_event(payload: Mapping[str, Any]) -> SessionEvent | None:
    """The event in a ``session/event`` payload, or ``None`` if it has none."""
    return event_of(payload.get("sessionId"), payload.get("event"))


def _text(value: Any) -> str | None:
    return scrub_text(value) if isinstance(value, str) and value.strip() else None


def tool_call_of(data: Mapping[str, Any]) -> ToolCall | None:
    """A ``tool/call`` event's data as a ``ToolCall`` (``None`` without a callId and name)."""
    call_id, name = data.get("callId"), data.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        return None
    call_id, name = scrub_text(call_id), scrub_text(name)  # host text: no lone surrogates
    raw = data.get("arguments")
    arguments: Any = raw
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw)
        except (ValueError, RecursionError):
            arguments = None
    if not isinstance(arguments, Mapping):
        return ToolCall(call_id, name)
    command = next((c for k in _COMMAND_KEYS if (c := _text(arguments.get(k)))), None)
    path = next((p for k in _PATH_KEYS if (p := _text(arguments.get(k)))), None)
    return ToolCall(call_id, name, command, path, _text(arguments.get("description")))


def history_events(session_id: str, body: Any) -> list[SessionEvent]:
    """The events of a ``session.history`` response, oldest first (unknown shapes: none)."""
    items: Any = scrub(body)  # host text: lone surrogates become U+FFFD
    if isinstance(body, Mapping):
        items = next(
            (body[k] for k in ("events", "items", "history") if isinstance(body.get(k), list)), []
        )
    if not isinstance(items, list):
        return []
    events = []
    for item in items:
        if isinstance(item, Mapping):
            inner = item.get("event") if isinstance(item.get("event"), Mapping) else item
            event = event_of(session_id, inner)
            if event is not None:
                events.append(event)
    return events
