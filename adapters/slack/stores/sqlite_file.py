"""The SQLite store's file: opening it (WAL, schema upgraded in place) and its statements.

One aiosqlite connection in autocommit mode (``isolation_level=None``): every statement is
its own transaction (a record's change and its audit event are one statement, see
``sqlite_schema``), so several processes on one host may share the file and the first
writer wins, and this process's statements need no lock (aiosqlite runs them in turn).
Every SQLite failure comes out as ``UserQuestionError`` with code ``STORE_UNAVAILABLE``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import aiosqlite

from adapters.slack.stores.sqlite_schema import migrate
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

__all__ = ["CHUNK", "SqliteFile"]

CHUNK: Final = 500
"""Ids per ``IN (…)`` query (well under SQLite's parameter limit), rows per page."""


class SqliteFile:
    """The connection to the store's file; ``open()`` before use, ``close()`` after."""

    def __init__(self, path: Path, *, busy_timeout: float, log: logging.Logger) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self._log = log
        self._db: aiosqlite.Connection | None = None

    @property
    def is_open(self) -> bool:
        """Whether the file is open."""
        return self._db is not None

    async def open(self) -> None:
        """Open the file (creating it), switch to WAL and upgrade the schema."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(
                self.path, isolation_level=None, timeout=self._busy_timeout
            )
        except (OSError, sqlite3.Error) as exc:
            raise OSError(f"cannot open the pending store STORE_PATH={self.path}: {exc}") from exc
        self._db = db
        try:
            mode = await self.scalar("PRAGMA journal_mode = WAL")
            if str(mode).lower() != "wal":
                self._log.warning("SQLite refused WAL mode for %s (got %s)", self.path, mode)
            await db.execute("PRAGMA synchronous = NORMAL")
            await migrate(db, self.path, self._log)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the file (idempotent)."""
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one statement (its own transaction) and fetch its rows; SQLite failures are
        ``STORE_UNAVAILABLE``."""
        if self._db is None:
            raise UserQuestionError(
                "the pending store (SQLite) is closed or not started", STORE_UNAVAILABLE
            )
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise UserQuestionError(
                f"the pending store (SQLite at {self.path}) failed: {exc}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc

    async def scalar(self, sql: str) -> Any:
        """The first column of the first row of ``sql``."""
        rows = await self.rows(sql)
        return rows[0][0]

    async def rows_in(self, sql: str, ids: Sequence[str]) -> list[Any]:
        """The rows of ``sql`` (its ``{ids}`` a list of marks) for ``ids``, ``CHUNK`` at a time."""
        found: list[Any] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            found += await self.rows(sql.format(ids=",".join("?" * len(chunk))), chunk)
        return found
