"""The webhook outbox: deliveries still owed, kept in the store's backend so they outlive a
restart; ``claim`` is a compare-and-set on the entry's ``version`` and a lease until
``next_at``, so one process at a time delivers."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from operator import attrgetter
from typing import Any, Final

import aiosqlite


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery owed: where to, for which token, and when to look at it next."""

    id: str
    url: str
    asker: str | None
    created_at: float
    next_at: float
    version: int = 0
    tries: int = 0
    leased: bool = False

    def dump(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def load(cls, text: str | bytes) -> Delivery:
        return cls(**json.loads(text))

    def claimable(self, now: float) -> bool:
        """Whether a process may claim it now: not leased, or its lease ran out."""
        return not self.leased or self.next_at <= now

    def claimed(self, lease_until: float) -> Delivery:
        """As its claimer holds it: the next version, leased until ``lease_until``."""
        return replace(self, version=self.version + 1, next_at=lease_until, leased=True)


class MemoryOutbox:
    """The outbox of one process (the memory store): gone with it. Every write but ``add`` is
    a compare-and-set on ``version``, in each kind of outbox."""

    def __init__(self) -> None:
        self._kept: dict[str, Delivery] = {}

    async def add(self, delivery: Delivery) -> None:
        """Keep ``delivery`` unless one with its id is kept already."""
        self._kept.setdefault(delivery.id, delivery)

    async def get(self, delivery_id: str) -> Delivery | None:
        return self._kept.get(delivery_id)

    async def due(self, now: float, limit: int = 100) -> list[Delivery]:
        """Deliveries whose ``next_at`` has come, soonest first."""
        ready = (d for d in self._kept.values() if d.next_at <= now)
        return sorted(ready, key=attrgetter("next_at"))[:limit]

    async def put(self, before: Delivery, after: Delivery | None) -> bool:
        """Replace ``before`` (still at its version) with ``after`` (``None``: delete)."""
        kept = self._kept.get(before.id)
        if kept is None or kept.version != before.version:
            return False
        self._kept.pop(before.id)
        if after is not None:
            self._kept[before.id] = after
        return True

    async def close(self) -> None:
        return None


class SqliteOutbox:
    """The outbox in the SQLite store's file (table ``outbox``), shared by its processes."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: str) -> SqliteOutbox:
        db = await aiosqlite.connect(path, isolation_level=None, timeout=10)
        await db.execute(
            "CREATE TABLE IF NOT EXISTS outbox (id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
            " next_at REAL NOT NULL, json TEXT NOT NULL)"
        )
        await db.execute("CREATE INDEX IF NOT EXISTS outbox_due ON outbox (next_at)")
        return cls(db)

    async def add(self, delivery: Delivery) -> None:
        await self._db.execute(
            "INSERT INTO outbox (id, version, next_at, json) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (delivery.id, delivery.version, delivery.next_at, delivery.dump()),
        )

    async def get(self, delivery_id: str) -> Delivery | None:
        # Read in one call (no cursor left open across an await: a write on this connection
        # meanwhile would find its read snapshot stale, SQLITE_BUSY without waiting).
        rows = await self._db.execute_fetchall(
            "SELECT json FROM outbox WHERE id = ?", (delivery_id,)
        )
        return next((Delivery.load(row[0]) for row in rows), None)

    async def due(self, now: float, limit: int = 100) -> list[Delivery]:
        query = "SELECT json FROM outbox WHERE next_at <= ? ORDER BY next_at LIMIT ?"
        rows = await self._db.execute_fetchall(query, (now, limit))
        return [Delivery.load(row[0]) for row in rows]

    async def put(self, before: Delivery, after: Delivery | None) -> bool:
        args: tuple[Any, ...] = ()
        sql = "DELETE FROM outbox WHERE id = ? AND version = ?"
        if after is not None:
            sql = "UPDATE outbox SET version = ?, next_at = ?, json = ?"
            sql += " WHERE id = ? AND version = ?"
            args = (after.version, after.next_at, after.dump())
        cursor = await self._db.execute(sql, (*args, before.id, before.version))
        return cursor.rowcount == 1

    async def close(self) -> None:
        await self._db.close()


_PUT: Final = """
local kept = redis.call('HGET', KEYS[1], 'version')
if not kept or tonumber(kept) ~= tonumber(ARGV[1]) then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1]); redis.call('ZREM', KEYS[2], ARGV[4])
else
  redis.call('HSET', KEYS[1], 'version', ARGV[2], 'json', ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
end
return 1
"""
_ADD: Final = """
if redis.call('HSETNX', KEYS[1], 'version', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'json', ARGV[2]); redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
"""


class RedisOutbox:
    """The outbox in the Redis store's server: ``{prefix}:wh:{id}`` and ``{prefix}:wh:due``."""

    def __init__(self, redis: Any, prefix: str) -> None:
        self._redis = redis
        self._key = f"{prefix}:wh:"  # + a delivery's id
        self._due = f"{prefix}:wh:due"
        self._put = redis.register_script(_PUT)
        self._add = redis.register_script(_ADD)

    async def add(self, delivery: Delivery) -> None:
        args = [delivery.version, delivery.dump(), delivery.next_at, delivery.id]
        await self._add(keys=[self._key + delivery.id, self._due], args=args)

    async def get(self, delivery_id: str) -> Delivery | None:
        text = await self._redis.hget(self._key + delivery_id, "json")
        return None if text is None else Delivery.load(text)

    async def due(self, now: float, limit: int = 100) -> list[Delivery]:
        ids = await self._redis.zrangebyscore(self._due, "-inf", now, start=0, num=limit)
        found = [await self.get(i.decode() if isinstance(i, bytes) else i) for i in ids]
        return [d for d in found if d is not None]

    async def put(self, before: Delivery, after: Delivery | None) -> bool:
        args: list[Any] = [before.version, "", "", before.id, 0]
        if after is not None:
            args = [before.version, after.version, after.dump(), before.id, after.next_at]
        return bool(await self._put(keys=[self._key + before.id, self._due], args=args))

    async def close(self) -> None:
        await self._redis.aclose()


Outbox = MemoryOutbox | SqliteOutbox | RedisOutbox
"""Where deliveries wait: in this process, or in the SQLite or Redis store's backend."""
