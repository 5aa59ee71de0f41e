"""``RedisPendingStore``: the pending store shared by several bot processes through Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import Final, cast

from redis.commands.core import AsyncScript

from adapters.slack.model.audience import Audience, batches
from adapters.slack.model.audit_trail import AuditEvent, ChainCheck, ChainRow, chain_hash, verify
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import RETENTION, DurableStore, OpenCount, TrailReader
from adapters.slack.stores.duties import default_process_id
from adapters.slack.stores.redis_link import (
    FAILURES,
    PAGE,
    RedisKeys,
    RedisLink,
    closed_error,
    px,
    reraise_cancellation,
)
from adapters.slack.stores.redis_lua import APPEND, AUDIENCES, INDEXED, OPEN_COUNT, WRITE
from adapters.slack.stores.redis_upkeep import RedisUpkeep
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

CHAIN_TRIES: Final = 16
"""Tries of a chained append, the head moved before each, before ``STORE_UNAVAILABLE``."""
Entries = list[tuple[str, dict[str, str]]]
"""What XRANGE returns: each entry's id and fields."""


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


class RedisTrail:
    """The Redis store's audit trail, streams: ``p:audit`` (every event) and
    ``p:events:{id}`` (a question's); a base of ``RedisPendingStore``."""

    _link: RedisLink
    _keys: RedisKeys
    _retention: float
    _append_script: AsyncScript

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to the audit stream and to its question's own stream (one
        script: the question's stream keeps living as long as its record)."""
        request_id, keys = event.request_id, self._keys
        trail = [keys.audit, keys.events(request_id), keys.record(request_id), keys.audit_head]
        args: list[str | int] = [px(self._retention)]
        await self._chained("append an audit event", self._append_script, trail, args, event)

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        trail = self._keys.events(request_id)
        entries = await self._link.op("read a trail", lambda: self._link.client.xrange(trail))
        return [AuditEvent.load(fields["e"]) for _, fields in cast(Entries, entries)]

    async def _pages(self, low: str, high: str) -> AsyncIterator[Entries]:
        """The audit stream's entries from ``low`` to ``high``, a page at a time."""
        while True:
            read = partial(self._link.client.xrange, self._keys.audit, low, high, PAGE)
            entries = cast(Entries, await self._link.op("read the audit stream", read))
            yield entries
            if len(entries) < PAGE:
                return
            low = f"({entries[-1][0]}"

    async def check_chain(self, kept_since: float) -> ChainCheck | None:
        """The breaks of the hash chain, the audit stream read in pages."""
        rows = [_row(*entry) async for page in self._pages("-", "+") for entry in page]
        pipe = self._link.client.pipeline(transaction=False)  # (its execute resets it)
        pipe.get(self._keys.audit_head)
        pipe.hgetall(self._keys.audit_purged)
        head_raw, purged = await self._link.op("read the chain", pipe.execute)
        head = None
        if head_raw is not None:
            seq, _, digest = cast(str, head_raw).partition(" ")
            head = (int(seq), digest)
        gone: dict[int, tuple[float, str]] = {}
        for seq_raw, value in cast(dict[str, str], purged).items():
            at, _, digest = value.partition(" ")
            gone[int(seq_raw)] = (float(at), digest)
        return verify(rows, head, gone, kept_since)

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages)."""
        low = f"{max(0, int((since - 60) * 1000))}"
        high = "+" if until is None else f"{int((until + 60) * 1000)}"
        async for page in self._pages(low, high):
            for _, fields in page:
                event = AuditEvent.load(fields["e"])
                if event.at >= since and (until is None or event.at < until):
                    yield event

    async def _chained(
        self,
        what: str,
        script: AsyncScript,
        keys: list[str],
        args: list[str | int],
        event: AuditEvent | None,
    ) -> object:
        """Run ``script`` with ``event`` and its chain after ``args``, again while it answers
        ``[-1, head, question's last chained hash]`` (another writer appended), ``CHAIN_TRIES``
        times at most."""

        async def run(chain: list[str | int]) -> object:
            return await self._link.op(what, partial(script, keys=keys, args=args + chain))

        if event is None:
            return await run(["", "", "", "", "", ""])
        link, line, trail = self._link, event.dump(), self._keys.events(event.request_id)

        async def read() -> list[object]:
            async with link.client.pipeline(transaction=False) as pipe:
                pipe.get(self._keys.audit_head)
                pipe.xrevrange(trail, count=1)  # a guess: the script reads past unchained ones
                head, newest = await pipe.execute()
            hashes = (fields["h"] for _, fields in cast(Entries, newest) if "h" in fields)
            return [-1, head or "", next(hashes, "")]

        async with link.chain_lock:
            found = await link.op("read the audit chain", read)
            for _ in range(CHAIN_TRIES):
                want, qprev = cast(str, found[1]), cast(str, found[2])
                seq, _, prev = want.partition(" ")
                digest = chain_hash(prev, qprev, line)
                answer = await run([line, int(seq or 0) + 1, prev, qprev, digest, want])
                if not isinstance(answer, list):
                    return answer
                found = answer
        raise UserQuestionError(
            "the pending store (Redis) could not append an audit event: other processes moved"
            f" the chain's head before each of {CHAIN_TRIES} tries (nothing was written)",
            STORE_UNAVAILABLE,
        )


class RedisPendingStore(RedisTrail, DurableStore):
    """A ``PendingStore`` in Redis, shared by every bot process that can receive a click."""

    _upkeep: RedisUpkeep

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "uq",
        process_id: str | None = None,
        finished_ttl: float = RETENTION,
        heartbeat_interval: float = 2.0,
        heartbeat_ttl: float = 6.0,
        op_timeout: float = 5.0,
        outage_limit: float = 30.0,
        max_connections: int = 64,
        logger: logging.Logger | None = None,
    ) -> None:
        if not prefix or min(finished_ttl, op_timeout) <= 0:
            raise ValueError("prefix must not be empty, finished_ttl and op_timeout positive")
        self._keys = keys = RedisKeys(prefix, process_id or default_process_id())
        self._log = logger or logging.getLogger("adapters.slack.stores.redis")
        self._link = link = RedisLink(
            url, keys, op_timeout=op_timeout, max_connections=max_connections, log=self._log
        )
        self._process_id = keys.process_id
        self._retention = finished_ttl
        register = link.client.register_script
        self._write_script = register(WRITE)
        self._append_script = register(APPEND)
        self._indexed_script = register(INDEXED)
        self._count_script = register(OPEN_COUNT)
        self._audiences_script = register(AUDIENCES)
        self._upkeep = RedisUpkeep(
            link,
            self,
            retention=finished_ttl,
            heartbeat_interval=heartbeat_interval,
            heartbeat_ttl=heartbeat_ttl,
            outage_limit=outage_limit,
        )
        self._watches = self._upkeep.watches
        self._started = False

    @property
    def prefix(self) -> str:
        """The prefix of every key and channel this store uses."""
        return self._keys.prefix

    @property
    def link(self) -> RedisLink:
        """This store's connection, for state kept beside it (App Home's viewers)."""
        return self._link

    async def start(self) -> None:
        """``StoreUnavailable`` when Redis cannot be reached."""
        if self._link.closed:
            raise RuntimeError("a closed RedisPendingStore cannot be started again")
        if self._started:
            return
        await self._reach(self._upkeep.beat, self._upkeep.subscribe)
        self._started = True
        shown = (self._link.shown_url, self.prefix, self.process_id)
        self._log.info("pending store connected to Redis at %s (prefix %s, process %s)", *shown)
        try:
            await self._upkeep.first_purge()
        except UserQuestionError as exc:  # tried again in an hour (``Upkeep.loops``)
            self._log.warning("pending store could not purge the audit stream: %s", exc)
        self._upkeep.loops("redis", lambda: self._link.closed, subscriber=self._upkeep.listen())

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[TrailReader]:
        """The audit trail, connected for reading only (instead of ``start()``)."""
        if self._started or self._link.closed:
            raise RuntimeError("reading() is instead of start(): this store is started or closed")
        await self._reach()
        try:
            yield self
        finally:
            self._link.closed = True
            await self._release()

    async def _reach(self, *then: Callable[[], Awaitable[None]]) -> None:
        """Ping Redis, then run ``then``, within ``op_timeout``; when it cannot be reached,
        release the connections and raise ``StoreUnavailable``."""
        try:
            async with asyncio.timeout(self._link.op_timeout):
                await self._link.client.ping()
                for step in then:
                    await step()
        except FAILURES as exc:
            await self._release()
            reraise_cancellation(exc)
            raise self._link.unavailable(exc) from exc
        self._link.mark_ok()

    async def close(self) -> None:
        if self._link.closed:
            return
        self._link.closed = True  # the loops also check this, should a cancellation get lost
        await self._upkeep.stop(patience=self._link.op_timeout)
        self._watches.close(closed_error())  # (the subscriber has stopped: nothing is retried)
        if self._started:
            try:
                async with asyncio.timeout(self._link.op_timeout):
                    await self._link.client.delete(self._keys.my_alive)
            except FAILURES as exc:
                self._log.warning(
                    "pending store could not delete its heartbeat: %s", self._link.scrub(str(exc))
                )
        await self._release()
        self._log.info("pending store closed (process %s)", self.process_id)

    async def _release(self) -> None:
        await self._upkeep.unsubscribe()
        await self._link.client.aclose(close_connection_pool=True)

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
        """Run the write script (``version`` ``''``: a create) with ``event`` and its chain."""
        keys = self._keys.of_record(record)
        args: list[str | int] = [record.dump(), record.id, version, record.state]
        args += [px(self._retention), self._keys.owner_prefix, self._keys.done]
        args += [self._new_token(), record.owner or "", dump_audience(record)]
        return bool(await self._chained(what, self._write_script, keys, args, event))

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        index = self._keys.open if owner is None else self._keys.owner(owner)
        listed = partial(self._indexed_script, keys=[index], args=[self._keys.record_prefix])
        raws = await self._link.op("list open records", listed)
        records: list[PendingRecord] = []
        for raw in cast(list[str], raws):
            try:  # fields this version does not know are only ignored: ``PendingRecord.load``
                record = PendingRecord.load(raw, of="in the open index")
            except UserQuestionError as exc:  # a record it cannot read at all is left out
                self._log.error("%s", exc.message)
                continue
            if record.is_open and (owner is None or record.owner == owner):
                records.append(record)
        return records

    async def open_audiences(self) -> list[Audience]:
        """Who may answer each open question, from ``p:audiences`` (no record is read but
        those stored before it was kept: read once, and their entries added)."""
        keys = [self._keys.open, self._keys.audiences]
        listed = partial(self._audiences_script, keys=keys, args=[self._keys.record_prefix])
        found, missing = await self._link.op("list audiences", listed)
        lines = cast(str, found)
        audiences: list[Audience] = []
        async for batch in batches(lines.split("\n") if lines else []):  # not all at once
            audiences.extend(load_audience(line) for line in batch)
        ids = cast(list[str], missing)  # read in one MGET
        stored = zip(ids, await self.get_many(ids), strict=True)
        earlier = {i: line for i, record in stored if record and (line := dump_audience(record))}
        audiences.extend(load_audience(f"{i}\t{line}") for i, line in earlier.items())
        if earlier:  # (``HSETNX``: a write since is newer)
            pipe = self._link.client.pipeline(transaction=False)
            for request_id, kept in earlier.items():
                pipe.hsetnx(self._keys.audiences, request_id, kept)
            await self._link.op("keep audiences", pipe.execute)
        return audiences

    async def open_count(self) -> OpenCount:
        keys = [self._keys.open, self._keys.owners, self._keys.owner(self._keys.process_id)]
        args = [self._keys.owner_prefix, self._keys.record_prefix]
        count = partial(self._count_script, keys=keys, args=args)
        total, mine, unowned = await self._link.op("count open records", count)
        return OpenCount(int(total), int(mine), int(unowned))

    def __repr__(self) -> str:
        return (
            f"RedisPendingStore({self._link.shown_url!r}, prefix={self.prefix!r},"
            f" process_id={self.process_id!r})"
        )


def _row(entry_id: str, fields: dict[str, str]) -> ChainRow:
    """The chain fields of one audit stream entry (none: appended before the chain)."""
    event = AuditEvent.load(fields["e"])
    seq, prev, qprev = int(fields.get("n", 0)), fields.get("p") or None, fields.get("q") or None
    return ChainRow(seq, event.request_id, event.at, fields["e"], prev, qprev, fields.get("h"))
