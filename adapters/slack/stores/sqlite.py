"""``SqlitePendingStore``: the durable embedded default, one SQLite file through aiosqlite.

Nothing to run beside the bot: the records live in one file (``STORE_PATH``) in WAL mode,
so a restart, a crash or a deploy loses nothing a person or an agent is waiting on.
Writes are single statements (``INSERT … ON CONFLICT DO NOTHING``, ``UPDATE … WHERE
version = …``), so several processes on one host may share the file and the first writer
wins. The schema carries its version (``PRAGMA user_version``) and is upgraded in place at
``start()``.

Wake-ups: a write that ends a record wakes this process's watches at once. Endings
written by another process on the same file are noticed by a poll every
``poll_interval`` seconds: ``PRAGMA data_version`` says whether anyone else committed, and
a trigger-fed ``endings`` table (an autoincrement sequence) says what ended since the last
look. Processes on different hosts need the Redis store (SQLite over a network file
system is not safe).

Liveness as in the Redis store: every process beats in ``alive`` every
``heartbeat_interval``; the pending records of a process whose beat is older than
``heartbeat_ttl`` are failed with ``OWNER_LOST`` by the next sweep (``on_orphans`` is told).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import aiosqlite

from adapters.slack.audit import AuditEvent
from adapters.slack.record import TERMINAL_STATES, PendingRecord
from adapters.slack.stores.lost import LOST_CHECK_INTERVAL, fail_lost, waiting_ids
from adapters.slack.stores.protocol import (
    OWNER_LOST_NOTE,
    RETENTION,
    OrphanHandler,
    PendingStore,
    StoreConflict,
    Watch,
    mutate,
)
from adapters.slack.stores.sqlite_schema import SCHEMA_VERSION, migrate
from bot.questions.errors import OWNER_LOST, STORE_UNAVAILABLE, UserQuestionError

__all__ = ["DEFAULT_PATH", "SCHEMA_VERSION", "SqlitePendingStore"]

DEFAULT_PATH: Final = "slack-questions.db"
"""The store's file when ``STORE_PATH`` is not set (relative to the working directory)."""

_ENDINGS_KEPT: Final = 3600.0
"""How long an entry of the endings feed is kept (pollers look every fraction of a second)."""
_CHUNK: Final = 500
"""Ids per ``IN (…)`` query (well under SQLite's parameter limit)."""


def _default_process_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class _SqliteWatch:
    """A local waiter for one request's ending."""

    def __init__(self, store: SqlitePendingStore, request_id: str) -> None:
        self._store = store
        self.request_id = request_id
        self.future: asyncio.Future[PendingRecord] = asyncio.get_running_loop().create_future()
        self.waiting = False  # set once waited on: the record existed (checked for loss)

    async def wait(self) -> PendingRecord:
        """Return the record once it is terminal (re-reading it first: it may be already)."""
        self.waiting = True
        if self.future.cancelled():
            self.future = asyncio.get_running_loop().create_future()
        if not self.future.done():
            record = await self._store.get(self.request_id)
            if record is not None and not record.is_open and not self.future.done():
                self.future.set_result(record)
        return await self.future

    def close(self) -> None:
        """Stop watching (idempotent)."""
        self._store._forget(self)


