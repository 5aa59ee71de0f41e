"""The Redis store's sweep of lost processes' questions, under errors and at length.

* A sweep cut short by a store error still reports what it already wrote: the questions it
  failed ``OWNER_LOST`` (else their buttons stay live in Slack) and the unposted API
  questions it took for this process (else they are never posted and the agent's long-poll
  waits). A write whose answer never came is reported once it is seen made.
* A long sweep lets neither the sweeper's own heartbeat nor its lock lapse: another
  process would fail the sweeper's live questions ``OWNER_LOST``.

Real Redis and real stores; the store's per-record write is wrapped to fail once, to stall
Redis (a private server, ``CLIENT PAUSE``) or to take 0.1 s.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import OWNER_LOST_NOTE
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.errors import OWNER_LOST, STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionItem
from tests.conftest import TEST_REDIS_URL
from tests.redis_server import RedisServer

RedisStoreFactory = Callable[..., Awaitable[RedisPendingStore]]
CompareAndSet = Callable[[PendingRecord, AuditEvent | None], Awaitable[bool]]


def make_record(owner: str, *, detached: bool = False) -> PendingRecord:
    """A fresh pending record of ``owner`` (``detached``: an HTTP API question not posted)."""
    return PendingRecord(
        id=f"r-{uuid.uuid4().hex[:12]}",
        owner=owner,
        detached=detached,
        questions=[AskUserQuestionItem(id="q1", question="Ship it?")],
        channel="C0123456",
    )


async def left_by_a_lost_process(
    seed: RedisPendingStore, count: int, *, detached_too: bool = True
) -> tuple[str, list[PendingRecord]]:
    """``count`` pending records of a process that never beat (dead): every other one a
    detached API question when ``detached_too``."""
    ghost = f"ghost-{uuid.uuid4().hex[:8]}"
    records = [make_record(ghost, detached=detached_too and i % 2 == 0) for i in range(count)]
    for record in records:
        assert await seed.create(record)
    return ghost, records


def wrap_writes(
    store: RedisPendingStore,
    before: Callable[[int], Awaitable[None]],
    after: Callable[[int], Awaitable[None]],
) -> list[int]:
    """Wrap ``store.compare_and_set`` (the sweep's per-record write): ``before(n)`` runs
    before the ``n``-th write (1-based) and ``after(n)`` after it. Returns the call count
    (one element, updated)."""
    real: CompareAndSet = store.compare_and_set
    calls = [0]

    async def compare_and_set(record: PendingRecord, event: AuditEvent | None = None) -> bool:
        calls[0] += 1
        n = calls[0]
        await before(n)
        done = await real(record, event)
        await after(n)
        return done

    store.compare_and_set = compare_and_set  # type: ignore[method-assign]
    return calls


async def nothing(n: int) -> None:
    return None


def count_duties(store: RedisPendingStore) -> list[list[PendingRecord]]:
    """Wrap the store's heartbeat duty (before ``start()``): what each one returned."""
    upkeep: Any = store._upkeep
    real = upkeep.duty
    returned: list[list[PendingRecord]] = []

    async def duty() -> list[PendingRecord]:
        found: list[PendingRecord] = await real()
        returned.append(found)
        return found

    upkeep.duty = duty
    return returned


def assert_reported_once_each(
    reported: list[PendingRecord], records: list[PendingRecord], sweeper: str
) -> None:
    """Every record reported to ``on_orphans`` exactly once, as the sweep wrote it."""
    ids = [record.id for record in reported]
    assert len(ids) == len(set(ids)), "a record was reported twice"
    missing = {record.id for record in records} - set(ids)
    assert not missing, f"{len(missing)} of {len(records)} records never reached on_orphans"
    for record in reported:
        if record.detached:  # taken for the sweeper, to post
            assert (record.state, record.owner) == ("pending", sweeper)
        else:
            assert (record.state, record.error_code, record.note) == (
                "failed",
                OWNER_LOST,
                OWNER_LOST_NOTE,
            )


async def until(condition: Callable[[], Awaitable[bool]], what: str, within: float = 30) -> None:
    """Poll ``condition`` until true (fails after ``within`` s: a generous bound, no timing
    is asserted)."""
    try:
        async with asyncio.timeout(within):
            while True:
                if await condition():
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def swept_and_settled(
    seed: RedisPendingStore, ghost: str, duties: list[list[PendingRecord]]
) -> None:
    """Until the lost process has no open record left, and three more heartbeats ran."""

    async def none_left() -> bool:
        return not await seed.open_records(owner=ghost)

    await until(none_left, "the lost process's records all swept")
    ran = len(duties)

    async def three_more() -> bool:
        return len(duties) >= ran + 3

    await until(three_more, "three more heartbeats")


# -- an error cuts a sweep short -------------------------------------------------------------


@pytest.mark.slow
async def test_a_sweep_cut_short_by_a_store_error_still_reports_what_it_wrote(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    """The 4th write is made but its answer is lost, the 5th fails: the three before, and
    the 4th once seen made, reach ``on_orphans`` all the same (each once); the 5th record is
    swept by the next pass."""
    seed = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
    ghost, records = await left_by_a_lost_process(seed, 12)
    sweeper = RedisPendingStore(
        TEST_REDIS_URL,
        prefix=store_prefix,
        process_id=f"sweeper-{uuid.uuid4().hex[:8]}",
        heartbeat_interval=0.1,
        heartbeat_ttl=0.6,
    )
    reported: list[PendingRecord] = []

    async def on_orphans(found: list[PendingRecord]) -> None:
        reported.extend(found)

    sweeper.on_orphans = on_orphans

    async def fail_fifth(n: int) -> None:
        if n == 5:
            raise UserQuestionError("Redis did not answer (test)", STORE_UNAVAILABLE)

    async def lose_fourths_answer(n: int) -> None:
        if n == 4:
            raise UserQuestionError("Redis did not answer (test)", STORE_UNAVAILABLE)

    writes = wrap_writes(sweeper, fail_fifth, lose_fourths_answer)
    duties = count_duties(sweeper)
    try:
        async with asyncio.timeout(60):
            await sweeper.start()
            await swept_and_settled(seed, ghost, duties)
    finally:
        await sweeper.close()
    assert writes[0] >= 12
    assert_reported_once_each(reported, records, sweeper.process_id)
    for record in records:  # and so they are in Redis
        stored = await seed.get(record.id)
        assert stored is not None
        assert stored.is_open is record.detached


async def test_sweep_orphans_returns_what_it_wrote_before_an_error(
    redis_store_factory: RedisStoreFactory,
) -> None:
    """Called directly: a store error after some writes returns those (it is raised only
    when nothing was written); the next call sweeps the rest."""
    seed = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
    sweeper = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
    ghost, records = await left_by_a_lost_process(seed, 6)

    async def fail_third(n: int) -> None:
        if n == 3:
            raise UserQuestionError("Redis did not answer (test)", STORE_UNAVAILABLE)

    wrap_writes(sweeper, fail_third, nothing)
    async with asyncio.timeout(30):
        first = await sweeper.sweep_orphans()
        assert len(first) == 2
        rest = await sweeper.sweep_orphans()
    assert len(rest) == 4
    assert_reported_once_each(first + rest, records, sweeper.process_id)
    assert await seed.open_records(owner=ghost) == []


@pytest.mark.slow
async def test_a_sweep_through_a_redis_stall_reports_every_record_once(
    tmp_path: Path,
) -> None:
    """The reviewer's case: Redis stalls (here ``CLIENT PAUSE``, 1 s) in the middle of a
    sweep with ``op_timeout`` 0.5 s. The write in flight is made after the stall, its answer
    lost: every record, failed or taken, still reaches ``on_orphans``, each once."""
    async with RedisServer.start(tmp_path / "redis", appendonly=False) as server:
        prefix = f"test-{uuid.uuid4().hex}"
        seed = RedisPendingStore(server.url, prefix=prefix, heartbeat_interval=30, heartbeat_ttl=90)
        sweeper = RedisPendingStore(
            server.url,
            prefix=prefix,
            process_id=f"sweeper-{uuid.uuid4().hex[:8]}",
            heartbeat_interval=0.3,
            heartbeat_ttl=1.5,
            op_timeout=0.5,
        )
        admin = aioredis.from_url(server.url, decode_responses=True)
        reported: list[PendingRecord] = []

        async def on_orphans(found: list[PendingRecord]) -> None:
            reported.extend(found)

        sweeper.on_orphans = on_orphans

        async def stall_at_the_tenth(n: int) -> None:
            if n == 10:
                await admin.client_pause(1000, all=True)

        writes = wrap_writes(sweeper, stall_at_the_tenth, nothing)
        duties = count_duties(sweeper)
        try:
            async with asyncio.timeout(60):
                await seed.start()
                ghost, records = await left_by_a_lost_process(seed, 40)
                await sweeper.start()
                await swept_and_settled(seed, ghost, duties)
        finally:
            await sweeper.close()
            await seed.close()
            await admin.aclose()
        assert writes[0] >= 40
        assert_reported_once_each(reported, records, sweeper.process_id)


# -- a long sweep and the sweeper's own heartbeat --------------------------------------------


@pytest.mark.slow
async def test_a_long_sweep_lets_neither_the_heartbeat_nor_the_lock_lapse(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    """60 records of a lost process, each write taking 0.1 s: 6 s of sweeping, twice the
    heartbeat's TTL (3 s) and its lock's. The sweeper's heartbeat key never goes missing
    meanwhile, the sweep runs in passes (the first leaves records for the next), and another
    process never fails the sweeper's own live question."""
    seed = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
    ghost, _ = await left_by_a_lost_process(seed, 60, detached_too=False)
    sweeper = RedisPendingStore(
        TEST_REDIS_URL,
        prefix=store_prefix,
        process_id=f"sweeper-{uuid.uuid4().hex[:8]}",
        heartbeat_interval=0.25,
        heartbeat_ttl=3.0,
        op_timeout=0.5,  # the sweep lock lasts max(3.0, 2 * 0.5) s
    )
    sweeping = asyncio.Event()

    async def slowly(n: int) -> None:
        sweeping.set()
        await asyncio.sleep(0.1)

    wrap_writes(sweeper, slowly, nothing)
    duties = count_duties(sweeper)
    alive = f"{store_prefix}:alive:{sweeper.process_id}"
    missing = 0
    try:
        async with asyncio.timeout(90):
            await sweeper.start()
            mine = make_record(sweeper.process_id)  # a live in-process ask() of the sweeper
            assert await sweeper.create(mine)
            watch = sweeper.watch(mine.id)
            waiting = asyncio.ensure_future(watch.wait())
            try:
                await sweeping.wait()
                await redis_store_factory(heartbeat_interval=0.25, heartbeat_ttl=3.0)  # another
                while await seed.open_records(owner=ghost):
                    if not await redis_admin.exists(alive):
                        missing += 1
                    if waiting.done():
                        break
                    await asyncio.sleep(0.05)
                assert missing == 0, f"the sweeper's heartbeat was missing {missing} times"
                assert not waiting.done(), waiting.result()
            finally:
                waiting.cancel()
                watch.close()
    finally:
        await sweeper.close()
    stored = await seed.get(mine.id)
    assert stored is not None and stored.is_open, stored
    passes = [found for found in duties if found]
    assert len(passes[0]) < 60, "one pass swept all: nothing bounds it"
