"""What the sessions' logs say (dsh 0.2, which has no receipts): the tool calls, and how each
request ended (``tool/result`` of the asking call, ``approval/decided``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from adapters.dsh.events import SessionEvent, ToolCall, event_of, tool_call_of
from adapters.dsh.wire import scrub_text

__all__ = ["CallResult", "SessionLog"]

_REMEMBERED: Final = 2048
_ASK_TOOL: Final = "ask_user_question"


@dataclass(frozen=True, slots=True)
class CallResult:
    """A ``tool/result``: its text, whether it failed, and its error code (if any)."""

    text: str | None
    is_error: bool
    code: str | None

    @property
    def answers(self) -> Any:
        """The ``answers`` of a question's result text (``None`` if it holds none)."""
        try:
            value = json.loads(self.text or "")
        except (ValueError, RecursionError):
            return None
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
    return scrub_text(message["toolCallId"]), CallResult(
        scrub_text("".join(texts)) if texts else None,
        message.get("isError") is True,
        code if isinstance(code, str) else None,
    )


def _question_keys(questions: Any) -> tuple[tuple[Any, Any], ...] | None:
    if not isinstance(questions, list):
        return None
    return tuple(
        (q.get("id"), q.get("question")) if isinstance(q, Mapping) else (None, None)
        for q in questions
    )


def _put(entries: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    entries.pop(key, None)
    entries[key] = value
    while len(entries) > _REMEMBERED:
        entries.popitem(last=False)


class SessionLog:
    """The recent calls, results and approval decisions of the followed sessions."""

    def __init__(self) -> None:
        self._calls: OrderedDict[tuple[str, str], ToolCall] = OrderedDict()
        self._asks: OrderedDict[tuple[str, str], tuple[tuple[Any, Any], ...]] = OrderedDict()
        self._results: OrderedDict[tuple[str, str], CallResult] = OrderedDict()
        self._approvals: OrderedDict[tuple[str, str], str] = OrderedDict()  # approval id → call
        self._decided: OrderedDict[tuple[str, str], str] = OrderedDict()  # call → outcome
        self._changed = asyncio.Event()

    def observe(self, event: SessionEvent) -> None:
        """Take note of one log event (others than calls, results, approvals: ignored)."""
        sid, data = event.session_id, event.data
        if event.kind == "tool/call" and (call := tool_call_of(data)) is not None:
            _put(self._calls, (sid, call.call_id), call)
            self._results.pop((sid, call.call_id), None)  # callIds repeat across turns
            self._decided.pop((sid, call.call_id), None)
            if call.name == _ASK_TOOL and isinstance(data.get("arguments"), str):
                try:
                    arguments = json.loads(data["arguments"])
                except (ValueError, RecursionError):
                    arguments = None
                keys = (
                    _question_keys(arguments.get("questions"))
                    if isinstance(arguments, dict)
                    else None
                )
                if keys is not None:
                    _put(self._asks, (sid, call.call_id), keys)
        elif event.kind == "tool/result" and (found := _result_of(data)) is not None:
            _put(self._results, (sid, found[0]), found[1])
        elif event.kind == "approval/asked":
            approval_id, call_id = data.get("id"), data.get("callId")
            if isinstance(approval_id, str) and isinstance(call_id, str):
                _put(self._approvals, (sid, approval_id), call_id)
        elif event.kind == "approval/decided":
            call_id = self._approvals.get((sid, str(data.get("id"))))
            outcome = data.get("outcome")
            if call_id is not None and isinstance(outcome, str):
                _put(self._decided, (sid, call_id), outcome)
        else:
            return
        self._changed.set()
        self._changed = asyncio.Event()

    def item(self, session_id: str, value: Any) -> bool:
        """Take an item of a ``session/follow`` stream: a snapshot's records (``True``) or one
        event."""
        if not isinstance(value, dict):
            return False
        if value.get("type") == "snapshot":
            records = value.get("records")
            for record in records if isinstance(records, list) else []:
                if isinstance(record, dict):
                    self._take(session_id, record.get("event"))
            self.observe(SessionEvent(session_id, "snapshot", None, {}))
            return True
        if value.get("type") == "event":
            self._take(session_id, value.get("event"))
        return False

    def _take(self, session_id: str, event: Any) -> None:
        found = event_of(session_id, event)
        if found is not None:
            self.observe(found)

    def unreadable(self, session_id: str, call_id: str) -> None:
        """A ``tool/call`` of ``call_id`` came too big to read: forget its earlier call."""
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

    def result(self, session_id: str, call_id: str) -> CallResult | None:
        """The result of tool call ``call_id``, once the log has it."""
        return self._results.get((session_id, call_id))

    def decision(self, session_id: str, call_id: str) -> str | None:
        """How the approval of tool call ``call_id`` was decided, once the log says."""
        return self._decided.get((session_id, call_id))

    async def changed(self, wait: float) -> None:
        """Wait up to ``wait`` s for the next event noted."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), wait)