class SqlitePendingStore:
    """A ``PendingStore`` in one SQLite file (WAL); ``start()`` before use, ``close()`` after."""

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        process_id: str | None = None,
        retention: float = RETENTION,
        poll_interval: float = 0.1,
        heartbeat_interval: float = 2.0,
        heartbeat_ttl: float = 6.0,
        busy_timeout: float = 5.0,
        logger: logging.Logger | None = None,
    ) -> None:
        if retention <= 0 or poll_interval <= 0 or busy_timeout <= 0:
            raise ValueError("retention, poll_interval and busy_timeout must be positive")
        if heartbeat_interval <= 0 or heartbeat_ttl <= heartbeat_interval:
            raise ValueError("heartbeat_ttl must be longer than a positive heartbeat_interval")
        self._path = Path(path)
        self._process_id = process_id or _default_process_id()
        self._retention = retention
        self._poll_interval = poll_interval
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat_ttl = heartbeat_ttl
        self._busy_timeout = busy_timeout
        self._log = logger or logging.getLogger("adapters.slack.stores.sqlite")
        self.on_orphans: OrphanHandler | None = None
        """Called with the records a periodic sweep failed (set by the provider)."""
        self._db: aiosqlite.Connection | None = None
        self._watches: dict[str, set[_SqliteWatch]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self._data_version = -1
        self._seen_seq = 0
        self._lost_checked = 0.0

    # -- PendingStore ---------------------------------------------------------------------

    @property
    def process_id(self) -> str:
        """This process's id; records it creates name it as their owner."""
        return self._process_id

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def watch_count(self) -> int:
        """How many watches are registered in this process."""
        return sum(len(watches) for watches in self._watches.values())

    async def start(self) -> None:
        """Open the file (creating it), switch to WAL, upgrade the schema, start polling."""
        if self._closed:
            raise RuntimeError("a closed SqlitePendingStore cannot be started again")
        if self._db is not None:
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(
                self._path, isolation_level=None, timeout=self._busy_timeout
            )
        except (OSError, sqlite3.Error) as exc:
            raise OSError(f"cannot open the pending store STORE_PATH={self._path}: {exc}") from exc
        self._db = db
        try:
            mode = await self._scalar("PRAGMA journal_mode = WAL")
            if str(mode).lower() != "wal":
                self._log.warning("SQLite refused WAL mode for %s (got %s)", self._path, mode)
            await db.execute("PRAGMA synchronous = NORMAL")
            await migrate(db, self._path, self._log)
            self._seen_seq = int(await self._scalar("SELECT COALESCE(MAX(seq), 0) FROM endings"))
            self._data_version = int(await self._scalar("PRAGMA data_version"))
            await self._beat()
            await self.purge()
        except BaseException:
            self._db = None
            await db.close()
            raise
        self._log.info(
            "pending store opened %s (schema %d, process %s)",
            self._path,
            SCHEMA_VERSION,
            self._process_id,
        )
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._poll(), name="sqlite-store-poll"),
            loop.create_task(self._heartbeats(), name="sqlite-store-heartbeat"),
        ]

    async def close(self) -> None:
        """Stop polling, end waits still pending (``STORE_UNAVAILABLE``), close the file."""
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        self._tasks = []
        error = UserQuestionError("the pending store (SQLite) is closed", STORE_UNAVAILABLE)
        for watches in self._watches.values():
            for watch in watches:
                if not watch.future.done():
                    watch.future.set_exception(error)
                    watch.future.exception()  # retrieved: no "never retrieved" log
        self._watches.clear()
        db, self._db = self._db, None
        if db is not None:
            try:
                await db.execute("DELETE FROM alive WHERE process_id = ?", (self._process_id,))
            except sqlite3.Error as exc:
                self._log.warning("pending store could not delete its heartbeat: %s", exc)
            await db.close()
            self._log.info("pending store closed (process %s)", self._process_id)

    async def create(self, record: PendingRecord) -> bool:
        """Store a new record; ``False`` if one with its id exists already."""
        rows = await self._rows(
            "INSERT INTO records (id, version, state, owner, finished_at, json)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING version",
            (
                record.id,
                record.version,
                record.state,
                record.owner,
                record.finished_at,
                record.dump(),
            ),
        )
        return bool(rows)

    async def get(self, request_id: str) -> PendingRecord | None:
        """The record with this id, or ``None``."""
        rows = await self._rows("SELECT json FROM records WHERE id = ?", (request_id,))
        return PendingRecord.load(rows[0][0]) if rows else None

    async def compare_and_set(self, record: PendingRecord) -> bool:
        """Write ``record`` if the stored version is ``record.version - 1``.

        An ending is final: a finished record takes no other ending (only bookkeeping in its
        own state, or a deliberate reopen to ``pending``).
        """
        rows = await self._rows(
            "UPDATE records SET version = ?, state = ?, owner = ?, finished_at = ?, json = ?"
            " WHERE id = ? AND version = ?"
            " AND (state = 'pending' OR ? = 'pending' OR state = ?)"
            " RETURNING version",
            (
                record.version,
                record.state,
                record.owner,
                record.finished_at,
                record.dump(),
                record.id,
                record.version - 1,
                record.state,
                record.state,
            ),
        )
        if not rows:
            return False
        if record.state in TERMINAL_STATES:
            self._resolve(record)
        return True

    def watch(self, request_id: str) -> Watch:
        """Register interest in this request's ending (before posting, so no click is missed)."""
        watch = _SqliteWatch(self, request_id)
        if self._closed:
            watch.future.set_exception(
                UserQuestionError("the pending store (SQLite) is closed", STORE_UNAVAILABLE)
            )
            watch.future.exception()
            return watch
        self._watches.setdefault(request_id, set()).add(watch)
        return watch

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        """Every pending record (of ``owner``, when given)."""
        if owner is None:
            rows = await self._rows("SELECT json FROM records WHERE state = 'pending'", ())
        else:
            rows = await self._rows(
                "SELECT json FROM records WHERE state = 'pending' AND owner = ?", (owner,)
            )
        return [PendingRecord.load(raw) for (raw,) in rows]

    # -- the audit trail ------------------------------------------------------------------

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to its question's trail."""
        await self._rows(
            "INSERT INTO events (request_id, at, json) VALUES (?, ?, ?) RETURNING seq",
            (event.request_id, event.at, event.dump()),
        )

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        rows = await self._rows(
            "SELECT json FROM events WHERE request_id = ? ORDER BY seq", (request_id,)
        )
        return [AuditEvent.load(raw) for (raw,) in rows]

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages)."""
        after = 0
        while True:
            rows = await self._rows(
                "SELECT seq, json FROM events WHERE seq > ? AND at >= ? AND at < ?"
                " ORDER BY seq LIMIT ?",
                (after, since, math.inf if until is None else until, _CHUNK),
            )
            for _, raw in rows:
                yield AuditEvent.load(raw)
            if len(rows) < _CHUNK:
                return
            after = int(rows[-1][0])

    # -- retention and liveness -----------------------------------------------------------

    async def purge(self, now: float | None = None) -> int:
        """Delete finished records and audit events older than the retention period.

        Returns how many records went (a pending record is never purged).
        """
        now = time.time() if now is None else now
        rows = await self._rows(
            "DELETE FROM records WHERE state != 'pending' AND finished_at < ? RETURNING id",
            (now - self._retention,),
        )
        await self._rows("DELETE FROM endings WHERE at < ?", (now - _ENDINGS_KEPT,))
        await self._rows("DELETE FROM events WHERE at < ?", (now - self._retention,))
        return len(rows)

    async def sweep_orphans(self) -> list[PendingRecord]:
        """Fail the pending records of processes whose heartbeat is gone (``OWNER_LOST``)."""
        stale = time.time() - self._heartbeat_ttl
        rows = await self._rows(
            "SELECT DISTINCT r.owner FROM records r LEFT JOIN alive a"
            " ON a.process_id = r.owner WHERE r.state = 'pending' AND r.owner IS NOT NULL"
            " AND r.owner != ? AND (a.beat_at IS NULL OR a.beat_at < ?)",
            (self._process_id, stale),
        )
        failed: list[PendingRecord] = []
        for (owner,) in rows:
            for record in await self.open_records(owner=owner):
                written = await self._fail_orphan(record.id, owner)
                if written is not None:
                    failed.append(written)
        if failed:
            lost = ", ".join(sorted({str(r.owner) for r in failed}))
            self._log.warning("pending store failed %d question(s) of lost %s", len(failed), lost)
        return failed

    async def _fail_orphan(self, request_id: str, owner: str) -> PendingRecord | None:
        now = time.time()

        def lost(current: PendingRecord) -> PendingRecord | None:
            if not current.is_open or current.owner != owner:
                return None
            return current.next(
                state="failed", error_code=OWNER_LOST, note=OWNER_LOST_NOTE, finished_at=now
            )

        try:
            _, written = await mutate(self, request_id, lost)
        except StoreConflict:
            return None
        return written

    # -- background duties ----------------------------------------------------------------

    async def _poll(self) -> None:
        """Notice endings written by other processes on the same file."""
        while not self._closed:
            await asyncio.sleep(self._poll_interval)
            try:
                await self._poll_once()
            except Exception:  # never let one failure stop the wake-ups
                self._log.exception("pending store poll failed")

    async def _poll_once(self) -> None:
        version = int(await self._scalar("PRAGMA data_version"))
        if version == self._data_version:
            return  # nobody else committed since the last look
        self._data_version = version
        if time.monotonic() - self._lost_checked >= LOST_CHECK_INTERVAL:
            self._lost_checked = time.monotonic()
            await self._check_lost()
        rows = await self._rows(
            "SELECT seq, id FROM endings WHERE seq > ? ORDER BY seq", (self._seen_seq,)
        )
        if not rows:
            return
        self._seen_seq = int(rows[-1][0])
        await self._reread(request_id for _, request_id in rows)

    async def _check_lost(self) -> None:
        """Fail the waits on records another process deleted: ``RECORD_LOST``."""
        ids = waiting_ids(self._watches)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = await self._rows(f"SELECT id FROM records WHERE id IN ({marks})", chunk)
            present = {request_id for (request_id,) in rows}
            for request_id in chunk:
                if request_id not in present:
                    self._log.error("pending store lost record %s (deleted)", request_id)
                    fail_lost(self._watches.get(request_id, ()), request_id)

    async def _reread(self, ids: Iterable[str]) -> None:
        wanted = sorted({i for i in ids if i in self._watches})
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = await self._rows(f"SELECT json FROM records WHERE id IN ({marks})", chunk)
            for (raw,) in rows:
                record = PendingRecord.load(raw)
                if not record.is_open:
                    self._resolve(record)

    async def _heartbeats(self) -> None:
        """Beat, sweep for orphans and apply the retention, every interval."""
        last_purge = time.monotonic()
        while not self._closed:
            await asyncio.sleep(self._heartbeat_interval)
            try:
                await self._beat()
                orphans = await self.sweep_orphans()
                if time.monotonic() - last_purge > 3600:
                    last_purge = time.monotonic()
                    await self.purge()
            except Exception:
                self._log.exception("pending store heartbeat failed")
                continue
            if orphans and self.on_orphans is not None:
                try:
                    await self.on_orphans(orphans)
                except Exception:
                    self._log.exception("on_orphans failed")

    async def _beat(self) -> None:
        await self._rows(
            "INSERT INTO alive (process_id, beat_at) VALUES (?, ?)"
            " ON CONFLICT (process_id) DO UPDATE SET beat_at = excluded.beat_at RETURNING 1",
            (self._process_id, time.time()),
        )

    # -- plumbing -------------------------------------------------------------------------

    def _connection(self) -> aiosqlite.Connection:
        if self._db is None:
            raise UserQuestionError(
                "the pending store (SQLite) is closed or not started", STORE_UNAVAILABLE
            )
        return self._db

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Run one statement and fetch its rows; SQLite failures are ``STORE_UNAVAILABLE``."""
        db = self._connection()
        try:
            return list(await db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise UserQuestionError(
                f"the pending store (SQLite at {self._path}) failed: {exc}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc

    async def _scalar(self, sql: str) -> Any:
        rows = await self._rows(sql, ())
        return rows[0][0]

    def _resolve(self, record: PendingRecord) -> None:
        for watch in self._watches.get(record.id, ()):
            if not watch.future.done():
                watch.future.set_result(record.model_copy(deep=True))

    def _forget(self, watch: _SqliteWatch) -> None:
        watches = self._watches.get(watch.request_id)
        if watches is None:
            return
        watches.discard(watch)
        if not watches:
            del self._watches[watch.request_id]

    def __repr__(self) -> str:
        return f"SqlitePendingStore({str(self._path)!r}, process_id={self._process_id!r})"


if TYPE_CHECKING:

    def _conforms(store: SqlitePendingStore) -> PendingStore:
        return store
