"""``SqlitePendingStore``: the durable embedded default, one SQLite file through aiosqlite."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

from adapters.slack.model.audience import Audience, batches, narrowed
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import TERMINAL_STATES, PendingRecord
from adapters.slack.stores.contract import RETENTION, DurableStore, OpenCount, TrailReader
from adapters.slack.stores.duties import default_process_id, stop_tasks
from adapters.slack.stores.sqlite_audit import SqliteAudit
from adapters.slack.stores.sqlite_file import SqliteFile
from adapters.slack.stores.sqlite_schema import SCHEMA_VERSION
from adapters.slack.stores.sqlite_upkeep import SqliteEndings, SqliteUpkeep
from adapters.slack.stores.watches import WatchRegistry
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

__all__ = ["DEFAULT_PATH", "SCHEMA_VERSION", "SqlitePendingStore"]

DEFAULT_PATH: Final = "slack-questions.db"
"""The store's file when ``STORE_PATH`` is not set (relative to the working directory)."""


class SqlitePendingStore(DurableStore):
    """A ``PendingStore`` in one SQLite file (WAL); ``start()`` before use, ``close()`` after."""

    _trail: SqliteAudit
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
            raise ValueError(
                "retention, poll_interval, busy_timeout and checkpoint_interval must be positive"
            )
        self._process_id = process_id or default_process_id()
        self._heartbeat_interval = heartbeat_interval
        self._checkpoint_interval = checkpoint_interval
        self._log = logger or logging.getLogger("adapters.slack.stores.sqlite")
        self._file = SqliteFile(Path(path), busy_timeout=busy_timeout, log=self._log)
        self._watches = WatchRegistry(self._refresh)
        self._endings = SqliteEndings(self._file, self._watches, poll_interval=poll_interval)
        self._trail = SqliteAudit(self._file)
        self._upkeep = SqliteUpkeep(
            self._file,
            self,
            self._trail,
            retention=retention,
            heartbeat_interval=heartbeat_interval,
            heartbeat_ttl=heartbeat_ttl,
        )
        self._tasks: list[asyncio.Task[None]] = []
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
            await self._endings.begin()
            await self._upkeep.beat()
            if time.monotonic() - began > self._heartbeat_interval:
                # it waited for the file (or upgraded it): so did the others' beats
                self._upkeep.hold_sweep()
            await self._upkeep.purge()
        except BaseException:
            await self._file.close()
            raise
        shown = (self.path, SCHEMA_VERSION, self._process_id)
        self._log.info("pending store opened %s (schema %d, process %s)", *shown)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._endings.poll(), name="sqlite-store-poll"),
            *self._upkeep.tasks(lambda: self._closed, self._checkpoint_interval, self),
        ]

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[TrailReader]:
        """The audit trail, the file opened for reading only (instead of ``start()``)."""
        if self._closed or self._file.is_open:
            raise RuntimeError("reading() is instead of start(): this store is started or closed")
        await self._file.open_to_read()
        try:
            yield self._trail
        finally:
            await self._file.close()

    async def close(self) -> None:
        """Cut short (a stop's deadline), it abandons the file: ``SqliteFile.abandon``."""
        if self._closed:
            return
        self._closed = True
        closed = UserQuestionError("the pending store (SQLite) is closed", STORE_UNAVAILABLE)
        try:
            await stop_tasks(self._tasks, self._log)
            self._tasks = []
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
        rows = await self._trail.write(
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
        wrote = await self._trail.write(
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
