"""The SQLite store's audit trail: the ``events`` table (schema 2), appended and read.

A write's event is appended by a trigger on ``records`` in the write's own statement (schema
3, see ``sqlite_schema``); ``append_event`` is for an event without one.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Final

from adapters.slack.audit import AuditEvent
from adapters.slack.stores.sqlite_file import CHUNK, SqliteFile, batch_delete

__all__ = ["SqliteAudit"]

_PURGE: Final = batch_delete(
    "events",
    "seq",
    "at < ? AND NOT EXISTS (SELECT 1 FROM records WHERE records.id = events.request_id)",
)
"""A trail goes with its record (kept while pending and the retention after its end, see
``SqliteUpkeep.purge``); an event whose question has no record goes by its own age. Read
through ``events_at`` and the records' primary key: no table is scanned whole. (``NOT
EXISTS``, not ``NOT IN``: one NULL id among the records would make ``NOT IN`` match
nothing, for good.)"""


class SqliteAudit:
    """Every question's events in one table, in the order they were appended."""

    def __init__(self, file: SqliteFile) -> None:
        self._file = file

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to its question's trail (an event without a write)."""
        await self._file.rows(
            "INSERT INTO events (request_id, at, json) VALUES (?, ?, ?) RETURNING seq",
            (event.request_id, event.at, event.dump()),
        )

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        rows = await self._file.rows(
            "SELECT json FROM events WHERE request_id = ? ORDER BY seq", (request_id,)
        )
        return [AuditEvent.load(raw) for (raw,) in rows]

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages)."""
        after = 0
        while True:
            rows = await self._file.rows(
                "SELECT seq, json FROM events WHERE seq > ? AND at >= ? AND at < ?"
                " ORDER BY seq LIMIT ?",
                (after, since, math.inf if until is None else until, CHUNK),
            )
            for _, raw in rows:
                yield AuditEvent.load(raw)
            if len(rows) < CHUNK:
                return
            after = int(rows[-1][0])

    async def purge(self, before: float) -> None:
        """Delete the events older than ``before`` (the retention's cutoff) whose question
        has no record left (after the records' purge): a pending question keeps its whole
        trail, however old, and an ended one until its record goes."""
        await self._file.delete_batches(_PURGE, (before,))
