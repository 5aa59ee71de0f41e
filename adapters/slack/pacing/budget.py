"""Call budgets: at most ``limit`` calls per ``window`` per key, in one process or through Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from adapters.slack.pacing.rate_limits import Bucket

T = TypeVar("T")
_MICROS: Final = 1_000_000
_CONNECTIONS: Final = 8
"""Scripts one ``RedisBudget`` runs at once; more callers wait for a connection."""
_CONNECTION_WAIT: Final = 10.0
"""Seconds a caller waits for a connection (twice the socket timeout)."""
_BUSY_WAIT: Final = 0.5
"""The wait a ``take`` answers when no connection freed up: nothing is granted uncounted."""

# KEYS: the buckets. ARGV: limit and window (µs) per bucket, then a hold (µs; 0 to take)
# and a nonce that keeps the members of one call unique. A hold is set unless a longer one
# is already running (two 429s from two processes).
_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local held_for = tonumber(ARGV[2 * n + 1])
if held_for > 0 then
  local key, ms = KEYS[1] .. ':hold', math.ceil(held_for / 1000)
  if redis.call('PTTL', key) < ms then redis.call('SET', key, '1', 'PX', ms) end
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


Wait = tuple[float, int]
"""Seconds to wait (0: granted) and the index of the bucket that was full."""


@dataclass(slots=True)
class _Calls:
    """The grants of one bucket still in its window (kept, to prune when nobody asks)."""

    window: float
    times: deque[float] = field(default_factory=deque)

    def prune(self, now: float) -> bool:
        """Drop the grants ``window`` seconds old or older; whether any is left."""
        times, edge = self.times, now - self.window
        while times and times[0] <= edge:
            times.popleft()
        return bool(times)


class LocalBudget:
    """A budget for one process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._calls: dict[str, _Calls] = {}
        self._held: dict[str, float] = {}
        self._longest = 0.0
        self._swept_at = clock()
        self._since_sweep = 0

    async def take(self, buckets: Sequence[Bucket]) -> Wait:
        """Count one call in every bucket and return ``(0, 0)``, or say how long to wait."""
        now = self._clock()
        # A sweep once as many takes went by as there are buckets (O(1) a take on average),
        # or once the longest window passed since the last one.
        self._since_sweep += 1
        if self._since_sweep > self.kept() or now - self._swept_at >= self._longest:
            self._sweep(now)
        wait, full = 0.0, 0
        for index, bucket in enumerate(buckets):
            need = self._need(bucket, now)
            if need > wait:
                wait, full = need, index
        if wait > 0:
            return wait, full
        for bucket in buckets:
            self._calls.setdefault(bucket.key, _Calls(bucket.window)).times.append(now)
            self._longest = max(self._longest, bucket.window)
        return 0.0, 0

    async def hold(self, bucket: Bucket, seconds: float) -> None:
        """Grant nothing from ``bucket`` for ``seconds``."""
        if seconds <= 0:
            return
        until = self._clock() + seconds
        self._held[bucket.key] = max(self._held.get(bucket.key, until), until)

    async def close(self) -> None:
        """Nothing to release."""

    def kept(self) -> int:
        """How many buckets and holds are in memory (cheap: no sweep)."""
        return len(self._calls) + len(self._held)

    def restore(self, handover: LocalBudget) -> None:
        """Take back what was handed over to Redis, merged with what was granted here since."""
        for key, calls in handover._calls.items():
            mine = self._calls.get(key)
            if mine is not None:
                calls.times = deque(sorted([*calls.times, *mine.times]))
            self._calls[key] = calls
        for key, until in handover._held.items():
            self._held[key] = max(until, self._held.get(key, until))

    def _need(self, bucket: Bucket, now: float) -> float:
        """Seconds until ``bucket`` may grant a call (0 or less: now)."""
        need = self._held.get(bucket.key, now) - now
        calls = self._calls.get(bucket.key)
        if calls is not None and calls.prune(now):
            times = calls.times
            if len(times) >= bucket.limit:
                need = max(need, times[len(times) - bucket.limit] + bucket.window - now)
        return need

    def _sweep(self, now: float) -> None:
        """Forget the buckets whose grants all left their windows, and the holds that ended."""
        self._since_sweep, self._swept_at = 0, now
        self._calls = {key: calls for key, calls in self._calls.items() if calls.prune(now)}
        self._held = {key: until for key, until in self._held.items() if until > now}


class _NoConnection(Exception):
    """No connection freed up in ``_CONNECTION_WAIT``: Redis is slow, not known to be gone."""


