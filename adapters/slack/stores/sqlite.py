"""``SqlitePendingStore``: the durable embedded default, one SQLite file through aiosqlite."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

from adapters.slack.model.audience import Audience, batches, narrowed
from adapters.slack.model.audit_trail import AuditEvent, ChainCheck, ChainRow, chain_hash, verify
from adapters.slack.model.record import TERMINAL_STATES, PendingRecord
from adapters.slack.stores.contract import RETENTION, DurableStore, OpenCount, TrailReader
from adapters.slack.stores.duties import default_process_id
from adapters.slack.stores.sqlite_file import SqliteFile
from adapters.slack.stores.sqlite_schema import SCHEMA_VERSION
from adapters.slack.stores.sqlite_upkeep import SqliteUpkeep
from adapters.slack.stores.watches import WatchRegistry
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

DEFAULT_PATH: Final = "slack-questions.db"
"""The store's file when ``STORE_PATH`` is not set (relative to the working directory)."""


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


class SqlitePendingStore(DurableStore):
    """A ``PendingStore`` in one SQLite file (WAL); ``start()`` before use, ``close()`` after;
    its audit trail, every question's events in one table (``events``)."""

    _upkeep: SqliteUpkeep

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
        checkpoint_interval: float = 1.0,
        logger: logging.Logger | None = None,
    ) -> None:
        if min(retention, poll_interval, busy_timeout, checkpoint_interval) <= 0:
            raise ValueError("retention, the intervals and busy_timeout must be positive")
        self._process_id = process_id or default_process_id()
        self._poll_interval = poll_interval
        self._checkpoint_interval = checkpoint_interval
        self._log = logger or logging.getLogger("adapters.slack.stores.sqlite")
        self._file = SqliteFile(Path(path), busy_timeout=busy_timeout, log=self._log)
        self._watches = WatchRegistry(self._refresh)
        self._upkeep = SqliteUpkeep(
            self._file,
            self,
            self._watches,
            retention=retention,
            heartbeat_interval=heartbeat_interval,
            heartbeat_ttl=heartbeat_ttl,
        )
        self._closed = False

    @property
    def path(self) -> Path:
        """The database file."""
        return self._file.path

    async def start(self) -> None:
        if self._closed:
            raise RuntimeError("a closed SqlitePendingStore cannot be started again")
        if self._file.is_open:
            return
        began = time.monotonic()
        await self._file.open()
        try:
            await self._upkeep.begin(began)
            await self._upkeep.purge()
        except BaseException:
            await self._file.close()
            raise
        shown = (self.path, SCHEMA_VERSION, self._process_id)
        self._log.info("pending store opened %s (schema %d, process %s)", *shown)
        poll = ("poll", self._poll_interval, self._upkeep.poll_once)
        # the WAL copied into the file apart, so no write waits for a checkpoint
        checkpoint = ("checkpoint", self._checkpoint_interval, self._file.checkpoint)
        self._upkeep.loops("sqlite", lambda: self._closed, poll, checkpoint)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[TrailReader]:
        """The audit trail, the file opened for reading only (instead of ``start()``)."""
        if self._closed or self._file.is_open:
            raise RuntimeError("reading() is instead of start(): this store is started or closed")
        await self._file.open_to_read()
        try:
            yield self
        finally:
            await self._file.close()

    async def close(self) -> None:
        """Cut short (a stop's deadline), it abandons the file: ``SqliteFile.abandon``."""
        if self._closed:
            return
        self._closed = True
        closed = UserQuestionError("the pending store (SQLite) is closed", STORE_UNAVAILABLE)
        try:
            await self._upkeep.stop()
            self._watches.close(closed)
            if self._file.is_open:
                await self._upkeep.stop_beating()
                await self._file.close()
                self._log.info("pending store closed (process %s)", self._process_id)
        except BaseException:
            # Cut short (a stop's deadline): the waits still end, the file's threads too.
            self._watches.close(closed)
            self._file.abandon()
            raise

    async def create(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        rows = await self._write(
            "INSERT INTO records (id, version, state, owner, finished_at, json)"
            " VALUES (:id, :v, :s, :o, :f, :j) ON CONFLICT (id) DO NOTHING RETURNING version",
            _columns(record),
            event,
        )
        return bool(rows)

    async def get(self, request_id: str) -> PendingRecord | None:
        rows = await self._file.inline("SELECT json FROM records WHERE id = ?", (request_id,))
        return PendingRecord.load(rows[0][0]) if rows else None

    async def get_many(self, request_ids: Sequence[str]) -> list[PendingRecord | None]:
        unique = list(dict.fromkeys(request_ids))
        sql = "SELECT id, json FROM records WHERE id IN ({ids})"
        found: dict[str, str] = dict(await self._file.rows_in(sql, unique))
        raws = (found.get(request_id) for request_id in request_ids)
        return [None if raw is None else PendingRecord.load(raw) for raw in raws]

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        columns = _columns(record)
        wrote = await self._write(
            "UPDATE records SET version = :v, state = :s, owner = :o, finished_at = :f, json = :j"
            " WHERE id = :id AND version = :v - 1 AND (state = 'pending' OR :s = 'pending'"
            " OR state = :s) RETURNING version",
            columns,
            event,
        )
        if wrote and record.state in TERMINAL_STATES:
            self._watches.resolve(record, columns["j"])  # the waiters' copies: no second dump
        return bool(wrote)

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        sql = "SELECT json FROM records WHERE state = 'pending'"
        if owner is None:
            rows = await self._file.rows(sql)
        else:
            rows = await self._file.rows(f"{sql} AND owner = ?", (owner,))
        return [PendingRecord.load(raw) for (raw,) in rows]

    async def open_count(self) -> OpenCount:
        ((total, mine, unowned),) = await self._file.rows(
            "SELECT count(*), coalesce(sum(owner = ?), 0), coalesce(sum(owner IS NULL), 0)"
            " FROM records WHERE state = 'pending'",
            (self.process_id,),
        )
        return OpenCount(total, mine, unowned)

    async def open_audiences(self) -> list[Audience]:
        """Taken out of the records' JSON by SQLite: no record is parsed on the loop."""
        rows = await self._file.rows(_AUDIENCES)
        audiences: list[Audience] = []
        async for batch in batches(rows):  # 10,000 at once would hold the loop
            audiences.extend(
                Audience.named(
                    request_id,
                    created_at,
                    *_who(users, groups, (reviewers, reviewer_groups) if reviewing else None),
                    channel=channel,
                    message_channel=message_channel,
                )
                for (
                    request_id, created_at, users, groups, reviewing, reviewers, reviewer_groups,
                    channel, message_channel,
                ) in batch
            )  # fmt: skip
        return audiences

    async def _write(self, sql: str, params: Any, event: AuditEvent | None) -> list[Any]:
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

    def __repr__(self) -> str:
        return f"SqlitePendingStore({str(self.path)!r}, process_id={self._process_id!r})"


_AUDIENCES: Final = (
    "SELECT id, json_extract(json, '$.created_at'),"
    # (``records.json``: inside json_each, ``json`` is a column of its own)
    " (SELECT group_concat(value, ' ') FROM json_each(records.json, '$.allowed_users')),"
    " (SELECT group_concat(value, ' ') FROM json_each(records.json, '$.allowed_usergroups')),"
    " json_type(json, '$.review.reviewers') = 'object',"
    " (SELECT group_concat(value, ' ') FROM json_each(records.json, '$.review.reviewers.users')),"
    " (SELECT group_concat(value, ' ')"
    " FROM json_each(records.json, '$.review.reviewers.usergroups')),"
    " json_extract(json, '$.channel'), json_extract(json, '$.message_channel')"
    " FROM records WHERE state = 'pending' AND json_array_length(json, '$.questions') > 0"
)
"""Each open question's id, time asked, users and groups named (space-joined), its team
review's reviewers if it names them, and the channel asked in and the message's."""


def _columns(record: PendingRecord) -> dict[str, Any]:
    """A record's columns, named as its writes name them."""
    names = {"id": record.id, "v": record.version, "s": record.state, "o": record.owner}
    return names | {"f": record.finished_at, "j": record.dump()}


def _who(
    users: str | None, groups: str | None, review: tuple[str | None, str | None] | None
) -> tuple[list[str], list[str]]:
    """Who may answer: the allow-lists, or a team review's reviewers within them."""
    if review is None:
        return list(_names(users)), list(_names(groups))
    return narrowed(_names(review[0]), _names(review[1]), _names(users), _names(groups))


def _names(joined: str | None) -> tuple[str, ...]:
    """The ids SQLite joined with spaces (Slack ids have none); ``None``: nobody named."""
    return () if joined is None else tuple(joined.split(" "))
