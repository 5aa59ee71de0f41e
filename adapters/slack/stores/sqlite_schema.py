"""The SQLite store's schema: versioned (``PRAGMA user_version``), upgraded in place."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Final

import aiosqlite

_APPEND: Final = (
    "INSERT INTO events (request_id, at, json) VALUES"
    " (json_extract(NEW.event, '$.requestId'), json_extract(NEW.event, '$.at'), NEW.event);"
)
"""The triggers' body: append the event a write of ``records`` carries to the trail (its
columns from ``AuditEvent.dump()``'s JSON, camelCase)."""

_RECORDS_OPEN: Final = "CREATE INDEX records_open ON records (owner) WHERE state = 'pending'"
_RECORDS_FINISHED: Final = (
    "CREATE INDEX records_finished ON records (finished_at) WHERE state != 'pending'"
)
_RECORD_ENDED: Final = """CREATE TRIGGER record_ended AFTER UPDATE OF state ON records
            WHEN OLD.state = 'pending' AND NEW.state != 'pending'
            BEGIN INSERT INTO endings (id) VALUES (NEW.id); END"""
_EVENT_CREATED: Final = f"""CREATE TRIGGER record_event_created AFTER INSERT ON records
            WHEN NEW.event IS NOT NULL BEGIN {_APPEND} END"""
_EVENT_WRITTEN: Final = f"""CREATE TRIGGER record_event_written AFTER UPDATE OF event ON records
            WHEN NEW.event IS NOT NULL BEGIN {_APPEND} END"""

_EVENT_CHAINED: Final = """CREATE TRIGGER event_chained AFTER INSERT ON events
            WHEN NEW.hash IS NOT NULL BEGIN
            INSERT INTO chain_head (one, seq, hash) VALUES (1, NEW.seq, NEW.hash)
            ON CONFLICT (one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash; END"""
"""A chained event (its hash computed by its writer, ``sqlite.chained_write``) is the
new head; an earlier release's event, unchained, is not."""
_EVENT_PURGED: Final = """CREATE TRIGGER event_purged AFTER DELETE ON events BEGIN
            INSERT OR REPLACE INTO purged (seq, at, hash)
            VALUES (OLD.seq, OLD.at, coalesce(OLD.hash, '')); END"""
"""A deleted event leaves its position, time and hash (``''``: unchained), so the chain goes
on past it (and a deletion within the retention shows as a removal)."""

_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (  # 1: records, the endings feed, heartbeats
        """CREATE TABLE records (
            id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            state TEXT NOT NULL,
            owner TEXT,
            finished_at REAL,
            json TEXT NOT NULL
        ) WITHOUT ROWID""",
        _RECORDS_OPEN,
        _RECORDS_FINISHED,
        """CREATE TABLE endings (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            at REAL NOT NULL DEFAULT (strftime('%s', 'now'))
        )""",
        _RECORD_ENDED,
        "CREATE TABLE alive (process_id TEXT PRIMARY KEY, beat_at REAL NOT NULL)",
    ),
    (  # 2: the audit trail
        """CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            request_id TEXT NOT NULL,
            at REAL NOT NULL,
            json TEXT NOT NULL
        )""",
        "CREATE INDEX events_request ON events (request_id, seq)",
        "CREATE INDEX events_at ON events (at)",
    ),
    (  # 3: a write's event rides in its statement (``event``) and a trigger appends it
        "ALTER TABLE records ADD COLUMN event TEXT",
        _EVENT_CREATED,
        # only an update that sets ``event`` (one that leaves it would carry the last one)
        _EVENT_WRITTEN,
    ),
    (  # 4: records as a rowid table (large rows), its indexes and triggers made again
        """CREATE TABLE records_rowid (
            id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            state TEXT NOT NULL,
            owner TEXT,
            finished_at REAL,
            json TEXT NOT NULL,
            event TEXT
        )""",
        # (no trigger on the new table yet: the events already in the trail are not added
        # again; ``event`` is never read back)
        "INSERT INTO records_rowid (id, version, state, owner, finished_at, json)"
        " SELECT id, version, state, owner, finished_at, json FROM records",
        "DROP TABLE records",  # with its indexes and triggers
        "ALTER TABLE records_rowid RENAME TO records",
        _RECORDS_OPEN,
        _RECORDS_FINISHED,
        _RECORD_ENDED,
        _EVENT_CREATED,
        _EVENT_WRITTEN,
    ),
    (  # 5: the trail's hash chain (``audit_trail``): its columns, the head, purged hashes
        "ALTER TABLE events ADD COLUMN prev TEXT",
        "ALTER TABLE events ADD COLUMN question_prev TEXT",
        "ALTER TABLE events ADD COLUMN hash TEXT",
        "CREATE TABLE chain_head (one INTEGER PRIMARY KEY CHECK (one = 1),"
        " seq INTEGER NOT NULL, hash TEXT NOT NULL)",
        "CREATE TABLE purged (seq INTEGER PRIMARY KEY, at REAL NOT NULL, hash TEXT NOT NULL)",
    ),
    (  # 6: the writer chains in its own transaction: no trigger calls a function, so a
        # process of an earlier release writes on (unchained) in a rolling deploy
        "DROP TRIGGER IF EXISTS event_chained",
        "DROP TRIGGER IF EXISTS event_purged",
        _EVENT_CHAINED,
        _EVENT_PURGED,
    ),
)
BUSY: Final = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""Error codes of a statement that would have to wait."""
SCHEMA_VERSION: Final = len(_MIGRATIONS)
"""The schema this code writes; older files are upgraded at start."""
TRAIL_SINCE: Final = 2
"""The first schema with the ``events`` table, unchanged since: what the trail's reader needs."""