class RedisBudget:
    """A budget shared by every process using the same Redis and ``prefix``."""

    def __init__(self, url: str, *, prefix: str) -> None:
        # Its own small connection pool: a full pool is no outage.
        pool = aioredis.BlockingConnectionPool.from_url(
            url, socket_timeout=5, max_connections=_CONNECTIONS, timeout=_CONNECTION_WAIT
        )
        self._redis = aioredis.Redis.from_pool(pool)
        self._prefix = f"{prefix}:ratelimit"
        self._script = self._redis.register_script(_SCRIPT)
        self._connections = asyncio.Semaphore(_CONNECTIONS)
        self._fallback = LocalBudget()
        self._replaying: asyncio.Task[bool] | None = None
        self._logger = logging.getLogger("adapters.slack")
        self._degraded = False

    async def take(self, buckets: Sequence[Bucket]) -> Wait:
        """Count one call in every bucket in Redis (here while it is unreachable)."""
        args = [x for b in buckets for x in (b.limit, round(b.window * _MICROS))]
        try:
            answer = await self._scripted(
                [b.key for b in buckets], [*args, 0, secrets.token_hex(6)]
            )
        except _NoConnection:
            return _BUSY_WAIT, 0
        if answer is None:
            return await self._fallback.take(buckets)
        return int(answer[0]) / _MICROS, int(answer[1])

    async def hold(self, bucket: Bucket, seconds: float) -> None:
        """Grant nothing from ``bucket`` for ``seconds``, in every process (kept here until
        Redis can be told)."""
        if seconds <= 0:
            return
        with contextlib.suppress(_NoConnection):
            if await self._scripted([bucket.key], [0, 0, max(1000, round(seconds * _MICROS)), ""]):
                return
        await self._fallback.hold(bucket, seconds)

    async def close(self) -> None:
        """Close the connection pool."""
        if self._replaying is not None:
            self._replaying.cancel()
            await asyncio.gather(self._replaying, return_exceptions=True)
        await self._redis.aclose()

    def _keys(self, keys: list[str]) -> list[str]:
        return [f"{self._prefix}:{k}" for k in keys]

    async def _scripted(self, keys: list[str], args: list[int | str]) -> Any:
        """The script's answer from Redis; ``None`` while it is unreachable or not synced."""
        if not await self._synced():
            return None
        return await self._run(lambda: self._script(keys=self._keys(keys), args=args))

    async def _synced(self) -> bool:
        """Whether Redis has what this process granted and held alone (written there first,
        one attempt shared by the callers meanwhile); False while unreachable."""
        if self._replaying is None or self._replaying.done():
            if not self._fallback.kept():
                return True
            self._replaying = asyncio.ensure_future(self._replay())
            # Its callers were told of any error (or all of them cancelled): retrieved here.
            self._replaying.add_done_callback(lambda task: task.cancelled() or task.exception())
        return await asyncio.shield(self._replaying)

    async def _replay(self) -> bool:
        """Write the fallback's grants (their ages kept) and holds to Redis, and forget them
        here; whether Redis took them."""
        if await self._run(self._redis.ping) is None:
            return False  # still unreachable: nothing is handed over
        handover, self._fallback = self._fallback, LocalBudget()
        written = False
        try:
            written = bool(await self._run(lambda: self._write(handover)))
        finally:
            if not written:
                self._fallback.restore(handover)
        return written

    async def _write(self, handover: LocalBudget) -> bool:
        """Add ``handover``'s grants still in their windows at their ages on Redis's clock,
        and its holds still running."""
        at = handover._clock()
        handover._sweep(at)
        seconds, micros = await self._redis.time()
        now, nonce = seconds * _MICROS + micros, secrets.token_hex(6)
        pipe = self._redis.pipeline()
        for key, calls in handover._calls.items():
            ages = [round((at - t) * _MICROS) for t in calls.times]
            (name,) = self._keys([key])
            pipe.zadd(name, {f"{now - age}:{nonce}:{j}": now - age for j, age in enumerate(ages)})
            pipe.pexpire(name, math.ceil(calls.window * 1000) + 1000)
        for key, until in handover._held.items():
            hold = max(1000, round((until - at) * _MICROS))
            await self._script(keys=self._keys([key]), args=[0, 0, hold, ""], client=pipe)
        await pipe.execute()
        return True

    async def _run(self, send: Callable[[], Awaitable[T]]) -> T | None:
        """``send()``'s answer; ``None`` if Redis is unreachable (``_NoConnection``: all busy)."""
        try:
            async with asyncio.timeout(_CONNECTION_WAIT):
                await self._connections.acquire()
        except TimeoutError:
            raise _NoConnection from None
        try:
            result = await send()
        except (RedisError, OSError) as exc:
            if not self._degraded:
                self._degraded = True
                self._logger.warning(
                    "rate-limit budget: Redis unreachable, pacing this process alone",
                    extra={"error": f"{type(exc).__name__}: {exc}"},
                )
            return None
        finally:
            self._connections.release()
        if self._degraded:
            self._degraded = False
            self._logger.info("rate-limit budget: shared through Redis again")
        return result


Budget = LocalBudget | RedisBudget
"""Where the scheduler takes its slots: in this process, or shared through Redis."""
