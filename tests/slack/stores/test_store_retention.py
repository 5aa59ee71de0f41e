"""Retention: a question's record and its audit trail, kept while it is pending and
``retention`` after it ends, then both gone, on every store; ``open_store`` passes
``RETENTION_DAYS`` to each.

Memory and SQLite are aged through time: the memory store's clock moved ahead (as
test_store_memory does), SQLite's ``purge(now)``. Redis ages on its own clock: the TTLs are
read (PTTL, exact to the script that set them) and a store with a one-second retention
shows what expires and what the audit stream's purge removes.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent, asked_event, event_for
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.stores import MemoryPendingStore, PendingStore, SqlitePendingStore, mutate
from adapters.slack.stores import memory as memory_module
from adapters.slack.stores.redis import RedisPendingStore
from bot.app.storage import open_store
from bot.settings.config import Settings
from tests.conftest import TEST_REDIS_URL, RedisStoreFactory, SqliteStoreFactory
from tests.e2e.test_multiprocess import eventually
from tests.slack.stores.test_store_contract import make_record
from tests.slack.stores.test_store_sqlite_audit_plan import plan, statements
from tests.sqlite_tools import store_connect

RETENTION = 3600.0
"""The retention of the stores these tests make (an hour)."""
DAY = 86400.0


class MovedClock:
    """Stands in for the ``time`` module inside memory.py: real time, moved ``ahead``."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def time(self) -> float:
        return time.time() + self.ahead


@dataclass
class Aged:
    """A store that can be made to act as if time had moved on (memory or SQLite)."""

    store: PendingStore
    clock: MovedClock | None  # the memory store's; None: SQLite, aged by ``purge(now)``
    ahead: float = 0.0

    def now(self) -> float:
        """The store's idea of the wall time."""
        return time.time() + self.ahead

    async def move_to(self, moment: float) -> None:
        """Act as if it were ``moment`` now: the memory store's clock is moved there (its
        next read drops what expired), SQLite purges as of then."""
        self.ahead = moment - time.time()
        if self.clock is not None:
            self.clock.ahead = self.ahead
        else:
            assert isinstance(self.store, SqlitePendingStore)
            await self.store.purge(moment)


@pytest.fixture(params=["memory", "sqlite"])
async def aged(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    sqlite_store_factory: SqliteStoreFactory,
) -> AsyncIterator[Aged]:
    """A memory or SQLite store keeping finished questions ``RETENTION``, and its clock."""
    if request.param == "sqlite":
        yield Aged(await sqlite_store_factory(retention=RETENTION), None)
        return
    clock = MovedClock()
    monkeypatch.setattr(memory_module, "time", clock)
    store = MemoryPendingStore(process_id="memory-retention", finished_ttl=RETENTION)
    await store.start()
    try:
        yield Aged(store, clock)
    finally:
        await store.close()


async def exported(store: PendingStore, request_id: str) -> list[AuditEvent]:
    """The events of ``request_id`` in the whole audit export (``audit`` from 0)."""
    return [event async for event in store.audit(0) if event.request_id == request_id]


async def asked_at(store: PendingStore, at: float) -> tuple[PendingRecord, AuditEvent]:
    """A new pending question, created with its ``asked`` event at ``at``."""
    record = make_record(store.process_id)
    asked = asked_event(record, by="api", link=None, at=at)
    assert await store.create(record, asked)
    return record, asked


async def end_at(
    store: PendingStore, record: PendingRecord, at: float
) -> tuple[PendingRecord, AuditEvent]:
    """``record`` answered at ``at``, with its event."""
    done = record.next(state="answered", answered_by="U1", finished_at=at)
    answered = event_for(record, done, by="U1", at=at)
    assert answered is not None
    assert await store.compare_and_set(done, answered)
    return done, answered


