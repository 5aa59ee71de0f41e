"""Who keeps an App Home tab open: shared by every bot process, kept across restarts."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final, cast

import aiosqlite

from adapters.slack.stores.contract import PendingStore
from adapters.slack.stores.redis import RedisPendingStore
from adapters.slack.stores.redis_link import RedisLink
from adapters.slack.stores.sqlite import SqlitePendingStore
from adapters.slack.stores.sqlite_file import private_file
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

MAX_VIEWERS: Final = 1000
"""People whose Home tab is kept up to date: the most recent openers."""
VIEWER_TTL: Final = 7 * 86400.0
"""Seconds a Home tab is kept up to date after its person last opened it: 7 days."""


@dataclass(eq=False, kw_only=True)
class HomeViewers:
    """The people whose Home tab is kept current (the ``max_viewers`` latest within ``ttl``
    seconds), shared by every process of a store."""

    max_viewers: int = MAX_VIEWERS
    ttl: float = VIEWER_TTL

    def __post_init__(self) -> None:
        if self.max_viewers < 1 or self.ttl <= 0:
            raise ValueError("max_viewers and ttl must be positive")

    async def opened(self, user: str, at: float) -> None:
        """``user`` opened their Home tab at ``at``; the oldest beyond the bound go."""
        raise NotImplementedError

    async def current(self, now: float) -> list[str]:
        """Who opened their Home tab within the time limit before ``now``, oldest first."""
        raise NotImplementedError

    def known_empty(self) -> bool:
        """Whether this handle knows, without asking the store, that nobody is kept (only
        a set in this process's memory can)."""
        return False


@dataclass(eq=False)
class MemoryHomeViewers(HomeViewers):
    """The viewers in this process's memory (for the memory store)."""

    _seen: dict[str, float] = field(default_factory=dict, init=False)

    async def opened(self, user: str, at: float) -> None:
        self._seen[user] = max(at, self._seen.pop(user, at))
        kept = sorted(self._seen.items(), key=lambda seen: seen[1])[-self.max_viewers :]
        self._seen = dict(kept)

    async def current(self, now: float) -> list[str]:
        self._seen = {user: at for user, at in self._seen.items() if at >= now - self.ttl}
        return list(self._seen)

    def known_empty(self) -> bool:
        return not self._seen


_BUSY_TIMEOUT: Final = 5.0
"""Seconds a viewers' statement waits for another writer of the file."""
_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS home_viewers"
    " (user_id TEXT PRIMARY KEY, opened_at REAL NOT NULL) WITHOUT ROWID"
)


@dataclass(eq=False)
class SqliteHomeViewers(HomeViewers):
    """The viewers in the SQLite store's file, table ``home_viewers`` (user_id, opened_at)."""

    path: Path
    _ready: bool = field(default=False, init=False)

    async def opened(self, user: str, at: float) -> None:
        await self._run(
            (
                "INSERT INTO home_viewers (user_id, opened_at) VALUES (?, ?) ON CONFLICT (user_id)"
                " DO UPDATE SET opened_at = max(opened_at, excluded.opened_at)",
                (user, at),
            ),
            (
                "DELETE FROM home_viewers WHERE opened_at < ? OR user_id NOT IN"
                " (SELECT user_id FROM home_viewers ORDER BY opened_at DESC LIMIT ?)",
                (at - self.ttl, self.max_viewers),
            ),
        )

    async def current(self, now: float) -> list[str]:
        rows = await self._run(
            (
                "SELECT user_id FROM home_viewers WHERE opened_at >= ?"
                " ORDER BY opened_at DESC LIMIT ?",
                (now - self.ttl, self.max_viewers),
            )
        )
        return [str(row[0]) for row in reversed(rows)]

    async def _run(self, *statements: tuple[str, tuple[object, ...]]) -> list[sqlite3.Row]:
        """Run ``statements`` in one transaction; the last one's rows."""
        rows: list[sqlite3.Row] = []
        try:
            if not self._ready:
                private_file(self.path)
            async with aiosqlite.connect(
                self.path, isolation_level=None, timeout=_BUSY_TIMEOUT
            ) as db:
                if not self._ready:
                    await db.execute(_TABLE)
                    self._ready = True
                await db.execute("BEGIN IMMEDIATE" if len(statements) > 1 else "BEGIN")
                for sql, params in statements:
                    rows = list(await db.execute_fetchall(sql, params))
                await db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            raise UserQuestionError(
                f"the Home tab viewers (SQLite at {self.path}) failed: {exc}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc
        return rows


@dataclass(eq=False)
class RedisHomeViewers(HomeViewers):
    """The viewers in a sorted set shared by every process on the same Redis and prefix."""

    link: RedisLink

    @property
    def _key(self) -> str:
        return f"{self.link.keys.prefix}:home:viewers"

    async def opened(self, user: str, at: float) -> None:
        pipe = self.link.client.pipeline(transaction=True)  # (its execute resets it)
        pipe.zadd(self._key, {user: at}, gt=True)  # a late, older report moves nobody
        pipe.zremrangebyscore(self._key, "-inf", f"({at - self.ttl!r}")
        pipe.zremrangebyrank(self._key, 0, -self.max_viewers - 1)
        pipe.pexpire(self._key, int(self.ttl * 1000))
        await self.link.op("remember a Home tab viewer", pipe.execute)

    async def current(self, now: float) -> list[str]:
        read = partial(self.link.client.zrangebyscore, self._key, now - self.ttl, "+inf")
        found = await self.link.op("read the Home tab viewers", read)
        return cast(list[str], found)[-self.max_viewers :]


def viewers_for(
    store: PendingStore, *, max_viewers: int = MAX_VIEWERS, ttl: float = VIEWER_TTL
) -> HomeViewers:
    """The viewers kept where ``store`` keeps its records (memory for any other store)."""
    if isinstance(store, SqlitePendingStore):
        return SqliteHomeViewers(store.path, max_viewers=max_viewers, ttl=ttl)
    if isinstance(store, RedisPendingStore):
        return RedisHomeViewers(store.link, max_viewers=max_viewers, ttl=ttl)
    return MemoryHomeViewers(max_viewers=max_viewers, ttl=ttl)
