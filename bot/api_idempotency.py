"""``Idempotency-Key`` on ``POST /v1/questions``: one question per key, however often retried.

- ``key_problem``: what is wrong with a key (1–255 printable ASCII characters), or ``None``.
- ``KeyLocks``: retries of one question queue on one lock, so only the first of them posts;
  the lock is forgotten when the last of them is done.
- ``same_request``: whether a retry asks what the question asked (the same question) or
  something else (409 ``IDEMPOTENCY_KEY_REUSED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Final

from adapters.slack import QuestionStatus
from bot.api_body import QuestionPost

__all__ = ["KeyLocks", "key_problem", "same_request"]

_IDEMPOTENCY_KEY: Final = re.compile(r"[\x20-\x7e]{1,255}")


def key_problem(key: str | None) -> str | None:
    """Why ``key`` (the header's value; ``None`` when absent) is refused, or ``None``."""
    if key is None or _IDEMPOTENCY_KEY.fullmatch(key):
        return None
    return "Idempotency-Key is 1–255 printable ASCII characters"


class KeyLocks:
    """One lock per question id while any request for it is in flight."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def held(self, request_id: str) -> AsyncIterator[None]:
        """Hold ``request_id``'s lock (queued behind earlier requests for it)."""
        lock, users = self._locks.get(request_id, (asyncio.Lock(), 0))
        self._locks[request_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[request_id]
            if users == 1:
                del self._locks[request_id]
            else:
                self._locks[request_id] = (lock, users - 1)


def same_request(question: QuestionStatus, post: QuestionPost, default_channel: str | None) -> bool:
    """Whether ``post`` asks what ``question`` asked (a retry, not a new request)."""
    destination = post.destination
    channel = destination.channel if destination else default_channel
    thread_ts = destination.thread_ts if destination else None
    return (
        list(question.questions) == post.questions
        and question.label == post.label
        and (channel is None or (question.channel, question.thread_ts) == (channel, thread_ts))
    )