async def gone_at_the_edge(aged: Aged, done: PendingRecord, trail: list[AuditEvent]) -> None:
    """``done`` and its whole ``trail`` are kept a second before the retention after its
    end, and gone, the trail first, a second past it."""
    store = aged.store
    assert done.finished_at is not None
    await aged.move_to(done.finished_at + RETENTION - 1)  # a second before the edge
    assert await store.events(done.id) == trail
    assert await exported(store, done.id) == trail
    assert await store.get(done.id) == done
    await aged.move_to(done.finished_at + RETENTION + 1)  # a second past it
    assert await store.events(done.id) == []  # the trail first: no read before it
    assert await exported(store, done.id) == []
    assert await store.get(done.id) is None


# -- memory and SQLite --------------------------------------------------------------------


async def test_a_finished_question_and_its_trail_go_the_retention_after_it_ended(
    aged: Aged,
) -> None:
    store = aged.store
    async with asyncio.timeout(10):
        record, asked = await asked_at(store, aged.now())
        done, answered = await end_at(store, record, aged.now())
        await gone_at_the_edge(aged, done, [asked, answered])


async def test_a_record_created_ended_goes_the_retention_after_its_end(aged: Aged) -> None:
    """A record stored already ended (a lost record put back as failed is one) expires as
    one that ended by a write does: it was kept for good in the memory store."""
    store = aged.store
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        tomb = record.next(state="failed", error_code="RECORD_LOST", finished_at=aged.now())
        assert tomb.finished_at is not None
        assert await store.create(tomb, event_for(record, tomb, at=aged.now()))
        await aged.move_to(tomb.finished_at + RETENTION - 1)
        assert await store.get(record.id) == tomb
        await aged.move_to(tomb.finished_at + RETENTION + 1)
        assert await store.get(record.id) is None
        assert await store.events(record.id) == []


async def test_a_pending_question_keeps_its_record_and_whole_trail_however_old(
    aged: Aged,
) -> None:
    store = aged.store
    async with asyncio.timeout(10):
        record, asked = await asked_at(store, aged.now())
        changed_at = aged.now()
        _, saved = await mutate(
            store,
            record.id,
            lambda r: r.next(drafts=[Draft(selected=[0])]),
            event=lambda before, after: event_for(before, after, by="U1", at=changed_at),
        )
        assert saved is not None
        trail = await store.events(record.id)
        assert [e.kind for e in trail] == ["asked", "changed"]
        await aged.move_to(asked.at + 10 * RETENTION)
        assert await store.events(record.id) == trail
        assert await exported(store, record.id) == trail
        assert await store.get(record.id) == saved
        assert [r.id for r in await store.open_records()] == [record.id]


async def test_an_ended_long_pending_question_keeps_its_trail_the_retention_after_its_end(
    aged: Aged,
) -> None:
    """The retention clock of a trail starts when its question ends, not at its events."""
    store = aged.store
    async with asyncio.timeout(10):
        record, asked = await asked_at(store, aged.now())
        await aged.move_to(asked.at + 2 * RETENTION)
        assert await store.events(record.id) == [asked]
        done, answered = await end_at(store, record, aged.now())
        await gone_at_the_edge(aged, done, [asked, answered])


# -- SQLite -------------------------------------------------------------------------------


