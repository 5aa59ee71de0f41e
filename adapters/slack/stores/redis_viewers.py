"""``RedisHomeViewers``: the App Home viewers in Redis, next to the Redis store's keys.

One sorted set, ``p:home:viewers`` (``p`` is the store's prefix): each member a user id,
its score when they last opened their Home tab (epoch seconds). Opening trims it, in one
transaction, to the most recent ``max_viewers`` within ``ttl``; the key itself expires
``ttl`` after the last opening. Every process of the store reads the same set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

__all__ = ["RedisHomeViewers"]

T = TypeVar("T")

_TIMEOUT: Final = 5.0
"""Seconds one operation may take (as the store's default ``op_timeout``)."""


class RedisHomeViewers:
    """The viewers in a sorted set shared by every process on the same Redis and prefix."""

    def __init__(
        self, client: aioredis.Redis, prefix: str, *, max_viewers: int, ttl: float
    ) -> None:
        if max_viewers < 1 or ttl <= 0:
            raise ValueError("max_viewers and ttl must be positive")
        self._client = client
        self._key = f"{prefix}:home:viewers"
        self._max = max_viewers
        self._ttl = ttl

    async def opened(self, user: str, at: float) -> None:
        async def write() -> None:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.zadd(self._key, {user: at}, gt=True)
                pipe.zremrangebyscore(self._key, "-inf", f"({at - self._ttl}")
                pipe.zremrangebyrank(self._key, 0, -self._max - 1)
                pipe.pexpire(self._key, int(self._ttl * 1000))
                await pipe.execute()

        await self._op("remember a Home tab viewer", write)

    async def current(self, now: float) -> list[str]:
        async def read() -> list[str]:
            members = await self._client.zrangebyscore(self._key, now - self._ttl, "+inf")
            return [m.decode() if isinstance(m, bytes) else str(m) for m in members][-self._max :]

        return await self._op("read the Home tab viewers", read)

    def known_empty(self) -> bool:
        return False

    async def _op(self, what: str, action: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(_TIMEOUT):
                return await action()
        except (RedisError, OSError, TimeoutError) as exc:
            raise UserQuestionError(
                f"the Home tab viewers (Redis) could not {what}: {exc}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc
