"""The SQLite store's file: opening it (WAL, upgraded in place; or read-only), its statements."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from queue import Empty
from typing import Any, Final

import aiosqlite

from adapters.slack.stores.sqlite_schema import BUSY, check_readable, migrate
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

_WAL_PAGES: Final = 20_000
"""A commit checkpoints the WAL past this many pages (80 MB): only should ours fall behind."""

WAL_LIMIT = 64 * 1024 * 1024
"""Bytes the WAL is truncated back to once checkpointed (``journal_size_limit``)."""

_CACHE_KIB: Final = 256
"""Page cache per connection (the OS caches pages: the default 2 MB only cost memory)."""

UPGRADE_WAIT = 300.0
"""Seconds a start waits for another process holding the file (an upgrade, a ``VACUUM``)."""

_JOIN_WAIT: Final = 2.0
"""Seconds a failed connect waits for aiosqlite's thread to end."""

_CANNOT_WRITE_BESIDE: Final = frozenset({sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN})
"""Error codes of a read-only open that needed to create the WAL's side files."""

RUN: Final = 4
"""In-loop statements in a row before other tasks get a turn (about a millisecond)."""

CHUNK: Final = 500
"""Ids per ``IN (…)`` query (well under SQLite's parameter limit), rows per page."""


class SqliteFile:
    """The connection to the store's file; ``open()`` before use, ``close()`` after."""

    def __init__(self, path: Path, *, busy_timeout: float, log: logging.Logger) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self.log = log
        self._db: aiosqlite.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._checkpointer: aiosqlite.Connection | None = None
        self._run = 0

    @property
    def is_open(self) -> bool:
        return self._db is not None

    async def open(self) -> None:
        """Open the file (creating it), switch to WAL and upgrade the schema."""
        _refuse_memory(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            private_file(self.path)
            db = await _connect(self.path, isolation_level=None, timeout=self._busy_timeout)
        except (OSError, sqlite3.Error) as exc:
            raise OSError(f"cannot open the pending store STORE_PATH={self.path}: {exc}") from exc
        self._db = db
        try:
            await self._prepare(db)
        except BaseException as exc:
            await self.close()
            if not isinstance(exc, sqlite3.Error | UserQuestionError):
                raise
            cause = exc.__cause__ if isinstance(exc, UserQuestionError) else exc
            raise OSError(
                f"cannot open the pending store STORE_PATH={self.path}: {cause or exc}"
            ) from exc

    async def _prepare(self, db: aiosqlite.Connection) -> None:
        """WAL mode (or refuse), the schema upgraded, the other two connections opened."""
        mode = await self.scalar("PRAGMA journal_mode = WAL")
        if str(mode).lower() != "wal":
            raise OSError(
                f"cannot use STORE_PATH={self.path} for the pending store: SQLite will not"
                f" put it in WAL mode (it stays in {mode} mode): give STORE_PATH a file on a"
                " local disk"
            )
        limit = f"journal_size_limit = {int(WAL_LIMIT)}"
        pragmas = [
            "synchronous = NORMAL",
            f"wal_autocheckpoint = {_WAL_PAGES}",
            f"cache_size = -{_CACHE_KIB}",
            limit,
        ]
        for pragma in pragmas:
            await db.execute(f"PRAGMA {pragma}")
        if await migrate(db, self.path, self.log, wait=UPGRADE_WAIT):
            # The upgrade's copy of every record sits in the WAL: into the file, and empty it.
            try:
                await db.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:  # the upgrade is made: the next checkpoints do it
                self.log.warning("pending store checkpoint after the upgrade failed: %s", exc)
        # Opened in this thread, used only here; a busy file is not waited for.
        self._inline = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        for pragma in pragmas:
            self._inline.execute(f"PRAGMA {pragma}")
        self._checkpointer = await _connect(
            self.path, isolation_level=None, timeout=self._busy_timeout
        )
        await self._checkpointer.execute(f"PRAGMA {limit}")

    async def open_to_read(self) -> None:
        """Open the file for reading only (``mode=ro``: nothing written but the WAL's missing
        side files); only ``rows`` works then."""
        if not self.path.is_file():
            reason = "a folder, not a file" if self.path.is_dir() else "no such file"
            raise OSError(f"cannot read the pending store STORE_PATH={self.path}: {reason}")
        uri = self.path.absolute().as_uri()
        try:
            await self._read_from(f"{uri}?mode=ro")
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            wal = self.path.with_name(f"{self.path.name}-wal")
            if code not in _CANNOT_WRITE_BESIDE:
                raise self._unreadable(exc) from exc
            if wal.exists():
                raise OSError(
                    f"cannot read the pending store STORE_PATH={self.path}: SQLite must"
                    f" create or write {self.path}-shm beside it to read the WAL beside it"
                    f" ({wal.name}), and this user cannot ({exc}): run the export as the"
                    " bot's user"
                ) from exc
            try:
                await self._read_from(f"{uri}?mode=ro&immutable=1")
            except sqlite3.Error as again:
                raise self._unreadable(again) from again

    async def _read_from(self, uri: str) -> None:
        """Connect to ``uri`` and check the schema (its first read); closed on failure."""
        db = await _connect(uri, uri=True, timeout=self._busy_timeout)
        self._db = db
        try:
            ((found,),) = await db.execute_fetchall("PRAGMA user_version")
            check_readable(int(found), self.path)
        except BaseException:
            await self.close()
            raise

    def _unreadable(self, exc: sqlite3.Error) -> OSError:
        return OSError(f"cannot read the pending store STORE_PATH={self.path}: {exc}")

    async def close(self) -> None:
        """Close the file (idempotent); cut short or failed, as ``abandon`` does."""
        connections = [(c, _raw(c)) for c in self._take()]
        try:
            for connection, _ in connections:
                await connection.close()
        except BaseException:
            for connection, raw in connections:
                _abandon(connection, raw, 2 * self._busy_timeout + _JOIN_WAIT)
            raise

    def abandon(self) -> None:
        """Close the file without waiting (a close cut short at a stop's deadline)."""
        for connection in self._take():
            _abandon(connection, _raw(connection), 2 * self._busy_timeout + _JOIN_WAIT)

    def _take(self) -> list[aiosqlite.Connection]:
        """Forget the connections, closing the inline one: the aiosqlite ones to close."""
        inline, self._inline = self._inline, None
        if inline is not None:
            inline.close()
        taken = [c for c in (self._checkpointer, self._db) if c is not None]
        self._checkpointer = self._db = None
        return taken

    async def rows(self, sql: str, params: Any = ()) -> list[Any]:
        """One statement's rows, in aiosqlite's thread (failures: ``STORE_UNAVAILABLE``)."""
        return await self._queued(_fetch, sql, params)

    def _failed(self, exc: sqlite3.Error) -> UserQuestionError:
        return UserQuestionError(
            f"the pending store (SQLite at {self.path}) failed: {exc}", STORE_UNAVAILABLE, cause=exc
        )

    async def inline(self, sql: str, params: Any = ()) -> list[Any]:
        """The rows of a short statement (a read or a write of one row by primary key)."""
        return await self.run(_fetch, sql, params)

    async def run(self, work: Callable[..., list[Any]], *args: Any) -> list[Any]:
        """``work(connection, *args)``: in this thread when the file need not be waited for,
        else in aiosqlite's (one hand-over)."""
        if self._inline is not None:
            try:
                rows = work(self._inline, *args)
            except sqlite3.Error as exc:
                if getattr(exc, "sqlite_errorcode", None) not in BUSY:
                    raise self._failed(exc) from exc
            else:
                await self._turn()
                return rows
        return await self._queued(work, *args)

    async def _queued(self, work: Callable[..., list[Any]], *args: Any) -> list[Any]:
        """``work(connection, *args)`` in aiosqlite's thread (one hand-over)."""
        if self._db is None:
            raise _not_open()
        queued: Callable[..., Awaitable[list[Any]]] = self._db._execute
        try:
            return await queued(work, self._db._conn, *args)
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    async def _turn(self) -> None:
        """Give other tasks their turn after ``RUN`` statements in a row (a stop ending 10,000
        questions never holds the loop); the loop's next turn ends a run."""
        self._run += 1
        if self._run == 1:
            asyncio.get_running_loop().call_soon(self._turned)
        if self._run >= RUN:
            await asyncio.sleep(0)

    def _turned(self) -> None:
        self._run = 0

    async def checkpoint(self) -> None:
        """Copy the WAL's committed pages into the file (``PASSIVE``)."""
        if self._checkpointer is None:
            raise _not_open()
        try:
            await self._checkpointer.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    async def scalar(self, sql: str) -> Any:
        rows = await self.rows(sql)
        return rows[0][0]

    async def delete_batches(self, table: str, key: str, where: str, *params: Any) -> int:
        """Delete the rows of ``table`` matching ``where``, ``CHUNK`` at a time (no statement
        holds the file long); how many."""
        statement = (
            f"DELETE FROM {table} WHERE {key} IN"
            f" (SELECT {key} FROM {table} WHERE {where} LIMIT {CHUNK}) RETURNING 1"
        )
        deleted = 0
        while True:
            gone = len(await self.rows(statement, params))
            deleted += gone
            if gone < CHUNK:
                return deleted

    async def pages(self, sql: str, after: int, *params: Any) -> AsyncIterator[list[Any]]:
        """The rows of ``sql`` (``seq > ?``, ``params``, ``LIMIT ?``), ``CHUNK`` at a time."""
        while True:
            rows = await self.rows(sql, (after, *params, CHUNK))
            yield rows
            if len(rows) < CHUNK:
                return
            after = int(rows[-1][0])

    async def rows_in(self, sql: str, ids: Sequence[str]) -> list[Any]:
        """The rows of ``sql`` (its ``{ids}`` a list of marks) for ``ids``, ``CHUNK`` at a time."""
        found: list[Any] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            found += await self.rows(sql.format(ids=",".join("?" * len(chunk))), chunk)
        return found


def _fetch(db: sqlite3.Connection, sql: str, params: Any) -> list[Any]:
    return db.execute(sql, params).fetchall()


def private_file(path: Path) -> None:
    """Create ``path`` readable by its owner only (0600), or make it so with its ``-wal``
    and ``-shm`` (which SQLite gives its mode)."""
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for side in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{side}", 0o600)


async def _connect(database: str | Path, **options: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect``; when it fails, its thread is waited for (a short while, off
    the loop) lest it call into a closed loop."""
    connection = aiosqlite.connect(database, **options)
    try:
        return await connection
    except BaseException:
        thread = getattr(connection, "_thread", None)
        if isinstance(thread, threading.Thread) and thread.is_alive():
            await asyncio.to_thread(thread.join, _JOIN_WAIT)
        raise


def _raw(connection: aiosqlite.Connection) -> sqlite3.Connection | None:
    """The ``sqlite3`` connection under ``connection`` (aiosqlite forgets it on ``close``)."""
    raw = getattr(connection, "_connection", None)
    return raw if isinstance(raw, sqlite3.Connection) else None


def _abandon(connection: aiosqlite.Connection, raw: sqlite3.Connection | None, wait: float) -> None:
    """Stop ``connection``'s thread without waiting: fail what is queued, have it close
    ``raw`` and end, the loop's executor waiting up to ``wait`` s for it (so ``asyncio.run``
    does too: no future is answered on a closed loop)."""
    thread = getattr(connection, "_thread", None)
    if not isinstance(thread, threading.Thread) or not thread.is_alive():
        return
    queue = connection._tx
    while True:
        try:
            future, _ = queue.get_nowait()
        except Empty:
            break
        if future is not None and not future.done():
            future.set_exception(sqlite3.ProgrammingError("Cannot operate on a closed database."))
    if raw is not None:
        queue.put_nowait((None, raw.close))
    connection.stop()  # its future is answered before the thread ends, loop still open
    loop = asyncio.get_running_loop()
    with contextlib.suppress(RuntimeError):  # the executor is shut down already
        loop.run_in_executor(None, thread.join, wait)


def _refuse_memory(path: Path) -> None:
    """Refuse a ``STORE_PATH`` SQLite keeps in memory: a database for each connection."""
    name = str(path)
    if name == ":memory:" or name.startswith("file::memory:"):
        raise OSError(
            f"cannot use STORE_PATH={name} for the pending store: SQLite keeps it in memory,"
            " a database for each connection, lost at exit (give STORE_PATH a file)"
        )


def _not_open() -> UserQuestionError:
    return UserQuestionError(
        "the pending store (SQLite) is closed or not started", STORE_UNAVAILABLE
    )
