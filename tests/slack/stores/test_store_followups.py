"""Follow-ups on the durable stores' background work: unreadable records, long sweeps, logs.

* SQLite: a waiter on a record this version cannot read (a state it does not know, stored by
  a newer version) ends with ``STORE_UNAVAILABLE``, as a Redis waiter does, and the other
  records ended in the same batch still reach their waiters; the poll does not fail every
  time it looks (it hung the waiter and blocked the batch).
* Redis: a sweep pass's time counts from its first record, so a lost process's backlog
  whose listing alone takes longer than a pass's time is still swept, some every pass (each
  pass stopped before writing anything: the sweep never progressed).
* A heartbeat failing while the store is unavailable is logged as one line with the
  store's message, at most once a minute (a traceback every beat flooded the log); an
  unexpected error keeps its traceback.

Real SQLite files and real Redis; the listing and the writes are wrapped to take longer.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, cast

import pytest

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import SqlitePendingStore
from adapters.slack.stores.duties import RepeatedFailures, Upkeep
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.errors import OWNER_LOST, STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionItem
from tests.conftest import TEST_REDIS_URL
from tests.sqlite_tools import store_connect

RedisStoreFactory = Callable[..., Awaitable[RedisPendingStore]]
SqliteStoreFactory = Callable[..., Awaitable[SqlitePendingStore]]

NewerState = Literal["pending", "answered", "cancelled", "aborted", "failed", "expired"]


class NewerStatesRecord(PendingRecord):
    """A newer version's record this version cannot read: a state it does not know."""

    state: NewerState = "pending"  # type: ignore[assignment]


def make_record(owner: str | None, *, first: str = "r") -> PendingRecord:
    """A pending record of ``owner``; its id begins with ``first`` (ids sort by it)."""
    return PendingRecord(
        id=f"{first}-{uuid.uuid4().hex[:12]}",
        owner=owner,
        questions=[AskUserQuestionItem(id="q1", question="Ship it?")],
        channel="C0123456",
    )


def expired_by_newer(record: PendingRecord) -> NewerStatesRecord:
    """``record`` ended by a newer version, in a state this one does not know."""
    ended = record.next(finished_at=time.time())
    return NewerStatesRecord(**ended.model_dump(exclude={"state"}), state="expired")


def answered(record: PendingRecord) -> PendingRecord:
    return record.next(state="answered", answered_by="U1", finished_at=time.time())


def written_by_another_connection(path: Path, *records: PendingRecord) -> None:
    """Update ``records`` in one transaction of a plain connection (another process, a
    newer version): the trigger puts an ending for each in the endings feed."""
    db = store_connect(path, timeout=10)
    try:
        with db:
            for record in records:
                db.execute(
                    "UPDATE records SET version = ?, state = ?, finished_at = ?, json = ?"
                    " WHERE id = ?",
                    (record.version, record.state, record.finished_at, record.dump(), record.id),
                )
    finally:
        db.close()


def put_back_by_another_connection(path: Path, record: PendingRecord) -> None:
    """Delete ``record`` and insert it again as given, in one transaction: an insert feeds
    no ending (a lost record put back ended by a newer version)."""
    db = store_connect(path, timeout=10)
    try:
        with db:
            db.execute("DELETE FROM records WHERE id = ?", (record.id,))
            db.execute(
                "INSERT INTO records (id, version, state, owner, finished_at, json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.version,
                    record.state,
                    record.owner,
                    record.finished_at,
                    record.dump(),
                ),
            )
    finally:
        db.close()


# -- 1. SQLite waiters on a record this version cannot read -----------------------------------


