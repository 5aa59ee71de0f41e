"""Call budgets: at most ``limit`` calls per ``window`` per key, in one process or through Redis.

A ``Bucket`` is a sliding window: a call is granted while fewer than ``limit`` calls were
granted in the last ``window`` seconds. ``take(buckets)`` grants a call only when every
bucket has room, and then counts it in all of them; otherwise it counts nothing and says
how long to wait and which bucket was full. ``hold(bucket, seconds)`` closes a bucket for
a while (a ``Retry-After``).

``LocalBudget`` keeps the call times in memory. ``RedisBudget`` keeps them in Redis sorted
sets (one Lua script, Redis's clock), so several bot processes share one app's budget
instead of each spending its own; while Redis is unreachable it paces this process alone.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

__all__ = ["Bucket", "Budget", "LocalBudget", "RedisBudget", "Wait"]

_MICROS: Final = 1_000_000

# KEYS: the buckets. ARGV: limit and window (µs) per bucket, then a hold (µs; 0 to take)
# and a nonce that keeps the members of one call unique.
_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local hold = tonumber(ARGV[2 * n + 1])
if hold > 0 then
  redis.call('SET', KEYS[1] .. ':hold', '1', 'PX', math.ceil(hold / 1000))
  return {0, 0}
end
local wait, full = 0, 0
for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
  local count = redis.call('ZCARD', key)
  local need = 0
  if count >= limit then
    local edge = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    need = tonumber(edge[2]) + window - now
  end
  local held = redis.call('PTTL', key .. ':hold')
  if held > 0 then need = math.max(need, held * 1000) end
  if need > wait then wait, full = need, i end
end
if wait > 0 then return {wait, full - 1} end
local member = string.format('%d', now) .. ':' .. ARGV[2 * n + 2]
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, string.format('%d', now), member)
  redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[2 * i]) / 1000) + 1000)
end
return {0, 0}
"""


@dataclass(frozen=True, slots=True)
class Bucket:
    """At most ``limit`` calls in any ``window`` seconds under ``key``."""

    key: str
    limit: int
    window: float


Wait = tuple[float, int]
"""Seconds to wait (0: granted) and the index of the bucket that was full."""


class Budget(Protocol):
    """Where the scheduler takes its slots."""

    async def take(self, buckets: Sequence[Bucket]) -> Wait:
        """Count one call in every bucket and return ``(0, 0)``, or say how long to wait."""
        ...

    async def hold(self, bucket: Bucket, seconds: float) -> None:
        """Grant nothing from ``bucket`` for ``seconds``."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class LocalBudget:
    """A budget for one process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._calls: dict[str, deque[float]] = {}
        self._held: dict[str, float] = {}

    async def take(self, buckets: Sequence[Bucket]) -> Wait:
        """Count one call in every bucket and return ``(0, 0)``, or say how long to wait."""
        now = self._clock()
        wait, full = 0.0, 0
        for index, bucket in enumerate(buckets):
            calls = self._calls.setdefault(bucket.key, deque())
            while calls and calls[0] <= now - bucket.window:
                calls.popleft()
            need = self._held.get(bucket.key, now) - now
            if len(calls) >= bucket.limit:
                need = max(need, calls[len(calls) - bucket.limit] + bucket.window - now)
            if need > wait:
                wait, full = need, index
        if wait > 0:
            return wait, full
        for bucket in buckets:
            self._calls[bucket.key].append(now)
        return 0.0, 0

    async def hold(self, bucket: Bucket, seconds: float) -> None:
        """Grant nothing from ``bucket`` for ``seconds``."""
        if seconds <= 0:
            return
        until = self._clock() + seconds
        self._held[bucket.key] = max(self._held.get(bucket.key, until), until)

    async def close(self) -> None:
        """Nothing to release."""


class RedisBudget:
    """A budget shared by every process using the same Redis and ``prefix``."""

    def __init__(
        self, redis: aioredis.Redis, *, prefix: str, logger: logging.Logger | None = None
    ) -> None:
        self._redis = redis
        self._prefix = prefix
        self._script = redis.register_script(_SCRIPT)
        self._fallback = LocalBudget()
        self._logger = logger or logging.getLogger("adapters.slack")
        self._degraded = False

    @classmethod
    def from_url(cls, url: str, *, prefix: str) -> RedisBudget:
        """A budget on its own small connection pool to ``url``."""
        redis = aioredis.Redis.from_url(url, socket_timeout=5, max_connections=4)
        return cls(redis, prefix=f"{prefix}:ratelimit")

    async def take(self, buckets: Sequence[Bucket]) -> Wait:
        """Count one call in every bucket and return ``(0, 0)``, or say how long to wait."""
        args = [x for b in buckets for x in (b.limit, round(b.window * _MICROS))]
        answer = await self._run([b.key for b in buckets], [*args, 0, secrets.token_hex(6)])
        if answer is None:
            return await self._fallback.take(buckets)
        return answer[0] / _MICROS, answer[1]

    async def hold(self, bucket: Bucket, seconds: float) -> None:
        """Grant nothing from ``bucket`` for ``seconds``, in every process."""
        if seconds <= 0:
            return
        args = [bucket.limit, round(bucket.window * _MICROS), max(1000, round(seconds * _MICROS))]
        if await self._run([bucket.key], [*args, ""]) is None:
            await self._fallback.hold(bucket, seconds)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()

    async def _run(self, keys: list[str], args: list[int | str]) -> tuple[int, int] | None:
        try:
            result = await self._script(keys=[f"{self._prefix}:{k}" for k in keys], args=args)
        except (RedisError, OSError) as exc:
            if not self._degraded:
                self._degraded = True
                self._logger.warning(
                    "rate-limit budget: Redis unreachable, pacing this process alone",
                    extra={"error": f"{type(exc).__name__}: {exc}"},
                )
            return None
        if self._degraded:
            self._degraded = False
            self._logger.info("rate-limit budget: shared through Redis again")
        return int(result[0]), int(result[1])
