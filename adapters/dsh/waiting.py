"""Host requests waiting for a place in Slack: each session shows a few at a time, in order."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator

from adapters.dsh.asks import HostAsk

__all__ = ["WaitingRoom"]


class WaitingRoom:
    """Per session, the requests not shown yet, oldest first."""

    def __init__(self) -> None:
        self._sessions: dict[str, OrderedDict[str, HostAsk]] = {}

    def __len__(self) -> int:
        return sum(len(waiting) for waiting in self._sessions.values())

    def __iter__(self) -> Iterator[HostAsk]:
        for waiting in self._sessions.values():
            yield from waiting.values()

    def __contains__(self, rpc_id: object) -> bool:
        return any(rpc_id in waiting for waiting in self._sessions.values())

    def add(self, ask: HostAsk) -> bool:
        """Queue ``ask`` last in its session; ``True`` if its session had none waiting."""
        waiting = self._sessions.setdefault(ask.session_id, OrderedDict())
        waiting[ask.rpc_id] = ask
        return len(waiting) == 1

    def next_of(self, first: str, room: Callable[[str], bool]) -> HostAsk | None:
        """Take the oldest waiting request of ``first``, else of the first session to queue
        that ``room`` says may show one more."""
        for session in (first, *self._sessions):
            if room(session) and (waiting := self._sessions.get(session)):
                _, ask = waiting.popitem(last=False)
                if not waiting:
                    del self._sessions[session]
                return ask
        return None

    def has_waiting(self, session_id: str) -> bool:
        """Whether requests of ``session_id`` wait."""
        return bool(self._sessions.get(session_id))

    def remove(self, matches: Callable[[HostAsk], bool]) -> int:
        """Drop the waiting requests ``matches`` picks; how many were dropped."""
        dropped = 0
        for session_id, waiting in list(self._sessions.items()):
            for rpc_id in [r for r, ask in waiting.items() if matches(ask)]:
                del waiting[rpc_id]
                dropped += 1
            if not waiting:
                del self._sessions[session_id]
        return dropped

    def clear(self) -> None:
        """Forget every waiting request."""
        self._sessions.clear()
