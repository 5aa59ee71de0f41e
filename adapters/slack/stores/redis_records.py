"""The Redis store's records: create, read, compare-and-set, and the open index."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from functools import partial
from typing import cast

from adapters.slack.model.audience import Audience, batches
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import OpenCount
from adapters.slack.stores.redis_audit import chained
from adapters.slack.stores.redis_link import RedisKeys, RedisLink, px
from adapters.slack.stores.redis_lua import AUDIENCES, INDEXED, OPEN_COUNT, WRITE
from bot.questions.errors import UserQuestionError

__all__ = ["RedisRecords", "dump_audience", "load_audience"]


class RedisRecords:
    """The records of one store, kept by its scripts: ``RedisPendingStore``'s record half."""

    def __init__(
        self, link: RedisLink, keys: RedisKeys, *, finished_ttl: float, log: logging.Logger
    ) -> None:
        self._link = link
        self._keys = keys
        self._finished_ttl = finished_ttl
        self._log = log
        client = link.client
        self._write_script = client.register_script(WRITE)
        self._indexed_script = client.register_script(INDEXED)
        self._count_script = client.register_script(OPEN_COUNT)
        self._audiences_script = client.register_script(AUDIENCES)

    async def create(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        return await self._write("create", record, "", event)

    async def get(self, request_id: str) -> PendingRecord | None:
        key = self._keys.record(request_id)
        raw = await self._link.op("get", lambda: self._link.client.get(key))
        return None if raw is None else PendingRecord.load(raw, of=request_id)

    async def get_many(self, request_ids: Sequence[str]) -> list[PendingRecord | None]:
        if not request_ids:
            return []
        keys = [self._keys.record(request_id) for request_id in request_ids]
        raws = await self._link.op("read records", lambda: self._link.client.mget(keys))
        return [
            None if raw is None else PendingRecord.load(raw, of=request_id)
            for request_id, raw in zip(request_ids, raws, strict=True)
        ]

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        return await self._write("compare-and-set", record, record.version, event)

    @staticmethod
    def _new_token() -> str:
        """A fresh token per write (the same across redis-py's retries of that write)."""
        return secrets.token_hex(8)

    async def _write(
        self, what: str, record: PendingRecord, version: int | str, event: AuditEvent | None
    ) -> bool:
        """Run the write script (``version`` ``''``: a create), then ``event`` and its chain."""
        keys = self._keys.of_record(record)
        args: list[str | int] = [record.dump(), record.id, version, record.state]
        args += [px(self._finished_ttl), self._keys.owner_prefix, self._keys.done]
        args += [self._new_token(), record.owner or "", dump_audience(record)]

        async def run(chain: list[str | int]) -> object:
            return await self._link.op(what, partial(self._write_script, keys, args + chain))

        return bool(await chained(self._link, self._keys, event, run))

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        index = self._keys.open if owner is None else self._keys.owner(owner)
        prefix = self._keys.record_prefix
        raws = await self._link.op(
            "list open records",
            lambda: self._indexed_script(keys=[index], args=[prefix]),
        )
        records: list[PendingRecord] = []
        for raw in cast(list[str], raws):
            record = load_record(raw, "in the open index", self._log)
            if record is not None and record.is_open and (owner is None or record.owner == owner):
                records.append(record)
        return records

    async def open_audiences(self) -> list[Audience]:
        """Who may answer each open question, from ``p:audiences`` (no record is read but
        those stored before it was kept: read once, and their entries added)."""
        keys = [self._keys.open, self._keys.audiences]
        found, missing = await self._link.op(
            "list audiences",
            lambda: self._audiences_script(keys=keys, args=[self._keys.record_prefix]),
        )
        lines = cast(str, found)
        audiences: list[Audience] = []
        async for batch in batches(lines.split("\n") if lines else []):  # not all at once
            audiences.extend(load_audience(line) for line in batch)
        earlier: dict[str, str] = {}
        for request_id in cast(list[str], missing):
            record = await self.get(request_id)
            kept = "" if record is None else dump_audience(record)
            if kept:
                earlier[request_id] = kept
                audiences.append(load_audience(f"{request_id}\t{kept}"))
        if earlier:
            await self._link.op("keep audiences", lambda: self._keep_audiences(earlier))
        return audiences

    async def _keep_audiences(self, entries: dict[str, str]) -> None:
        """Add entries for records stored before ``p:audiences`` was kept (``HSETNX``)."""
        async with self._link.client.pipeline(transaction=False) as pipe:
            for request_id, kept in entries.items():
                pipe.hsetnx(self._keys.audiences, request_id, kept)
            await pipe.execute()

    async def open_count(self) -> OpenCount:
        keys = [self._keys.open, self._keys.owners, self._keys.owner(self._keys.process_id)]
        owners = self._keys.owner_prefix
        total, mine, unowned = await self._link.op(
            "count open records",
            lambda: self._count_script(keys=keys, args=[owners, self._keys.record_prefix]),
        )
        return OpenCount(int(total), int(mine), int(unowned))


def load_record(
    raw: str | bytes | None, request_id: str, log: logging.Logger
) -> PendingRecord | None:
    """A stored record, or ``None`` when it is missing or this version cannot read it at
    all (logged; fields it does not know are only ignored: ``PendingRecord.load``)."""
    if raw is None:
        return None
    try:
        return PendingRecord.load(raw, of=request_id)
    except UserQuestionError as exc:
        log.error("%s", exc.message)
        return None


def dump_audience(record: PendingRecord) -> str:
    """What ``p:audiences`` keeps for ``record``: time asked, users and groups named
    (space-joined) and, when nobody is, the conversation, tab-separated; ``''``: none."""
    audience = Audience.of(record)
    if audience is None:
        return ""
    users, groups = " ".join(audience.users), " ".join(audience.usergroups)
    line = f"{audience.created_at!r}\t{users}\t{groups}"
    return line if audience.channel is None else f"{line}\t{audience.channel}"


def load_audience(line: str) -> Audience:
    """The ``Audience`` of a line (the id, a tab, what ``dump_audience`` kept); one of an
    earlier version naming nobody and no conversation is on no Home tab (``""``)."""
    request_id, created_at, users, groups, *rest = line.split("\t")
    named, usergroups = tuple(users.split()), tuple(groups.split())
    channel = rest[0] if rest else (None if named or usergroups else "")
    return Audience(request_id, float(created_at), named, usergroups, channel)
