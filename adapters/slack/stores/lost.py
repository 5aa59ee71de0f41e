"""Records lost from under their waiters (Redis flushed or restarted without persistence)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from adapters.slack.render.messages import RECORD_LOST_NOTE
from bot.questions.errors import RECORD_LOST, UserQuestionError

__all__ = ["LOST_CHECK_INTERVAL", "LostWatch", "fail_lost", "waiting_ids"]

LOST_CHECK_INTERVAL: Final = 2.0
"""Seconds between two checks that the records being waited on still exist."""


class LostWatch(Protocol):
    """What the check needs of a store's watch."""

    future: asyncio.Future[str]
    """Resolved with the ended record's JSON."""
    waiting: bool


def waiting_ids(watches: Mapping[str, Iterable[LostWatch]]) -> list[str]:
    """The ids whose watches are being waited on and have not ended."""
    return sorted(
        request_id
        for request_id, group in watches.items()
        if any(w.waiting and not w.future.done() for w in group)
    )


def fail_lost(watches: Iterable[LostWatch], request_id: str) -> None:
    """End every wait on ``request_id`` with ``RECORD_LOST``."""
    error = UserQuestionError(f"{RECORD_LOST_NOTE} (request {request_id})", RECORD_LOST)
    for watch in watches:
        if watch.waiting and not watch.future.done():
            watch.future.set_exception(error)
            watch.future.exception()  # retrieved: the waiter re-raises it
