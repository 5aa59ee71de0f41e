"""What the sessions' logs say (``session/follow``): the tool calls, the call each approval
is for, and how each request of the host ended (dsh 0.2 gives no receipts)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from adapters.dsh.mux import Waterfall, scrub_text

_REMEMBERED: Final = 2048
_ASK_TOOL: Final = "ask_user_question"

_COMMAND_KEYS: Final = ("command", "cmd", "script")
_PATH_KEYS: Final = ("path", "file_path", "filePath", "file", "filename")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """What a tool call will do: its name and, when its arguments say, command or path."""

    call_id: str
    name: str
    command: str | None = None
    path: str | None = None
    description: str | None = None


def _text(value: Any) -> str | None:
    return scrub_text(value) if isinstance(value, str) and value.strip() else None


def tool_call_of(data: Mapping[str, Any]) -> ToolCall | None:
    """A ``tool/call`` event's data as a ``ToolCall`` (``None`` without a callId and name)."""
    call_id, name = data.get("callId"), data.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        return None
    arguments: Any = data.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):  # left a string: not read
            arguments = json.loads(arguments)
    if not isinstance(arguments, Mapping):
        return ToolCall(call_id, name)
    command = next((c for k in _COMMAND_KEYS if (c := _text(arguments.get(k)))), None)
    path = next((p for k in _PATH_KEYS if (p := _text(arguments.get(k)))), None)
    return ToolCall(call_id, name, command, path, _text(arguments.get("description")))


@dataclass(frozen=True, slots=True)
class CallResult:
    """A ``tool/result``: its text, whether it failed, and its error code (if any)."""

    text: str | None
    is_error: bool
    code: str | None

    @property
    def answers(self) -> Any:
        """The ``answers`` of a question's result text (``None`` if it holds none)."""
        value: Any = None
        with contextlib.suppress(ValueError, RecursionError):
            value = json.loads(self.text or "")
        return value.get("answers") if isinstance(value, dict) else None


def _result_of(data: Mapping[str, Any]) -> tuple[str, CallResult] | None:
    message = data.get("message")
    if not isinstance(message, Mapping) or not isinstance(message.get("toolCallId"), str):
        return None
    content = message.get("content")
    texts = [
        part["text"]
        for part in (content if isinstance(content, list) else [])
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    ]
    error = data.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    return message["toolCallId"], CallResult(
        "".join(texts) if texts else None,
        message.get("isError") is True,
        code if isinstance(code, str) else None,
    )


def _question_keys(arguments: Any) -> tuple[tuple[Any, Any], ...] | None:
    try:
        questions = json.loads(arguments).get("questions")
    except (ValueError, RecursionError, TypeError, AttributeError):
        return None
    if not isinstance(questions, list):
        return None
    return tuple(
        (q.get("id"), q.get("question")) if isinstance(q, Mapping) else (None, None)
        for q in questions
    )


