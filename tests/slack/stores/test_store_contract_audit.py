"""The store contract, audit part: a record's change and its event are one write.

Over memory, SQLite and Redis: a change and its event are both kept or neither, the event
is readable as soon as the write returns (and before a waiter woken by an ending runs), a
write that loses keeps no event. Then faults injected into the real stores: SQLite's event
insert failing rolls the change back; a Redis script that cannot append writes nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent, asked_event, event_for
from adapters.slack.model.record import PendingRecord, State
from adapters.slack.stores import PendingStore, SqlitePendingStore, mutate
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionItem
from tests.conftest import RedisStoreFactory, SqliteStoreFactory


def make_record(owner: str | None) -> PendingRecord:
    """A fresh pending record with one question."""
    return PendingRecord(
        id=f"r-{uuid.uuid4().hex[:12]}",
        owner=owner,
        questions=[AskUserQuestionItem(id="q1", question="Ship it?")],
        channel="C0123456",
    )


def ended(record: PendingRecord, state: State = "answered") -> PendingRecord:
    """The next version of ``record``, terminal, answered by a person."""
    return record.next(
        state=state, finished_at=time.time(), answered_by="U1", answered_by_name="alice"
    )


def ending(record: PendingRecord) -> tuple[PendingRecord, AuditEvent]:
    """``record`` ended, and the event of that write."""
    done = ended(record)
    event = event_for(record, done)
    assert event is not None
    return done, event


@pytest.fixture
async def second_sqlite_store(sqlite_store_factory: SqliteStoreFactory) -> SqlitePendingStore:
    """Another process on ``sqlite_store``'s file."""
    return await sqlite_store_factory()


@pytest.fixture
async def second_redis_store(redis_store_factory: RedisStoreFactory) -> RedisPendingStore:
    """Another process on ``redis_store``'s prefix."""
    return await redis_store_factory()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def two_views(request: pytest.FixtureRequest) -> tuple[PendingStore, PendingStore]:
    """Two views of one store: the memory store twice, two SQLite or two Redis processes."""
    if request.param == "memory":
        memory: PendingStore = request.getfixturevalue("memory_store")
        return memory, memory
    one: PendingStore = request.getfixturevalue(f"{request.param}_store")
    two: PendingStore = request.getfixturevalue(f"second_{request.param}_store")
    return one, two


# -- every store --------------------------------------------------------------------------