def _newer(found: int, path: Path) -> RuntimeError:
    return RuntimeError(
        f"the pending store {path} has schema {found}, newer than this"
        f" bot's {SCHEMA_VERSION}: upgrade the bot"
    )


def check_readable(found: int, path: Path) -> None:
    """Refuse to read a file of schema ``found`` this code cannot read as it is."""
    if found > SCHEMA_VERSION:
        raise _newer(found, path)
    if found < TRAIL_SINCE:
        raise RuntimeError(
            f"the pending store {path} has schema {found}, which keeps no audit trail"
            f" (kept since schema {TRAIL_SINCE})"
        )


async def migrate(
    db: aiosqlite.Connection, path: Path, log: logging.Logger, *, wait: float
) -> bool:
    """Bring the file's schema to ``SCHEMA_VERSION`` in one transaction (or refuse); whether
    it was upgraded. Another process holding the file is waited for up to ``wait`` seconds."""
    await _begin(db, path, log, wait)
    found = 0
    try:
        ((stored,),) = await db.execute_fetchall("PRAGMA user_version")
        found = int(stored)
        if found > SCHEMA_VERSION:
            raise _newer(found, path)
        for version in range(found, SCHEMA_VERSION):
            for statement in _MIGRATIONS[version]:
                await db.execute(statement)
        if found != SCHEMA_VERSION:
            await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await db.execute("COMMIT")
    except BaseException as exc:
        # SQLite has rolled back already on some errors (a full disk, an I/O error): a
        # ROLLBACK then fails ("no transaction is active") and would hide the real cause.
        if db.in_transaction:
            try:
                await db.execute("ROLLBACK")
            except sqlite3.Error as rollback:
                log.warning("pending store %s: rollback of the upgrade failed: %s", path, rollback)
        if isinstance(exc, sqlite3.Error):
            raise OSError(
                f"cannot upgrade the pending store STORE_PATH={path} from schema {found}"
                f" to {SCHEMA_VERSION}: {exc} (the file is left at schema {found})"
            ) from exc
        raise
    if found == SCHEMA_VERSION:
        return False
    log.info("pending store schema upgraded from %d to %d", found, SCHEMA_VERSION)
    return True


async def _begin(db: aiosqlite.Connection, path: Path, log: logging.Logger, wait: float) -> None:
    """``BEGIN IMMEDIATE``, the file's write lock, waiting for another process that holds it
    (each try waits the connection's busy timeout) up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            await db.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in BUSY:
                raise OSError(f"cannot open the pending store STORE_PATH={path}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise OSError(
                    f"cannot open the pending store STORE_PATH={path}: another process holds"
                    f" the file (upgrading its schema?) and did not let it go within"
                    f" {wait:g} s ({exc})"
                ) from exc
            if not told:
                log.warning(
                    "pending store %s is held by another process (upgrading its schema?):"
                    " waiting for it, up to %g s",
                    path,
                    wait,
                )
                told = True
