"""The SQLite store's audit trail: the ``events`` table (schema 2), appended and read."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import AsyncIterator
from typing import Any, Final

from adapters.slack.model.audit_chain import ChainCheck, ChainRow, chain_hash, verify
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.stores.sqlite_file import SqliteFile, batch_delete
from bot.questions.errors import UserQuestionError

__all__ = ["SqliteAudit", "chained_write"]

_PURGE: Final = batch_delete(
    "events",
    "seq",
    "at < ? AND NOT EXISTS (SELECT 1 FROM records WHERE records.id = events.request_id)",
)
"""A trail goes with its record; an event whose question has no record goes by its age
(through ``events_at`` and the records' key; ``NOT IN`` would match nothing after a NULL)."""

_RANGE: Final = "SELECT min(seq), max(seq) FROM events WHERE at >= ? AND at < ?"
"""The first and last ``seq`` of a time range, from the ``events_at`` index alone (several
processes may append with ``at`` slightly out of ``seq`` order)."""

_PAGE: Final = (
    "SELECT seq, json FROM events WHERE seq > ? AND seq <= ? AND +at >= ? AND +at < ?"
    " ORDER BY seq LIMIT ?"
)
"""A page of a time range's events by ``seq`` between its first and last (``_RANGE``); the
``+`` keeps SQLite on the primary key (``events_at`` would sort the range for each page)."""

_CHAIN_PAGE: Final = (
    "SELECT seq, request_id, at, json, prev, question_prev, hash FROM events"
    " WHERE seq > ? ORDER BY seq LIMIT ?"
)

_NEWEST: Final = 2**63 - 1
"""No last ``seq``: a range open to the future is read on to the newest event."""

_TIPS: Final = (
    "SELECT (SELECT hash FROM chain_head), (SELECT hash FROM events"
    " WHERE request_id = ? AND hash IS NOT NULL ORDER BY seq DESC LIMIT 1)"
)
"""The head's hash and the question's newest chained event's (past an earlier release's)."""


def chained_write(
    db: sqlite3.Connection, sql: str | None, params: Any, event: AuditEvent
) -> list[Any]:
    """Run ``sql`` and, if it returns rows (or is ``None``), append ``event`` with its chain
    (``chain_hash`` over the head and its question's last chained hash; the trigger moves
    the head): one ``BEGIN IMMEDIATE`` transaction, so no other writer appends between."""
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = [()] if sql is None else db.execute(sql, params).fetchall()
        if rows:
            line = event.dump()
            ((prev, qprev),) = db.execute(_TIPS, (event.request_id,)).fetchall()
            db.execute(
                "INSERT INTO events (request_id, at, json, prev, question_prev, hash)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (event.request_id, event.at, line, prev, qprev, chain_hash(prev, qprev, line)),
            )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return rows


class SqliteAudit:
    """Every question's events in one table, in the order they were appended."""

    def __init__(self, file: SqliteFile) -> None:
        self._file = file

    async def write(self, sql: str, params: Any, event: AuditEvent | None) -> list[Any]:
        """The rows of a record's write ``sql``, with ``event`` appended should it write."""
        if event is None:
            return await self._file.inline(sql, params)
        return await self._file.run(chained_write, sql, params, event)

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to its question's trail (an event without a write)."""
        await self._file.run(chained_write, None, (), event)

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order appended (inline: a long-poll waits)."""
        rows = await self._file.inline(
            "SELECT json FROM events WHERE request_id = ? ORDER BY seq", (request_id,)
        )
        return [AuditEvent.load(raw) for (raw,) in rows]

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages)."""
        end = math.inf if until is None else until
        ((first, last),) = await self._file.rows(_RANGE, (since, end))
        if first is None:
            return
        upto = _NEWEST if until is None else int(last)
        async for rows in self._file.pages(_PAGE, int(first) - 1, upto, since, end):
            for _, raw in rows:
                yield AuditEvent.load(raw)

    async def check_chain(self, kept_since: float) -> ChainCheck | None:
        """The breaks of the hash chain (schema 5 on), read in pages of ``CHUNK``."""
        try:
            head = await self._file.rows("SELECT seq, hash FROM chain_head")
            purged = await self._file.rows("SELECT seq, at, hash FROM purged")
        except UserQuestionError as exc:
            if isinstance(exc.cause, sqlite3.OperationalError):
                return None  # a file from before the chain
            raise
        rows = [ChainRow(*row) async for page in self._file.pages(_CHAIN_PAGE, 0) for row in page]
        found = (int(head[0][0]), str(head[0][1])) if head else None
        gone = {int(seq): (float(at), str(h)) for seq, at, h in purged}
        return verify(rows, found, gone, kept_since)

    async def purge(self, before: float) -> None:
        """Delete the events older than ``before`` whose question has no record left (a
        pending question keeps its whole trail, an ended one until its record goes)."""
        await self._file.delete_batches(_PURGE, (before,))
