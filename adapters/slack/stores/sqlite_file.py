"""The SQLite store's file: opening it (WAL, schema upgraded in place; or for reading
only) and its statements.

One aiosqlite connection in autocommit mode (``isolation_level=None``): every statement is
its own transaction (a record's change and its audit event are one statement, see
``sqlite_schema``), so several processes on one host may share the file and the first
writer wins, and this process's statements need no lock (aiosqlite runs them in turn).
Every SQLite failure comes out as ``UserQuestionError`` with code ``STORE_UNAVAILABLE``.

A click's statements (``inline``: its read by primary key, then its compare-and-set) run
on a second connection in the event loop's own thread. In WAL mode with
``synchronous = NORMAL`` a read takes microseconds and a one-row write appends to the WAL
with no fsync: less than handing either to aiosqlite's thread and back, a hand-over that
waits for the GIL while the loop is busy (measured at about 1 ms a click). This connection
never waits: a statement that would (``SQLITE_BUSY``: another writer holds the file) goes
to aiosqlite instead, which waits up to the busy timeout. Other tasks get their turn after
``RUN`` such statements in a row (a click's two run straight through; a stop's thousands
never hold the loop).

Writes do not copy the WAL back into the file (a checkpoint: page copies and an fsync, the
slow tail of a commit that happens to cross SQLite's threshold): ``checkpoint`` does it on
a third connection, in its own thread, called every second by the store
(``SqliteUpkeep.checkpoints``). A commit checkpoints only past ``_WAL_PAGES``, should that
fall behind.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import aiosqlite

from adapters.slack.stores.sqlite_schema import check_readable, migrate
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

__all__ = ["CHUNK", "RUN", "SqliteFile", "batch_delete"]

_BUSY: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
"""Error codes of a statement that would have to wait."""

_WAL_PAGES: Final = 20_000
"""A commit checkpoints the WAL past this many pages (80 MB; SQLite's default is 1,000):
only should the store's own checkpoints fall behind."""

RUN: Final = 4
"""In-loop statements in a row before other tasks get a turn (about a millisecond)."""

CHUNK: Final = 500
"""Ids per ``IN (…)`` query (well under SQLite's parameter limit), rows per page."""


def batch_delete(table: str, key: str, where: str) -> str:
    """A statement deleting at most ``CHUNK`` rows of ``table`` matching ``where`` (by
    ``key``, an indexed column), for ``SqliteFile.delete_batches``."""
    return (
        f"DELETE FROM {table} WHERE {key} IN"
        f" (SELECT {key} FROM {table} WHERE {where} LIMIT {CHUNK}) RETURNING 1"
    )


class SqliteFile:
    """The connection to the store's file; ``open()`` before use, ``close()`` after."""

    def __init__(self, path: Path, *, busy_timeout: float, log: logging.Logger) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self._log = log
        self._db: aiosqlite.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._checkpointer: aiosqlite.Connection | None = None
        self._run = 0

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
            await db.execute(f"PRAGMA wal_autocheckpoint = {_WAL_PAGES}")
            await migrate(db, self.path, self._log)
            # Opened in this thread, used only here; a busy file is not waited for.
            self._inline = sqlite3.connect(self.path, isolation_level=None, timeout=0)
            self._inline.execute("PRAGMA synchronous = NORMAL")
            self._inline.execute(f"PRAGMA wal_autocheckpoint = {_WAL_PAGES}")
            self._checkpointer = await aiosqlite.connect(
                self.path, isolation_level=None, timeout=self._busy_timeout
            )
        except BaseException:
            await self.close()
            raise

    async def open_to_read(self) -> None:
        """Open the file for reading only (``mode=ro``): nothing is created, switched,
        upgraded or written, so a reader leaves the file as it found it (SQLite may add the
        WAL's two side files should they be missing: the next writer uses them as they are).
        Only ``rows`` (and what runs on it) works on a file opened so."""
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        try:
            db = await aiosqlite.connect(uri, uri=True, timeout=self._busy_timeout)
        except (OSError, sqlite3.Error) as exc:
            reason = exc if self.path.exists() else "no such file"
            raise OSError(
                f"cannot read the pending store STORE_PATH={self.path}: {reason}"
            ) from exc
        self._db = db
        try:
            check_readable(int(await self.scalar("PRAGMA user_version")), self.path)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the file (idempotent)."""
        inline, self._inline = self._inline, None
        if inline is not None:
            inline.close()
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await checkpointer.close()
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one statement (its own transaction) and fetch its rows; SQLite failures are
        ``STORE_UNAVAILABLE``."""
        if self._db is None:
            raise _not_open()
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: sqlite3.Error) -> UserQuestionError:
        return UserQuestionError(
            f"the pending store (SQLite at {self.path}) failed: {exc}", STORE_UNAVAILABLE, cause=exc
        )

    async def inline(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of a short statement (a read or a write of one row by primary key), run
        in this thread when it need not wait, else as ``rows`` does."""
        if self._inline is not None:
            try:
                rows = self._inline.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if getattr(exc, "sqlite_errorcode", None) not in _BUSY:
                    raise self._failed(exc) from exc
            else:
                await self._turn()
                return rows
        return await self.rows(sql, params)

    async def _turn(self) -> None:
        """Give other tasks their turn after ``RUN`` statements in a row, as aiosqlite's
        hand-over did after each: a run of them (a stop ending 10,000 questions) never holds
        the loop, while a click's read and write run straight through."""
        self._run += 1
        if self._run == 1:
            # The loop's next turn, whoever takes it, ends the run.
            asyncio.get_running_loop().call_soon(self._turned)
        if self._run >= RUN:
            await asyncio.sleep(0)

    def _turned(self) -> None:
        self._run = 0

    async def checkpoint(self) -> int:
        """Copy the WAL's committed pages into the file (``PASSIVE``: no reader or writer
        waits for it); how many pages the WAL held."""
        if self._checkpointer is None:
            raise _not_open()
        try:
            rows = list(await self._checkpointer.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)"))
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc
        return int(rows[0][1])

    async def scalar(self, sql: str) -> Any:
        """The first column of the first row of ``sql``."""
        rows = await self.rows(sql)
        return rows[0][0]

    async def delete_batches(self, statement: str, params: Sequence[Any] = ()) -> int:
        """Run a ``batch_delete`` statement until it deletes fewer than ``CHUNK`` rows, each
        batch its own statement: what is queued meanwhile (the heartbeat, a click that
        found the file busy) waits for one batch, not for the whole purge. How many went."""
        deleted = 0
        while True:
            gone = len(await self.rows(statement, params))
            deleted += gone
            if gone < CHUNK:
                return deleted

    async def rows_in(self, sql: str, ids: Sequence[str]) -> list[Any]:
        """The rows of ``sql`` (its ``{ids}`` a list of marks) for ``ids``, ``CHUNK`` at a time."""
        found: list[Any] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            found += await self.rows(sql.format(ids=",".join("?" * len(chunk))), chunk)
        return found


def _not_open() -> UserQuestionError:
    return UserQuestionError(
        "the pending store (SQLite) is closed or not started", STORE_UNAVAILABLE
    )