@pytest.mark.slow
async def test_sqlite_waiter_on_an_unreadable_ending_ends_and_the_batch_still_resolves(
    sqlite_store_factory: SqliteStoreFactory,
    sqlite_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two records end in one transaction of another connection: one in a state this
    version does not know (its id sorts first, so it is read first), one answered. The
    first one's waiter ends with ``STORE_UNAVAILABLE`` naming it; the second's wakes."""
    caplog.set_level(logging.INFO)
    async with asyncio.timeout(20):
        old = await sqlite_store_factory(process_id="old")
        new = await sqlite_store_factory(process_id="new")
        unreadable = make_record(old.process_id, first="a")
        readable = make_record(old.process_id, first="b")
        for record in (unreadable, readable):
            assert await new.create(record)
        watches = [old.watch(unreadable.id), old.watch(readable.id)]
        try:
            failing = asyncio.ensure_future(watches[0].wait())
            waking = asyncio.ensure_future(watches[1].wait())
            await asyncio.sleep(0.3)  # both begin waiting (and look once) before the endings
            assert not failing.done() and not waking.done()
            await asyncio.to_thread(
                written_by_another_connection,
                sqlite_path,
                expired_by_newer(unreadable),
                answered(readable),
            )
            async with asyncio.timeout(8):  # generous: the poll looks every 0.1 s
                with pytest.raises(UserQuestionError) as info:
                    await failing
                woke = await waking
        finally:
            for watch in watches:
                watch.close()
    assert info.value.code == STORE_UNAVAILABLE
    assert unreadable.id in info.value.message and "cannot read" in info.value.message
    assert (woke.id, woke.state, woke.answered_by) == (readable.id, "answered", "U1")
    assert old.watch_count == 0
    assert "pending store poll failed" not in caplog.text


@pytest.mark.slow
async def test_sqlite_waiter_on_an_unreadable_record_put_back_ended_ends(
    sqlite_store_factory: SqliteStoreFactory,
    sqlite_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A record put back ended by a newer version (deleted and inserted: no ending in the
    feed) is found by the look at the waited records every 2 s: its waiter ends with
    ``STORE_UNAVAILABLE`` (that look raised every 2 s), and an ending written after it
    still reaches its own waiter."""
    caplog.set_level(logging.INFO)
    async with asyncio.timeout(30):
        old = await sqlite_store_factory(process_id="old")
        new = await sqlite_store_factory(process_id="new")
        unreadable = make_record(old.process_id, first="a")
        later = make_record(old.process_id, first="b")
        for record in (unreadable, later):
            assert await new.create(record)
        watches = [old.watch(unreadable.id), old.watch(later.id)]
        try:
            failing = asyncio.ensure_future(watches[0].wait())
            waking = asyncio.ensure_future(watches[1].wait())
            await asyncio.sleep(0.3)
            assert not failing.done() and not waking.done()
            await asyncio.to_thread(
                put_back_by_another_connection, sqlite_path, expired_by_newer(unreadable)
            )
            async with asyncio.timeout(15):  # generous: the look runs every 2 s
                with pytest.raises(UserQuestionError) as info:
                    await failing
            assert await new.compare_and_set(answered(later))
            async with asyncio.timeout(8):
                woke = await waking
        finally:
            for watch in watches:
                watch.close()
    assert info.value.code == STORE_UNAVAILABLE
    assert unreadable.id in info.value.message
    assert woke.state == "answered"
    assert "pending store poll failed" not in caplog.text
    said = [r for r in caplog.records if unreadable.id in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]  # said once, not every 2 s


# -- 2. a Redis sweep whose listing alone outlasts a pass's time ------------------------------


@pytest.mark.slow
async def test_redis_sweep_progresses_every_pass_when_listing_outlasts_the_pass(
    redis_store_factory: RedisStoreFactory, store_prefix: str
) -> None:
    """A pass may write for 0.5 s (a third of the 1.5 s TTL); listing the lost process's
    records takes 0.8 s (wrapped), each write 0.05 s. Every pass that listed records writes
    some (none did: its time was up before the first), the first does not write them all
    (still bounded), and the sweep ends with every record failed ``OWNER_LOST``."""
    seed = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
    ghost = f"ghost-{uuid.uuid4().hex[:8]}"
    records = [make_record(ghost) for _ in range(30)]
    for record in records:
        assert await seed.create(record)
    sweeper = RedisPendingStore(
        TEST_REDIS_URL,
        prefix=store_prefix,
        process_id=f"sweeper-{uuid.uuid4().hex[:8]}",
        heartbeat_interval=0.2,
        heartbeat_ttl=1.5,
    )
    listed: list[int] = []  # how many records each listing of the lost process found
    real_list = sweeper.open_records

    async def slow_listing(owner: str | None = None) -> list[PendingRecord]:
        found = await real_list(owner)
        if owner == ghost:
            await asyncio.sleep(0.8)  # alone longer than a pass's 0.5 s
            listed.append(len(found))
        return found

    real_write = sweeper.compare_and_set

    async def slow_write(record: PendingRecord, event: AuditEvent | None = None) -> bool:
        await asyncio.sleep(0.05)
        return await real_write(record, event)

    sweeper.open_records = slow_listing  # type: ignore[method-assign]
    sweeper.compare_and_set = slow_write  # type: ignore[method-assign]
    upkeep: Any = sweeper._upkeep
    real_duty = upkeep.duty
    passes: list[tuple[list[int], int]] = []  # (what its listings found, how many it wrote)

    async def duty() -> list[PendingRecord]:
        before = len(listed)
        found: list[PendingRecord] = await real_duty()
        passes.append((listed[before:], len(found)))
        return found

    upkeep.duty = duty
    try:
        async with asyncio.timeout(90):
            await sweeper.start()
            while await seed.open_records(owner=ghost):
                stuck = [p for p in passes if any(p[0]) and p[1] == 0]
                assert not stuck, f"a pass listed records and wrote none: {passes}"
                await asyncio.sleep(0.1)
    finally:
        await sweeper.close()
    sweeping = [p for p in passes if any(p[0])]
    assert sweeping, passes
    assert all(wrote > 0 for _, wrote in sweeping), passes
    assert sweeping[0][1] < len(records), "one pass swept all: nothing bounds it"
    for record in records:
        stored = await seed.get(record.id)
        assert stored is not None
        assert (stored.state, stored.error_code) == ("failed", OWNER_LOST)


# -- 3. a heartbeat failing while the store is unavailable ---------------------------------


class _Beats(Upkeep):
    """An upkeep whose heartbeat raises each of ``outcomes`` in turn (``None``: it works)."""

    def __init__(self, outcomes: list[BaseException | None], log: logging.Logger) -> None:
        store = cast(Any, SimpleNamespace(on_orphans=None))
        super().__init__(store, interval=0.001, ttl=1.0, log=log)
        self.left = list(outcomes)

    async def duty(self) -> list[PendingRecord]:
        outcome = self.left.pop(0)
        if outcome is not None:
            raise outcome
        return []

    async def purge(self, now: float | None = None) -> int:
        return 0


async def beats(
    outcomes: list[BaseException | None], log: logging.Logger
) -> list[BaseException | None]:
    """Run the heartbeat loop ``Upkeep.loops`` makes over ``outcomes``, until they are used."""
    upkeep = _Beats(outcomes, log)
    tasks = upkeep.loops("test", lambda: not upkeep.left)
    (heartbeat,) = (task for task in tasks if task.get_name() == "test-store-heartbeat")
    try:
        async with asyncio.timeout(20):
            await heartbeat
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return outcomes


def locked() -> UserQuestionError:
    return UserQuestionError(
        "the pending store (SQLite at /srv/bot/questions.db) failed: database is locked",
        STORE_UNAVAILABLE,
    )


async def test_a_heartbeat_failing_on_an_unavailable_store_logs_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Eight beats fail with the store's error, then one works: one warning with the
    store's message and no traceback (there were eight tracebacks), then one line saying
    it works again."""
    log = logging.getLogger("tests.followups.heartbeat")
    caplog.set_level(logging.INFO, logger=log.name)
    await beats([locked() for _ in range(8)] + [None], log)
    mine = [r for r in caplog.records if r.name == log.name]
    problems = [r for r in mine if r.levelno >= logging.WARNING]
    assert len(problems) == 1, [r.getMessage() for r in problems]
    assert problems[0].levelno == logging.WARNING
    assert problems[0].exc_info is None
    assert "database is locked" in problems[0].getMessage()
    assert "Traceback" not in caplog.text
    again = [r for r in mine if r.levelno == logging.INFO]
    assert len(again) == 1 and "8 failure" in again[0].getMessage()


async def test_an_unexpected_heartbeat_failure_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unexpected error is logged with its traceback, once while it repeats; a store
    error beside it is logged on its own line (another cause)."""
    log = logging.getLogger("tests.followups.unexpected")
    caplog.set_level(logging.INFO, logger=log.name)
    await beats([RuntimeError("boom"), RuntimeError("boom"), locked(), RuntimeError("boom")], log)
    problems = [r for r in caplog.records if r.name == log.name and r.levelno >= logging.WARNING]
    assert [r.levelno for r in problems] == [logging.ERROR, logging.WARNING]
    assert problems[0].exc_info is not None and problems[0].exc_info[0] is RuntimeError
    assert problems[1].exc_info is None


def test_a_repeated_failure_is_logged_again_after_the_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At most one line a minute while a failure repeats, saying how many were not
    logged; the first success after it says so, once."""

    log = logging.getLogger("tests.followups.repeated")
    caplog.set_level(logging.INFO, logger=log.name)
    now = [1000.0]
    failures = RepeatedFailures(log, "pending store heartbeat", every=60, clock=lambda: now[0])
    for _ in range(30):  # a minute of beats every 2 s
        failures.failed(locked())
        now[0] += 2
    failures.failed(locked())
    lines = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert len(lines) == 2, lines
    assert "database is locked" in lines[0] and "more since" not in lines[0]
    assert "29 more since the last report" in lines[1]
    failures.succeeded()
    failures.succeeded()
    lines = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert len(lines) == 3 and "works again after 31 failure(s)" in lines[2]