async def test_the_event_is_there_as_soon_as_the_write_returns(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        asked = asked_event(record, by="api:alpha", link=None)
        assert await store.create(record, asked)
        assert await store.events(record.id) == [asked]
        done, answered = ending(record)
        assert await store.compare_and_set(done, answered)
        assert await store.events(record.id) == [asked, answered]
        assert [e.request_id async for e in store.audit(time.time() - 60)] == [record.id] * 2


async def test_a_trail_read_is_a_copy_that_cannot_change_the_store(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        asked = asked_event(record, by="api:alpha", link=None)
        kept = asked.dump()
        assert await store.create(record, asked)
        asked.detail["channel"] = "C-changed-after"  # an event is frozen, its detail a dict
        (read,) = await store.events(record.id)
        read.detail["channel"] = "C-forged"
        exported = [e async for e in store.audit(time.time() - 60)]
        exported[0].detail.clear()
        assert [e.dump() for e in await store.events(record.id)] == [kept]
        assert [e.dump() async for e in store.audit(time.time() - 60)] == [kept]


async def test_a_write_that_loses_keeps_no_event(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        assert await store.create(record)
        clash = make_record(store.process_id).model_copy(update={"id": record.id})
        assert not await store.create(clash, asked_event(clash, by="api", link=None))
        stale, stale_event = ending(record.next(label="x"))  # two versions ahead
        assert not await store.compare_and_set(stale, stale_event)
        done, answered = ending(record)
        assert await store.compare_and_set(done, answered)
        assert not await store.compare_and_set(done, answered)  # the race lost: same version
        other = done.model_copy(update={"version": done.version + 1, "state": "cancelled"})
        other_event = event_for(done, other)
        assert not await store.compare_and_set(other, other_event)  # an ending is final
        assert await store.events(record.id) == [answered]
        assert await store.get(record.id) == done


async def test_mutate_writes_the_event_it_computed_with_the_change(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        assert await store.create(record)
        placed = asked_event(record, by="api", link="https://t.slack.com/archives/C1/p1")
        seen, written = await mutate(
            store,
            record.id,
            lambda r: r.next(message_ts="1.000100"),
            event=lambda before, after: placed.model_copy(update={"version": after.version}),
        )
        assert seen == record and written is not None
        assert [(e.kind, e.version) for e in await store.events(record.id)] == [
            ("asked", written.version)
        ]
        _, bookkeeping = await mutate(store, record.id, lambda r: r.next(label="relabelled"))
        assert bookkeeping is not None and len(await store.events(record.id)) == 1
        _, done = await mutate(store, record.id, ended, by="U1", by_name="alice")
        assert done is not None
        trail = await store.events(record.id)
        assert [(e.kind, e.by, e.version) for e in trail[1:]] == [("answered", "U1", done.version)]


@pytest.mark.slow
async def test_a_waiter_woken_by_an_ending_finds_its_event(
    two_views: tuple[PendingStore, PendingStore],
) -> None:
    """The long-poll case: a watch in another process wakes on the ending; its event is
    readable by then (nothing appended after the wake-up)."""
    writer, reader = two_views
    async with asyncio.timeout(10):
        record = make_record(None)
        assert await writer.create(record)
        watch = reader.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0)
            _, done = await mutate(writer, record.id, ended)
            woken = await waiting
            trail = await reader.events(record.id)
        finally:
            watch.close()
        assert done is not None and woken.version == done.version
        assert [(e.kind, e.version) for e in trail] == [("answered", done.version)]


# -- SQLite: the event's insert fails -----------------------------------------------------


def _refuse_events(path: Path, refuse: bool) -> None:
    """Make every insert into the events table fail (another connection on the file)."""
    with sqlite3.connect(path) as db:
        if refuse:
            db.execute(
                "CREATE TRIGGER refuse_events BEFORE INSERT ON events"
                " BEGIN SELECT RAISE(ABORT, 'injected: the trail is full'); END"
            )
        else:
            db.execute("DROP TRIGGER refuse_events")
    db.close()


async def test_sqlite_a_failing_event_insert_rolls_the_change_back(
    sqlite_store: SqlitePendingStore, sqlite_path: Path
) -> None:
    async with asyncio.timeout(10):
        record = make_record(sqlite_store.process_id)
        assert await sqlite_store.create(record)
        watch = sqlite_store.watch(record.id)
        _refuse_events(sqlite_path, True)
        try:
            with pytest.raises(UserQuestionError) as info:
                await mutate(sqlite_store, record.id, ended)
            assert info.value.code == STORE_UNAVAILABLE and "injected" in info.value.message
            assert await sqlite_store.get(record.id) == record  # the change is not kept
            fresh = make_record(None)
            with pytest.raises(UserQuestionError):
                await sqlite_store.create(fresh, asked_event(fresh, by="api", link=None))
            assert await sqlite_store.get(fresh.id) is None
            assert await sqlite_store.events(record.id) == []
            assert [r.id for r in await sqlite_store.open_records()] == [record.id]
            # nothing is left half-done: the connection writes again at once
            assert await sqlite_store.compare_and_set(record.next(label="bookkeeping"))
        finally:
            _refuse_events(sqlite_path, False)
        _, done = await mutate(sqlite_store, record.id, ended)
        assert done is not None and (await watch.wait()).state == "answered"
        watch.close()
        assert [e.kind for e in await sqlite_store.events(record.id)] == ["answered"]


async def test_sqlite_writes_in_flight_together_keep_each_its_event(
    sqlite_store: SqlitePendingStore,
) -> None:
    """Concurrent writes on one connection: none lands inside another's transaction."""
    async with asyncio.timeout(20):
        records = [make_record(sqlite_store.process_id) for _ in range(40)]
        made = await asyncio.gather(
            *(sqlite_store.create(r, asked_event(r, by="api", link=None)) for r in records)
        )
        assert all(made)
        results = await asyncio.gather(*(mutate(sqlite_store, r.id, ended) for r in records))
        assert all(written is not None for _, written in results)
        for record in records:
            assert [e.kind for e in await sqlite_store.events(record.id)] == ["asked", "answered"]


# -- Redis: the script cannot append ------------------------------------------------------


async def test_redis_a_script_that_cannot_append_its_event_writes_nothing(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    writer: RedisPendingStore = await redis_store_factory()
    reader: RedisPendingStore = await redis_store_factory()
    async with asyncio.timeout(10):
        record = make_record(None)
        assert await writer.create(record)
        watch = reader.watch(record.id)
        trail = f"{store_prefix}:events:{record.id}"
        fresh = make_record(None)
        trails = (trail, f"{store_prefix}:events:{fresh.id}")
        for broken in (trails, (f"{store_prefix}:audit",)):
            for key in broken:
                await redis_admin.set(key, "not a stream")
            with pytest.raises(UserQuestionError) as info:
                await mutate(writer, record.id, ended)
            assert info.value.code == STORE_UNAVAILABLE and "WRONGTYPE" in info.value.message
            with pytest.raises(UserQuestionError):
                await writer.create(fresh, asked_event(fresh, by="api", link=None))
            await redis_admin.delete(*broken)
            assert await reader.get(record.id) == record
            assert await reader.get(fresh.id) is None
            assert await redis_admin.sismember(f"{store_prefix}:open", record.id)
            assert await redis_admin.exists(f"{store_prefix}:audit", *trails) == 0
        _, done = await mutate(writer, record.id, ended)
        assert done is not None and (await watch.wait()).version == done.version
        watch.close()
        assert [e.kind for e in await reader.events(record.id)] == ["answered"]
        assert await redis_admin.xlen(f"{store_prefix}:audit") == 1
        left = 90 * 86400 * 1000 - await redis_admin.pttl(trail)  # the retention, from
        assert 0 <= left < 2_000  # the ending just written (a shorter TTL is a defect)


async def test_redis_a_retried_write_appends_its_event_once(
    redis_store: RedisPendingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py retries a script whose reply was lost: the event is not appended twice."""
    async with asyncio.timeout(10):
        record = make_record(redis_store.process_id)
        asked = asked_event(record, by="api", link=None)
        monkeypatch.setattr(redis_store, "_new_token", lambda: "create-1")
        assert await redis_store.create(record, asked)
        assert await redis_store.create(record, asked)  # the retry of that create
        done, answered = ending(record)
        monkeypatch.setattr(redis_store, "_new_token", lambda: "write-1")
        assert await redis_store.compare_and_set(done, answered)
        assert await redis_store.compare_and_set(done, answered)  # the retry of that write
        assert await redis_store.events(record.id) == [asked, answered]
