"""What a session's log says of the requests asked on it: how each ended, and whether with
the answer this client sent (the host gives no receipts)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from adapters.dsh.mux import Waterfall
from adapters.dsh.session_log import SessionLog

__all__ = ["Verdicts"]

_REMEMBERED: Final = 4096


@dataclass(frozen=True, slots=True)
class _Asked:
    """What is remembered of a request: its session, its tool call, its questions."""

    session_id: str
    call_id: str | None
    questions: tuple[Any, ...] = ()


class Verdicts:
    """The requests asked (the latest ``_REMEMBERED``), read against the session ``log``."""

    def __init__(self, log: SessionLog) -> None:
        self.log = log
        self._asked: OrderedDict[str, _Asked] = OrderedDict()

    def asked(self, request: Waterfall) -> None:
        """Remember ``request`` (again: it becomes the latest)."""
        questions = tuple(request.question.questions) if request.question else ()
        self._asked.pop(request.event_id, None)
        self._asked[request.event_id] = _Asked(request.session_id, request.call_id, questions)
        while len(self._asked) > _REMEMBERED:
            self._asked.popitem(last=False)

    def outcome(self, event_id: str) -> str | None:
        """How the log says request ``event_id`` ended: ``answered``, ``cancelled``, or an
        approval's outcome; ``None`` while the log does not say."""
        asked = self._asked.get(event_id)
        call_id = self._call_id(event_id)
        if asked is None or call_id is None:
            return None
        if not asked.questions:
            return self.log.decision(asked.session_id, call_id)
        result = self.log.result(asked.session_id, call_id)
        if result is None:
            return None
        return "cancelled" if result.is_error else "answered"

    def _call_id(self, event_id: str) -> str | None:
        asked = self._asked.get(event_id)
        if asked is None:
            return None
        if asked.call_id is None and asked.questions:
            return self.log.question_call(asked.session_id, asked.questions)
        return asked.call_id

    def verdict(self, event_id: str, outcome: dict[str, Any]) -> bool | None:
        """Whether the log shows ``outcome`` as the request's (``None``: not yet)."""
        asked = self._asked.get(event_id)
        call_id = self._call_id(event_id)
        if asked is None or call_id is None:
            return None
        if not asked.questions:
            decided = self.log.decision(asked.session_id, call_id)
            return None if decided is None else decided == outcome.get("value")
        result = self.log.result(asked.session_id, call_id)
        if result is None:
            return None
        if outcome["kind"] == "rejected":
            return result.code == "ASK_CANCELLED"
        if result.is_error:
            return False
        answers = result.answers
        return answers is None or answers == outcome["value"]["answers"]