async def test_sqlite_events_of_no_record_go_by_their_age(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    async with asyncio.timeout(10):
        store = await sqlite_store_factory(retention=RETENTION)
        stray = asked_event(make_record(store.process_id), by="api", link=None)
        await store.append_event(stray)  # a question the store has no record of
        await store.purge(stray.at + RETENTION - 1)
        assert await store.events(stray.request_id) == [stray]
        await store.purge(stray.at + RETENTION + 1)
        assert await store.events(stray.request_id) == []


async def test_sqlite_a_record_row_with_a_null_id_does_not_keep_old_stray_events(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    """Guards the trail purge's ``NOT EXISTS``: with ``NOT IN (SELECT id FROM records)``, one
    ``records`` row whose id is NULL (a rowid table's TEXT primary key allows it: a hand
    edit, an old tool) made the ``NOT IN`` unknown for every event, so no event of a
    question without a record was ever purged again."""
    async with asyncio.timeout(10):
        store = await sqlite_store_factory(retention=RETENTION)
        with store_connect(sqlite_path) as db:  # pending: the records' purge keeps it
            db.execute(
                "INSERT INTO records (id, version, state, json) VALUES (NULL, 1, 'pending', '{}')"
            )
        db.close()
        stray = asked_event(make_record(store.process_id), by="api", link=None)
        await store.append_event(stray)  # a question the store has no record of
        await store.purge(stray.at + RETENTION + 1)
        assert await store.events(stray.request_id) == []
        with store_connect(sqlite_path) as db:  # (the row was there all along)
            assert db.execute("SELECT count(*) FROM records WHERE id IS NULL").fetchone() == (1,)
        db.close()


async def test_sqlite_the_trail_purge_searches_events_by_age_and_records_by_id(
    sqlite_store_factory: SqliteStoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hourly purge reads no table whole: events by ``events_at``, each one's record
    looked up by its primary key (SQLite's plan of the statement the purge runs)."""
    store = await sqlite_store_factory()
    seen = statements(monkeypatch)
    await store.purge()
    ((sql, params),) = [(s, p) for s, p in seen if s.startswith("DELETE FROM events")]
    steps = plan(store.path, sql, params)
    assert any(step.startswith("SEARCH events USING INDEX events_at") for step in steps), steps
    assert any("INDEX sqlite_autoindex_records_1" in step for step in steps), steps
    assert not any(step.startswith("SCAN") for step in steps), steps


@pytest.mark.slow
async def test_sqlite_a_big_purge_lets_other_statements_through_between_batches(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    """The purge deletes a batch at a time: a statement queued while it runs (the heartbeat,
    a click that found the file busy) waits for one batch, not for every old record. One
    DELETE of all of them held the connection, and the heartbeat behind it, for as long."""
    store = await sqlite_store_factory(retention=RETENTION)
    async with asyncio.timeout(60):
        ended_at = time.time() - RETENTION - 60
        for _ in range(2_000):
            record, _asked = await asked_at(store, ended_at)
            await end_at(store, record, ended_at)
        purging = asyncio.ensure_future(store.purge())
        await asyncio.sleep(0)  # its first statement is queued
        ((left,),) = await store._file.rows("SELECT count(*) FROM records WHERE state != 'pending'")
        assert await purging == 2_000
        assert 0 < left < 2_000  # it ran between two batches
        assert await store._file.rows("SELECT count(*) FROM records") == [(0,)]
        assert await store._file.rows("SELECT count(*) FROM events") == [(0,)]


# -- Redis --------------------------------------------------------------------------------


async def _pttls(redis_admin: aioredis.Redis, prefix: str, request_id: str) -> tuple[int, int]:
    """The PTTL of a record and of its trail (-1: no TTL, -2: gone)."""
    record = await redis_admin.pttl(f"{prefix}:req:{request_id}")
    trail = await redis_admin.pttl(f"{prefix}:events:{request_id}")
    return int(record), int(trail)


async def test_redis_a_trail_has_no_ttl_while_pending_and_its_records_once_ended(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis
) -> None:
    async with asyncio.timeout(10):
        store = await redis_store_factory(finished_ttl=RETENTION)
        kept = int(RETENTION * 1000)
        record, _ = await asked_at(store, time.time())
        assert await _pttls(redis_admin, store.prefix, record.id) == (-1, -1)
        await store.append_event(asked_event(record, by="api", link=None))  # no write
        assert await _pttls(redis_admin, store.prefix, record.id) == (-1, -1)
        _, saved = await mutate(store, record.id, lambda r: r.next(drafts=[Draft(selected=[0])]))
        assert saved is not None
        assert await _pttls(redis_admin, store.prefix, record.id) == (-1, -1)

        done, _ = await end_at(store, saved, time.time())
        on_record, on_trail = await _pttls(redis_admin, store.prefix, record.id)
        assert kept - 1000 < on_trail <= kept and kept - 1000 < on_record <= kept
        assert abs(on_trail - on_record) < 100  # one deadline, set by one script
        # an event after the ending (an asked event appended late) keeps that deadline
        await asyncio.sleep(0.2)
        await store.append_event(asked_event(record, by="api", link=None))
        annotated = done.next(message_ts="1.2")
        assert await store.compare_and_set(annotated)  # bookkeeping: no event
        on_record, on_trail = await _pttls(redis_admin, store.prefix, record.id)
        assert on_trail <= on_record + 100 and on_record < kept - 100

        reopened = annotated.next(state="pending", finished_at=None)
        assert await store.compare_and_set(reopened, event_for(annotated, reopened))
        assert await _pttls(redis_admin, store.prefix, record.id) == (-1, -1)
        trail = [e.kind for e in await store.events(record.id)]
        assert trail == ["asked", "asked", "changed", "answered", "asked", "reopened"]


@pytest.mark.slow
async def test_redis_the_export_keeps_a_pending_questions_events_and_drops_a_gone_ones(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis
) -> None:
    """One-second retention, real time: a finished question's record and trail expire
    together and the audit stream's purge drops its entries (those older than the
    retention only); a pending question older than that keeps all three until it ended
    the retention ago."""
    short = 1.0
    async with asyncio.timeout(30):
        store = await redis_store_factory(finished_ttl=short)
        p = store.prefix
        pending, pending_asked = await asked_at(store, time.time())
        gone, gone_asked = await asked_at(store, time.time())
        _, gone_answered = await end_at(store, gone, time.time())
        assert await exported(store, gone.id) == [gone_asked, gone_answered]

        async def expired() -> bool:
            return await redis_admin.exists(f"{p}:req:{gone.id}", f"{p}:events:{gone.id}") == 0

        await eventually(expired, within=10, what="the finished question to expire")
        await asyncio.sleep(short)  # every event above is older than the retention now
        assert await _pttls(redis_admin, p, pending.id) == (-1, -1)
        assert await store.events(pending.id) == [pending_asked]

        entries = await redis_admin.xrange(f"{p}:audit")
        last_gone = max(int(i.split("-")[0]) for i, f in entries if gone.id in f["e"]) / 1000
        assert await store.purge(last_gone + short - 1) == 0  # not older than the retention
        assert await exported(store, gone.id) == [gone_asked, gone_answered]
        later = await redis_store_factory(finished_ttl=short)  # its start purges
        assert await exported(later, gone.id) == []
        assert await exported(later, pending.id) == [pending_asked]
        assert await later.events(pending.id) == [pending_asked]
        assert await later.purge() == 0

        _, pending_answered = await end_at(later, pending, time.time())
        assert await later.purge() == 0  # just ended: kept the retention
        assert await exported(later, pending.id) == [pending_asked, pending_answered]

        async def ended_expired() -> bool:
            keys = (f"{p}:req:{pending.id}", f"{p}:events:{pending.id}")
            return await redis_admin.exists(*keys) == 0

        await eventually(ended_expired, within=10, what="the ended question to expire")
        await asyncio.sleep(short)
        assert await later.purge() == 2
        assert await exported(later, pending.id) == []
        assert await redis_admin.xlen(f"{p}:audit") == 0


async def test_redis_a_starting_store_lifts_an_old_ttl_off_a_pending_questions_trail(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis
) -> None:
    """A trail given a TTL while pending (as the bot before this one did at every event)
    gets it lifted when a store starts, so it cannot expire under its open question."""
    async with asyncio.timeout(10):
        earlier = await redis_store_factory()
        record, asked = await asked_at(earlier, time.time())
        trail = f"{earlier.prefix}:events:{record.id}"
        await redis_admin.pexpire(trail, 60_000)
        later = await redis_store_factory()
        assert await redis_admin.pttl(trail) == -1
        assert await later.events(record.id) == [asked]


# -- open_store: RETENTION_DAYS reaches every store ---------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
async def test_open_store_keeps_finished_questions_retention_days(
    kind: str,
    tmp_path: Path,
    store_prefix: str,
    redis_admin: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RETENTION_DAYS=1: a question finished a day and a second ago is purged, one
    finished a day less a second ago is kept."""
    clock = MovedClock()
    monkeypatch.setattr(memory_module, "time", clock)
    settings = Settings(
        mode="sandbox",
        store=kind,
        retention_days=1,
        store_path=str(tmp_path / "questions.db"),
        redis_url=TEST_REDIS_URL if kind == "redis" else None,
        redis_prefix=store_prefix,
    )
    store = await open_store(settings)
    try:
        async with asyncio.timeout(10):
            now = time.time()
            older, _ = await asked_at(store, now)
            newer, newer_asked = await asked_at(store, now)
            await end_at(store, older, now)
            if kind == "redis":  # Redis ages on its own clock: the TTL it was given
                for left in await _pttls(redis_admin, store_prefix, older.id):
                    assert DAY * 1000 - 1000 < left <= DAY * 1000
                return
            clock.ahead = 2.0  # (the memory store counts from the write)
            _, newer_answered = await end_at(store, newer, now + 2)
            clock.ahead = DAY + 1
            if isinstance(store, SqlitePendingStore):
                await store.purge(now + DAY + 1)
            assert await store.events(older.id) == []  # ended a day and a second ago
            assert await store.get(older.id) is None
            assert await store.events(newer.id) == [newer_asked, newer_answered]  # a day less
            assert await store.get(newer.id) is not None  # a second ago
    finally:
        await store.close()


# -- the hourly purge beside the heartbeat ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_slow_purge_never_holds_up_the_heartbeat(
    kind: str, tmp_path: Path, store_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hourly purge (here every 0.1 s, each taking 2 s) runs beside the heartbeat, not in
    it: a purge that took longer than the heartbeat's TTL let the beat lapse, and other
    processes would have failed this one's questions ``OWNER_LOST``."""
    from adapters.slack.stores import duties, redis_upkeep, sqlite_upkeep

    for module in (duties, sqlite_upkeep, redis_upkeep):  # wherever the interval is kept
        monkeypatch.setattr(module, "PURGE_EVERY", 0.1, raising=False)
        monkeypatch.setattr(module, "_PURGE_EVERY", 0.1, raising=False)
    store: SqlitePendingStore | RedisPendingStore = (
        SqlitePendingStore(tmp_path / "q.db", heartbeat_interval=0.05, heartbeat_ttl=1.0)
        if kind == "sqlite"
        else RedisPendingStore(
            TEST_REDIS_URL, prefix=store_prefix, heartbeat_interval=0.05, heartbeat_ttl=1.0
        )
    )
    upkeep = store._upkeep
    beats: list[float] = []
    purges: list[float] = []
    real_beat = upkeep.beat

    async def beat() -> None:
        beats.append(time.monotonic())
        await real_beat()

    async def slow_purge(now: float | None = None) -> int:
        purges.append(time.monotonic())
        await asyncio.sleep(2.0)
        return 0

    monkeypatch.setattr(upkeep, "beat", beat)
    monkeypatch.setattr(upkeep, "purge", slow_purge)
    async with asyncio.timeout(30):
        await store.start()  # (its purge at start, before the heartbeat runs, is slow too)
        try:
            started = time.monotonic()
            await asyncio.sleep(3.0)
            ended = time.monotonic()
        finally:
            await store.close()
    assert purges, "no purge ran"
    times = [started, *(b for b in beats if started <= b <= ended), ended]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert len(times) >= 12 and max(gaps) < 1.0, (len(times), max(gaps))