class SessionLog:
    """The latest ``remembered`` calls, results, approvals and decisions of the sessions, and
    the requests asked on them."""

    def __init__(self, remembered: int = _REMEMBERED) -> None:
        self._remembered = remembered
        self._calls: OrderedDict[tuple[str, str], ToolCall] = OrderedDict()
        self._asks: OrderedDict[tuple[str, str], tuple[tuple[Any, Any], ...]] = OrderedDict()
        self._results: OrderedDict[tuple[str, str], CallResult] = OrderedDict()
        self._approvals: OrderedDict[tuple[str, str], str] = OrderedDict()  # id → its callId
        self._decided: OrderedDict[tuple[str, str], str] = OrderedDict()  # call → outcome
        self._requests: OrderedDict[str, Waterfall] = OrderedDict()
        self._changed = asyncio.Event()

    def _put(self, entries: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        entries.pop(key, None)
        entries[key] = value
        while len(entries) > self._remembered:
            entries.popitem(last=False)

    def observe(self, sid: str, event: Any) -> None:
        """Take note of one event (others than calls, results, approvals: ignored)."""
        if not isinstance(event, Mapping):
            return
        kind, data = event.get("type"), event.get("data")
        data = data if isinstance(data, Mapping) else {}
        if kind == "tool/call" and (call := tool_call_of(data)) is not None:
            self._put(self._calls, (sid, call.call_id), call)
            self._results.pop((sid, call.call_id), None)  # callIds repeat across turns
            self._decided.pop((sid, call.call_id), None)
            keys = _question_keys(data.get("arguments")) if call.name == _ASK_TOOL else None
            if keys is not None:
                self._put(self._asks, (sid, call.call_id), keys)
        elif kind == "tool/result" and (found := _result_of(data)) is not None:
            self._put(self._results, (sid, found[0]), found[1])
        elif kind == "approval/asked" and isinstance(approval_id := data.get("id"), str):
            if isinstance(call_id := data.get("callId"), str):
                self._put(self._approvals, (sid, approval_id), call_id)
        elif kind == "approval/decided":
            call_id = self._approvals.get((sid, str(data.get("id"))))
            outcome = data.get("outcome")
            if call_id is not None and isinstance(outcome, str):
                self._put(self._decided, (sid, call_id), outcome)
        else:
            return
        self._changed.set()
        self._changed = asyncio.Event()

    def item(self, session_id: str, value: Any) -> bool:
        """Take a ``session/follow`` item: a snapshot's records (``True``) or one event."""
        if not isinstance(value, dict):
            return False
        if value.get("type") == "snapshot":
            records = value.get("records")
            for record in records if isinstance(records, list) else []:
                if isinstance(record, dict):
                    self.observe(session_id, record.get("event"))
            return True
        if value.get("type") == "event":
            self.observe(session_id, value.get("event"))
        return False

    def unreadable(self, session_id: str, call_id: str) -> None:
        """A ``tool/call`` of ``call_id`` came too big to read: its earlier call (callIds
        repeat across turns) must not stand in for it."""
        self._calls.pop((session_id, call_id), None)

    def call(self, session_id: str, call_id: str) -> ToolCall | None:
        """The tool call ``call_id`` of the session, if seen."""
        return self._calls.get((session_id, call_id))

    def question_call(self, session_id: str, questions: Sequence[Any]) -> str | None:
        """The latest ``ask_user_question`` call of the session asking these questions."""
        keys = tuple((q.id, q.question) for q in questions)
        for (sid, call_id), asked in reversed(self._asks.items()):
            if sid == session_id and asked == keys:
                return call_id
        return None

    def asked(self, request: Waterfall) -> None:
        """Remember a request of the host (again: it becomes the latest)."""
        self._put(self._requests, request.event_id, request)

    def _ending(self, event_id: str) -> str | CallResult | None:
        """How request ``event_id`` ended, once logged: its decision or its tool result."""
        asked = self._requests.get(event_id)
        if asked is None:
            return None
        call_id = asked.call_id
        if call_id is None and asked.questions:
            call_id = self.question_call(asked.session_id, asked.questions)
        if call_id is None:
            return None
        key = (asked.session_id, call_id)
        return self._results.get(key) if asked.questions else self._decided.get(key)

    def outcome(self, event_id: str) -> str | None:
        """How request ``event_id`` ended: ``answered``, ``cancelled``, or an approval's
        outcome; ``None`` while the log does not say."""
        found = self._ending(event_id)
        if found is None or isinstance(found, str):
            return found
        return "cancelled" if found.is_error else "answered"

    def verdict(self, event_id: str, outcome: dict[str, Any]) -> bool | None:
        """Whether the log shows ``outcome`` as the request's; ``None``: not yet."""
        found = self._ending(event_id)
        if found is None or isinstance(found, str):
            return None if found is None else found == outcome.get("value")
        if outcome["kind"] == "rejected":
            return found.code == "ASK_CANCELLED"
        answers = found.answers
        return not found.is_error and (answers is None or answers == outcome["value"]["answers"])

    async def changed(self, wait: float) -> None:
        """Wait up to ``wait`` s for the next event noted."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), wait)
