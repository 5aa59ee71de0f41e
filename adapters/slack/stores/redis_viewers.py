"""``RedisHomeViewers``: the App Home viewers in Redis, next to the Redis store's keys."""

from __future__ import annotations

from adapters.slack.stores.redis_link import RedisLink, as_text

__all__ = ["RedisHomeViewers"]


class RedisHomeViewers:
    """The viewers in a sorted set shared by every process on the same Redis and prefix."""

    def __init__(self, link: RedisLink, prefix: str, *, max_viewers: int, ttl: float) -> None:
        if max_viewers < 1 or ttl <= 0:
            raise ValueError("max_viewers and ttl must be positive")
        self._link = link
        self._key = f"{prefix}:home:viewers"
        self._max = max_viewers
        self._ttl = ttl

    async def opened(self, user: str, at: float) -> None:
        async def write() -> None:
            async with self._link.client.pipeline(transaction=True) as pipe:
                pipe.zadd(self._key, {user: at}, gt=True)  # a late, older report moves nobody
                pipe.zremrangebyscore(self._key, "-inf", f"({at - self._ttl!r}")
                pipe.zremrangebyrank(self._key, 0, -self._max - 1)
                pipe.pexpire(self._key, int(self._ttl * 1000))
                await pipe.execute()

        await self._link.op("remember a Home tab viewer", write)

    async def current(self, now: float) -> list[str]:
        async def read() -> list[str]:
            found = await self._link.client.zrangebyscore(self._key, now - self._ttl, "+inf")
            members = [as_text(m) for m in found if isinstance(m, str | bytes)]
            return members[-self._max :]

        return await self._link.op("read the Home tab viewers", read)

    def known_empty(self) -> bool:
        return False
