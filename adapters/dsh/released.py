"""Requests a stopped bot released to the store: which are this host's, to adopt on replay
or close as gone."""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from adapters.dsh.asks import ask_key
from adapters.slack import PendingRecord, PendingStore, QuestionStatus

__all__ = ["HostRecords", "released_by_a_bot_of"]

KEY_PREFIX: Final = ask_key("")


@runtime_checkable
class HostRecords(Protocol):
    """What ending a request outside its ask takes of the provider (``SlackQuestionProvider``):
    its store, to list the requests a stopped bot released, and ``abort``."""

    @property
    def store(self) -> PendingStore:
        """Where the requests are kept (shared with the bots before this one)."""
        ...

    async def abort(
        self, request_id: str, note: str, *, by: str | None = None
    ) -> QuestionStatus | None:
        """End an open request ``aborted`` with ``note`` (an ended one stays as it ended)."""
        ...


def released_by_a_bot_of(record: PendingRecord, asker: str) -> str | None:
    """The rpcId of an open request of the host ``asker`` that no process owns (a stopped
    bot released it), or ``None`` for any other record."""
    key = record.key
    if record.owner is not None or record.asked_by != asker or key is None:
        return None
    if not key.startswith(KEY_PREFIX):
        return None
    return key.removeprefix(KEY_PREFIX)
