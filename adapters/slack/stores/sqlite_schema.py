"""The SQLite store's schema: versioned (``PRAGMA user_version``), upgraded in place.

Each entry of ``_MIGRATIONS`` takes the file from one version to the next; ``migrate``
applies the missing ones in one transaction at start (two processes starting on one new
file agree: the second finds the schema done) and refuses a file newer than the code.

Since schema 3 a write of ``records`` carries its audit event in the ``event`` column
(``NULL`` when it has none; overwritten by every write, never read back) and a trigger
appends it to ``events``: the change and its event are one statement, so both are kept or
neither (a failing trigger aborts the write), with no transaction around them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import aiosqlite

__all__ = ["SCHEMA_VERSION", "migrate"]

_APPEND: Final = (
    "INSERT INTO events (request_id, at, json) VALUES"
    " (json_extract(NEW.event, '$.requestId'), json_extract(NEW.event, '$.at'), NEW.event);"
)
"""The triggers' body: append the event a write of ``records`` carries to the trail (its
columns from ``AuditEvent.dump()``'s JSON, camelCase)."""

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
        "CREATE INDEX records_open ON records (owner) WHERE state = 'pending'",
        "CREATE INDEX records_finished ON records (finished_at) WHERE state != 'pending'",
        """CREATE TABLE endings (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            at REAL NOT NULL DEFAULT (strftime('%s', 'now'))
        )""",
        """CREATE TRIGGER record_ended AFTER UPDATE OF state ON records
            WHEN OLD.state = 'pending' AND NEW.state != 'pending'
            BEGIN INSERT INTO endings (id) VALUES (NEW.id); END""",
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
        f"""CREATE TRIGGER record_event_created AFTER INSERT ON records
            WHEN NEW.event IS NOT NULL BEGIN {_APPEND} END""",
        # only an update that sets ``event`` (one that leaves it would carry the last one)
        f"""CREATE TRIGGER record_event_written AFTER UPDATE OF event ON records
            WHEN NEW.event IS NOT NULL BEGIN {_APPEND} END""",
    ),
)
SCHEMA_VERSION: Final = len(_MIGRATIONS)
"""The schema this code writes; older files are upgraded at start."""


async def migrate(db: aiosqlite.Connection, path: Path, log: logging.Logger) -> None:
    """Bring the file's schema to ``SCHEMA_VERSION`` in one transaction (or refuse)."""
    await db.execute("BEGIN IMMEDIATE")
    try:
        async with db.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        found = int(row[0]) if row is not None else 0
        if found > SCHEMA_VERSION:
            raise RuntimeError(
                f"the pending store {path} has schema {found}, newer than this"
                f" bot's {SCHEMA_VERSION}: upgrade the bot"
            )
        for version in range(found, SCHEMA_VERSION):
            for statement in _MIGRATIONS[version]:
                await db.execute(statement)
        if found != SCHEMA_VERSION:
            await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            log.info("pending store schema upgraded from %d to %d", found, SCHEMA_VERSION)
        await db.execute("COMMIT")
    except BaseException:
        await db.execute("ROLLBACK")
        raise
