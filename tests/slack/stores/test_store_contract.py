"""One contract for every pending store (memory, SQLite, Redis), restarts, then Redis only.

Each test runs in its own key prefix (see conftest.py) and inside ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audience import BATCH, Audience
from adapters.slack.model.audit_trail import AuditEvent, asked_event
from adapters.slack.model.record import ApprovalView, Draft, PendingRecord, State
from adapters.slack.stores import OpenCount, PendingStore, SqlitePendingStore, mutate
from adapters.slack.stores.contract import OWNER_LOST_NOTE, StoreUnavailable
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.errors import OWNER_LOST, STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionItem
from bot.questions.review import ReviewPolicy
from tests.loop_turns import OtherTask
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[3]
RedisStoreFactory = Callable[..., Awaitable[RedisPendingStore]]
SqliteStoreFactory = Callable[..., Awaitable[SqlitePendingStore]]
LOGGER = "adapters.slack.stores.redis"


def make_record(owner: str, request_id: str | None = None) -> PendingRecord:
    """A fresh pending record with one question."""
    return PendingRecord(
        id=request_id or f"r-{uuid.uuid4().hex[:12]}",
        owner=owner,
        questions=[AskUserQuestionItem(id="q1", question="Ship it?")],
        channel="C0123456",
    )


def finished(record: PendingRecord, state: State = "answered", **changes: object) -> PendingRecord:
    """The next version of ``record``, terminal."""
    return record.next(**{"state": state, "finished_at": time.time(), **changes})


def finish_if_open(
    state: State = "answered", **changes: object
) -> Callable[[PendingRecord], PendingRecord | None]:
    """A ``mutate`` change that ends an open record and leaves a finished one alone."""
    return lambda r: finished(r, state, **changes) if r.is_open else None


def free_port() -> int:
    """A local TCP port nobody listens on (just now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
async def other_redis_store(redis_store_factory: RedisStoreFactory) -> RedisPendingStore:
    """A second Redis store: same prefix as ``redis_store``, another process id."""
    return await redis_store_factory()


@pytest.fixture
async def other_sqlite_store(sqlite_store_factory: SqliteStoreFactory) -> SqlitePendingStore:
    """A second SQLite store: same file as ``sqlite_store``, another process id."""
    return await sqlite_store_factory()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_pair(request: pytest.FixtureRequest) -> tuple[PendingStore, PendingStore]:
    """Two views of one shared store: two Redis or SQLite processes, or one memory store."""
    if request.param == "memory":
        memory: PendingStore = request.getfixturevalue("memory_store")
        return memory, memory
    if request.param == "sqlite":
        one: PendingStore = request.getfixturevalue("sqlite_store")
        two: PendingStore = request.getfixturevalue("other_sqlite_store")
        return one, two
    first: PendingStore = request.getfixturevalue("redis_store")
    second: PendingStore = request.getfixturevalue("other_redis_store")
    return first, second


# -- the contract: both stores ------------------------------------------------------------


async def test_create_get_and_duplicate(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        assert await store.get(record.id) is None
        assert await store.create(record)
        assert await store.get(record.id) == record
        clash = make_record("someone-else", record.id)
        assert not await store.create(clash)
        assert await store.get(record.id) == record


async def test_get_returns_a_copy(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        got = await store.get(record.id)
        assert got is not None
        got.drafts.append(Draft(selected=[1]))
        got.state = "answered"
        assert await store.get(record.id) == record


@pytest.mark.slow
async def test_get_many_reads_records_in_the_order_asked_as_every_process_sees_them(
    store_pair: tuple[PendingStore, PendingStore],
) -> None:
    writer, reader = store_pair
    async with asyncio.timeout(10):
        assert await reader.get_many([]) == []
        first, second = make_record(writer.process_id), make_record(writer.process_id)
        assert await writer.create(first) and await writer.create(second)
        assert await writer.compare_and_set(finished(second))
        ended = await writer.get(second.id)
        got = await reader.get_many([second.id, "r-unknown", first.id, second.id])
        assert got == [ended, None, first, ended]
        assert got[0] is not got[3]  # each a copy, as ``get`` gives
        # More ids than one SQLite statement binds (500): still every one, in order.
        many = [make_record(writer.process_id) for _ in range(501)]
        for record in many:
            assert await writer.create(record)
        ids = [r.id for r in reversed(many)]
        assert [r.id if r else None for r in await reader.get_many(ids)] == ids


@pytest.mark.slow
async def test_compare_and_set_version_rules(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        assert not await store.compare_and_set(record.next(label="x"))  # nothing stored yet
        await store.create(record)
        assert not await store.compare_and_set(record.model_copy(update={"label": "same"}))
        skipped = record.next(label="skipped").next(label="skipped")
        assert not await store.compare_and_set(skipped)
        assert await store.get(record.id) == record
        one = record.next(drafts=[Draft(selected=[0])])
        assert await store.compare_and_set(one)
        assert not await store.compare_and_set(one)  # a replay is stale
        assert not await store.compare_and_set(record.next(label="late"))
        two = one.next(label="second")
        assert await store.compare_and_set(two)
        stored = await store.get(record.id)
        assert stored == two
        assert stored is not None and stored.version == 2


async def test_terminal_is_final(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        done = finished(record, answered_by="U1")
        assert await store.compare_and_set(done)
        assert not await store.compare_and_set(record.next(state="cancelled"))  # lost the race
        for state in ("cancelled", "aborted", "failed"):  # on the fresh base: still refused
            assert not await store.compare_and_set(done.next(state=state))
        # the same terminal state may still be annotated (e.g. the message's ts arrives late)
        annotated = done.next(message_ts="1700000000.000100", message_channel="C0123456")
        assert await store.compare_and_set(annotated)
        assert await store.get(record.id) == annotated
        assert await store.open_records() == []


@pytest.mark.slow
async def test_a_deliberate_reopen_ends_again_and_wakes_new_watches(
    store_pair: tuple[PendingStore, PendingStore],
) -> None:
    """The provider may reopen an ended request (same key, new note): it is open again."""
    async with asyncio.timeout(10):
        asker, clicker = store_pair
        record = make_record(asker.process_id)
        await asker.create(record)
        first = finished(record, "failed", note="no answer in time")
        assert await asker.compare_and_set(first)
        reopened = first.next(state="pending", note="asked again", finished_at=None)
        assert await asker.compare_and_set(reopened)
        assert [r.id for r in await asker.open_records(owner=asker.process_id)] == [record.id]
        watch = asker.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.1)
            assert not waiting.done()  # open again: the earlier ending does not count
            _, second = await mutate(clicker, record.id, finish_if_open(answered_by="U1"))
            assert second is not None and second.version == 3
            assert await asyncio.wait_for(waiting, 5) == second
        finally:
            watch.close()
        assert await asker.open_records() == []


async def test_cancelling_a_wait_does_not_break_the_watch(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        watch = store.watch(record.id)
        try:
            first = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.05)
            first.cancel()
            _, done = await mutate(store, record.id, finish_if_open("failed"))
            assert await asyncio.wait_for(watch.wait(), 5) == done
        finally:
            watch.close()
        assert store.watch_count == 0


async def test_mutate_returns_seen_and_written(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        assert await mutate(store, "r-missing", finish_if_open()) == (None, None)
        record = make_record(store.process_id)
        await store.create(record)
        seen, written = await mutate(store, record.id, lambda r: None)
        assert (seen, written) == (record, None)
        seen, written = await mutate(store, record.id, finish_if_open(answered_by="U1"))
        assert seen == record
        assert written is not None and written.state == "answered" and written.version == 1
        seen, written = await mutate(store, record.id, finish_if_open(answered_by="U2"))
        assert seen is not None and seen.answered_by == "U1"
        assert written is None


async def test_mutate_decides_first_on_the_record_the_caller_knows(store: PendingStore) -> None:
    # A click's path: the record it just read is decided on, with no second read.
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        seen: list[PendingRecord] = []

        def change(current: PendingRecord) -> PendingRecord | None:
            seen.append(current)
            return finish_if_open(answered_by="U1")(current)

        _, written = await mutate(store, record.id, change, known=record)
        assert seen == [record]  # decided once, on the record given
        assert written is not None and written.version == 1 and written.answered_by == "U1"


async def test_mutate_on_a_stale_known_record_decides_again_on_a_fresh_read(
    store: PendingStore,
) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        noted = record.next(note="Asked again.")  # written after the caller read it
        assert await store.compare_and_set(noted)
        seen: list[PendingRecord] = []

        def change(current: PendingRecord) -> PendingRecord | None:
            seen.append(current)
            return finish_if_open(answered_by="U1")(current)

        _, written = await mutate(store, record.id, change, known=record)
        assert [r.version for r in seen] == [0, 1]  # the stale one lost the compare-and-set
        assert written is not None and written.version == 2 and written.note == "Asked again."
        assert await store.get(record.id) == written


async def test_first_writer_wins_under_concurrency(
    store_pair: tuple[PendingStore, PendingStore],
) -> None:
    async with asyncio.timeout(20):
        first, second = store_pair
        record = make_record(first.process_id)
        watch = first.watch(record.id)
        try:
            assert await first.create(record)

            async def click(i: int) -> tuple[PendingRecord | None, PendingRecord | None]:
                target = first if i % 2 else second
                return await mutate(target, record.id, finish_if_open(answered_by=f"U{i}"))

            results = await asyncio.gather(*(click(i) for i in range(50)))
            written = [w for _, w in results if w is not None]
            assert len(written) == 1
            assert all(seen is not None for seen, _ in results)
            winner = written[0]
            assert await first.get(record.id) == winner
            assert await second.get(record.id) == winner
            assert winner.version == 1
            assert await watch.wait() == winner
        finally:
            watch.close()


@pytest.mark.slow
async def test_watch_wakes_on_terminal_write_and_not_before(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        watch = store.watch(record.id)  # before the record exists, as the provider does
        try:
            await store.create(record)
            waiting = asyncio.ensure_future(watch.wait())
            _, draft = await mutate(store, record.id, lambda r: r.next(drafts=[Draft(custom="hm")]))
            assert draft is not None
            await asyncio.sleep(0.3)
            assert not waiting.done()
            _, done = await mutate(store, record.id, finish_if_open(answered_by="U1"))
            assert await asyncio.wait_for(waiting, 5) == done
        finally:
            watch.close()
        assert store.watch_count == 0


@pytest.mark.slow
async def test_watch_wakes_when_another_instance_writes(
    store_pair: tuple[PendingStore, PendingStore],
) -> None:
    async with asyncio.timeout(10):
        asker, clicker = store_pair
        record = make_record(asker.process_id)
        watch = asker.watch(record.id)
        try:
            await asker.create(record)
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.1)
            assert not waiting.done()
            _, done = await mutate(clicker, record.id, finish_if_open("cancelled"))
            got = await asyncio.wait_for(waiting, 5)
            assert got == done and got.state == "cancelled"
        finally:
            watch.close()
        assert asker.watch_count == 0


async def test_every_watch_of_a_request_wakes(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        watches = [store.watch(record.id) for _ in range(3)]
        try:
            waits = [asyncio.ensure_future(w.wait()) for w in watches]
            await asyncio.sleep(0.05)
            _, done = await mutate(store, record.id, finish_if_open("aborted"))
            assert await asyncio.wait_for(asyncio.gather(*waits), 5) == [done] * 3
        finally:
            for w in watches:
                w.close()


async def test_watch_after_the_end_returns_at_once(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        _, done = await mutate(store, record.id, finish_if_open("failed", error_code="X"))
        watch = store.watch(record.id)
        try:
            assert await asyncio.wait_for(watch.wait(), 2) == done
            assert await asyncio.wait_for(watch.wait(), 2) == done  # and again
        finally:
            watch.close()


async def test_closing_watches_leaves_none(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(store.process_id)
        await store.create(record)
        first, second, other = store.watch(record.id), store.watch(record.id), store.watch("r-x")
        assert store.watch_count == 3
        first.close()
        first.close()  # idempotent
        assert store.watch_count == 2
        await mutate(store, record.id, finish_if_open())
        await asyncio.wait_for(second.wait(), 5)
        second.close()
        other.close()
        assert store.watch_count == 0
        await store.close()
        assert store.watch_count == 0


async def test_open_records_by_owner(store: PendingStore) -> None:
    async with asyncio.timeout(10):
        mine = [make_record(store.process_id) for _ in range(3)]
        theirs = make_record("another-process")
        for record in [*mine, theirs]:
            assert await store.create(record)
        await mutate(store, mine[0].id, finish_if_open())
        _, saved = await mutate(store, mine[1].id, lambda r: r.next(drafts=[Draft(selected=[0])]))
        everyone = {r.id: r for r in await store.open_records()}
        assert set(everyone) == {mine[1].id, mine[2].id, theirs.id}
        assert everyone[mine[1].id] == saved
        own = await store.open_records(owner=store.process_id)
        assert {r.id for r in own} == {mine[1].id, mine[2].id}
        assert [r.id for r in await store.open_records(owner="another-process")] == [theirs.id]
        assert await store.open_records(owner="nobody") == []


async def test_open_count_counts_the_pending_by_owner_as_every_process_sees_them(
    store_pair: tuple[PendingStore, PendingStore],
) -> None:
    one, two = store_pair
    async with asyncio.timeout(10):
        assert await one.open_count() == OpenCount(total=0, mine=0, unowned=0)
        mine = [make_record(one.process_id) for _ in range(3)]
        unowned = [make_record(one.process_id).model_copy(update={"owner": None}) for _ in range(2)]
        theirs = make_record("another-process")
        for record in [*mine, *unowned, theirs]:
            assert await one.create(record)
        await mutate(one, mine[0].id, finish_if_open())  # finished: counted no more
        await mutate(one, unowned[0].id, lambda r: r.next(owner="another-process"))  # taken
        await mutate(one, mine[1].id, lambda r: r.next(owner=None))  # released
        # one: mine[2]; nobody's: unowned[1], mine[1]; another process's: theirs, unowned[0]
        assert await one.open_count() == OpenCount(total=5, mine=1, unowned=2)
        if two is not one:  # another process on the same store: the same open and unowned
            assert await two.open_count() == OpenCount(total=5, mine=0, unowned=2)
        await mutate(one, mine[1].id, finish_if_open())
        assert await one.open_count() == OpenCount(total=4, mine=1, unowned=1)


@pytest.fixture(params=["sqlite", "redis"])
def shared_store(request: pytest.FixtureRequest) -> PendingStore:
    """A store of several processes: SQLite or Redis."""
    store: PendingStore = request.getfixturevalue(f"{request.param}_store")
    return store


@pytest.mark.slow
async def test_open_audiences_give_other_tasks_turns_while_they_make_many(
    shared_store: PendingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a store's rows have arrived it makes their audiences in batches, other tasks
    given a turn between two: 10,000 made in one go held the loop for up to 24 ms, and a click
    arriving meanwhile waited as long. (The memory store keeps its audiences made.)"""
    store: Any = shared_store
    async with asyncio.timeout(60):
        for _ in range(3 * BATCH):
            assert await store.create(make_record(store.process_id))
        # the store's own read of the audiences (nothing else it reads meanwhile)
        target, name, ours = (
            (store._file, "rows", lambda args: "json_each" in args[0])
            if isinstance(store, SqlitePendingStore)
            else (store._link, "op", lambda args: args[0] == "list audiences")
        )
        real = getattr(target, name)
        other = OtherTask()
        at_arrival: int | None = None

        async def marked(*args: Any, **kwargs: Any) -> Any:
            nonlocal at_arrival
            result = await real(*args, **kwargs)
            if at_arrival is None and ours(args):
                at_arrival = other.turns
            return result

        monkeypatch.setattr(target, name, marked)
        async with other:
            audiences = await store.open_audiences()
            assert at_arrival is not None
            after_rows = other.turns - at_arrival
        assert len(audiences) == 3 * BATCH
        assert after_rows >= 2


async def test_open_audiences_name_who_may_answer_each_open_question_as_every_process_sees(
    store_pair: tuple[PendingStore, PendingStore],
) -> None:
    one, two = store_pair
    async with asyncio.timeout(10):
        assert await two.open_audiences() == []
        anyone = make_record(one.process_id)
        people = make_record(one.process_id).model_copy(update={"allowed_users": ["U1", "U2"]})
        groups = make_record("another-process").model_copy(
            update={"allowed_usergroups": ["S1"], "allowed_users": []}
        )
        closed = make_record(one.process_id)
        approval = make_record(one.process_id).model_copy(
            update={"questions": [], "approval": ApprovalView(tool_name="bash", headline="x")}
        )
        # a team review's reviewers within the operator's allow-list (issue 38): U2 only
        reviewed = make_record(one.process_id).model_copy(
            update={
                "allowed_users": ["U1", "U2"],
                "review": ReviewPolicy.model_validate(
                    {"approvals": 1, "reviewers": {"users": ["U2", "U9"]}}
                ),
            }
        )
        for record in (anyone, people, groups, closed, approval, reviewed):
            assert await one.create(record)
        await mutate(one, closed.id, finish_if_open())

        def expected(*records: PendingRecord) -> set[Audience]:
            return {a for a in map(Audience.of, records) if a is not None}

        assert Audience.of(reviewed).users == ("U2",)  # type: ignore[union-attr]
        assert set(await two.open_audiences()) == expected(anyone, people, groups, reviewed)
        await mutate(one, reviewed.id, finish_if_open())
        # a change of who may answer shows at once; an ended question leaves, a reopened one
        # comes back
        _, people = await mutate(one, people.id, lambda r: r.next(allowed_users=["U3"]))
        await mutate(one, anyone.id, finish_if_open())
        _, closed = await mutate(one, closed.id, lambda r: r.next(state="pending"))
        assert people is not None and closed is not None
        audiences = await two.open_audiences()
        assert set(audiences) == expected(people, groups, closed) and len(audiences) == 3
        by_id = {a.request_id: a for a in audiences}
        assert by_id[people.id].users == ("U3",) and by_id[groups.id].usergroups == ("S1",)
        assert by_id[closed.id].created_at == closed.created_at


async def test_process_id_names_the_owner(store: PendingStore) -> None:
    assert isinstance(store.process_id, str) and store.process_id


# -- Redis only ---------------------------------------------------------------------------


async def test_records_have_no_ttl_while_pending_and_the_retention_once_ended(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis
) -> None:
    async with asyncio.timeout(10):
        store = await redis_store_factory(finished_ttl=10)
        p = store.prefix
        record = make_record(store.process_id)
        await store.create(record)
        key = f"{p}:req:{record.id}"
        assert await redis_admin.pttl(key) == -1  # nothing expires while pending
        assert await redis_admin.sismember(f"{p}:open", record.id)
        assert await redis_admin.sismember(f"{p}:owner:{store.process_id}", record.id)
        assert await redis_admin.pttl(f"{p}:owner:{store.process_id}") == -1
        raw = await redis_admin.get(key)
        assert raw is not None and PendingRecord.load(raw) == record  # plain JSON
        assert await redis_admin.sismember(f"{p}:owners", store.process_id)

        # moving to another owner while pending moves the index entry
        _, moved = await mutate(store, record.id, lambda r: r.next(owner="heir"))
        assert moved is not None
        assert not await redis_admin.sismember(f"{p}:owner:{store.process_id}", record.id)
        assert await redis_admin.sismember(f"{p}:owner:heir", record.id)
        # and to no owner at all: open, in no owner set
        _, ownerless = await mutate(store, record.id, lambda r: r.next(owner=None))
        assert ownerless is not None and ownerless.owner is None
        assert not await redis_admin.sismember(f"{p}:owner:heir", record.id)
        assert await redis_admin.sismember(f"{p}:open", record.id)
        assert await redis_admin.pttl(key) == -1

        _, done = await mutate(store, record.id, finish_if_open())
        assert done is not None
        assert 5_000 < await redis_admin.pttl(key) <= 10_000
        assert not await redis_admin.sismember(f"{p}:open", record.id)
        annotated = done.next(message_ts="1.2")
        assert await store.compare_and_set(annotated)
        assert 0 < await redis_admin.pttl(key) <= 10_000  # a finished record's TTL is kept

        # a deliberate reopen is open again: no TTL, back in the index sets
        assert await store.compare_and_set(annotated.next(state="pending", owner="heir"))
        assert await redis_admin.pttl(key) == -1
        assert await redis_admin.sismember(f"{p}:open", record.id)
        assert await redis_admin.sismember(f"{p}:owner:heir", record.id)


async def test_a_record_owned_by_no_process_is_created_outside_every_owner_set(
    redis_store: RedisPendingStore, redis_admin: aioredis.Redis
) -> None:
    async with asyncio.timeout(10):
        p = redis_store.prefix
        record = make_record(redis_store.process_id).model_copy(update={"owner": None})
        assert await redis_store.create(record)
        assert await redis_admin.pttl(f"{p}:req:{record.id}") == -1
        assert await redis_admin.sismember(f"{p}:open", record.id)
        assert not await redis_admin.exists(f"{p}:owner:-")
        assert await redis_admin.smembers(f"{p}:owners") == set()
        assert [r.id for r in await redis_store.open_records()] == [record.id]
        assert await redis_store.sweep_orphans() == []


async def test_redis_keeps_each_open_questions_audience_beside_it_and_heals_the_hash(
    redis_store: RedisPendingStore, redis_admin: aioredis.Redis
) -> None:
    async with asyncio.timeout(10):
        p = redis_store.prefix
        kept = f"{p}:audiences"
        asked = make_record(redis_store.process_id).model_copy(update={"allowed_users": ["U1"]})
        older = make_record(redis_store.process_id)
        lost = make_record(redis_store.process_id)
        for record in (asked, older, lost):
            assert await redis_store.create(record)
        # (with its conversation: those named who see it, issue 38)
        where = asked.message_channel or asked.channel
        assert await redis_admin.hget(kept, asked.id) == f"{asked.created_at!r}\tU1\t\t{where}"
        # a change of who may answer is kept with the write; an ending removes the entry
        _, asked = await mutate(redis_store, asked.id, lambda r: r.next(allowed_usergroups=["S1"]))
        assert asked is not None
        assert await redis_admin.hget(kept, asked.id) == f"{asked.created_at!r}\tU1\tS1\t{where}"
        # a record stored before the hash was kept has no entry; one Redis lost keeps its
        # entry and its id in the open set; a stray entry names a record no longer open
        await redis_admin.hdel(kept, older.id)
        await redis_admin.delete(f"{p}:req:{lost.id}")
        await redis_admin.hset(kept, "strayrecord01", "1.0\t\t")
        listed = {a.request_id: a for a in await redis_store.open_audiences()}
        assert listed == {asked.id: Audience.of(asked), older.id: Audience.of(older)}
        assert set(await redis_admin.hkeys(kept)) == {asked.id, older.id}  # healed
        _, ended = await mutate(redis_store, older.id, finish_if_open())
        assert ended is not None and not await redis_admin.hexists(kept, older.id)
        assert [a.request_id for a in await redis_store.open_audiences()] == [asked.id]


async def test_a_record_redis_lost_is_counted_open_no_more(
    redis_store: RedisPendingStore, redis_admin: aioredis.Redis
) -> None:
    # Redis flushed a record nobody waits on: its id is left in the index sets.
    async with asyncio.timeout(10):
        p = redis_store.prefix
        mine = make_record(redis_store.process_id)
        unowned = make_record(redis_store.process_id).model_copy(update={"owner": None})
        kept = make_record(redis_store.process_id)
        for record in (mine, unowned, kept):
            assert await redis_store.create(record)
        assert await redis_store.open_count() == OpenCount(total=3, mine=2, unowned=1)
        assert await redis_admin.delete(f"{p}:req:{mine.id}", f"{p}:req:{unowned.id}") == 2
        assert await redis_store.open_count() == OpenCount(total=1, mine=1, unowned=0)
        assert await redis_admin.smembers(f"{p}:open") == {kept.id}  # dropped, as listing does
        # Lost, then put back as failed before anything counted: in no index either.
        assert await redis_admin.delete(f"{p}:req:{kept.id}") == 1
        assert await redis_store.create(finished(kept, "failed"))
        assert await redis_admin.smembers(f"{p}:open") == set()
        assert not await redis_admin.sismember(f"{p}:owner:{redis_store.process_id}", kept.id)
        assert await redis_store.open_count() == OpenCount(total=0, mine=0, unowned=0)


@pytest.mark.slow
async def test_exactly_one_notification_for_concurrent_finishes(
    redis_store: RedisPendingStore,
    other_redis_store: RedisPendingStore,
    redis_admin: aioredis.Redis,
) -> None:
    async with asyncio.timeout(15):
        pubsub = redis_admin.pubsub()
        try:
            await pubsub.subscribe(f"{redis_store.prefix}:done")
            confirmation = await pubsub.get_message(timeout=2)
            assert confirmation is not None and confirmation["type"] == "subscribe"
            record = make_record(redis_store.process_id)
            await redis_store.create(record)
            stores = [redis_store, other_redis_store]
            results = await asyncio.gather(
                *(mutate(stores[i % 2], record.id, finish_if_open()) for i in range(50))
            )
            assert sum(w is not None for _, w in results) == 1
            published = []
            while (message := await pubsub.get_message(timeout=0.5)) is not None:
                published.append(message["data"])
            assert published == [record.id]
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]


async def test_a_retried_write_is_recognised_not_refused(
    redis_store: RedisPendingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py retries a script whose reply was lost: the retry must not report a conflict."""
    async with asyncio.timeout(10):
        record = make_record(redis_store.process_id)
        monkeypatch.setattr(redis_store, "_new_token", lambda: "create-1")
        assert await redis_store.create(record)
        assert await redis_store.create(record)  # the retry of that create
        done = finished(record)
        monkeypatch.setattr(redis_store, "_new_token", lambda: "write-1")
        assert await redis_store.compare_and_set(done)
        assert await redis_store.compare_and_set(done)  # the retry of that write
        monkeypatch.setattr(redis_store, "_new_token", lambda: "another-write")
        assert not await redis_store.compare_and_set(done)  # a real replay is stale
        assert not await redis_store.create(record)
        assert await redis_store.get(record.id) == done


@pytest.mark.slow
async def test_heartbeat_lives_while_running_and_goes_on_close(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis
) -> None:
    async with asyncio.timeout(10):
        store = await redis_store_factory(heartbeat_interval=0.1, heartbeat_ttl=0.5)
        key = f"{store.prefix}:alive:{store.process_id}"
        assert 0 < await redis_admin.pttl(key) <= 500
        await asyncio.sleep(0.8)  # longer than the TTL: refreshed meanwhile
        assert await redis_admin.exists(key)
        await store.close()
        assert not await redis_admin.exists(key)


async def test_close_ends_pending_waits(redis_store: RedisPendingStore) -> None:
    async with asyncio.timeout(10):
        record = make_record(redis_store.process_id)
        await redis_store.create(record)
        watch = redis_store.watch(record.id)
        waiting = asyncio.ensure_future(watch.wait())
        await asyncio.sleep(0.1)
        await redis_store.close()
        assert redis_store.watch_count == 0
        with pytest.raises(UserQuestionError) as info:
            await waiting
        assert info.value.code == STORE_UNAVAILABLE
        watch.close()
        with pytest.raises(UserQuestionError):
            await redis_store.get(record.id)


_DOOMED = """
import asyncio, sys
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.models import AskUserQuestionItem

async def main() -> None:
    url, prefix, request_id = sys.argv[1:4]
    store = RedisPendingStore(url, prefix=prefix, process_id="doomed", heartbeat_interval=0.2,
                              heartbeat_ttl=0.6, op_timeout=1.0)
    await store.start()
    item = AskUserQuestionItem(id="q1", question="Still there?")
    record = PendingRecord(id=request_id, owner=store.process_id, questions=[item], channel="C1")
    assert await store.create(record)
    print("ready", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


@pytest.mark.slow
async def test_sweep_fails_the_questions_of_a_killed_process(
    redis_store_factory: RedisStoreFactory,
    store_prefix: str,
    redis_url: str,
    redis_admin: aioredis.Redis,
) -> None:
    async with asyncio.timeout(30):
        sweeper = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
        watcher = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
        request_id = f"r-{uuid.uuid4().hex[:12]}"
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _DOOMED,
            redis_url,
            store_prefix,
            request_id,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            assert child.stdout is not None
            assert (await asyncio.wait_for(child.stdout.readline(), 20)).strip() == b"ready"
            survivors = [make_record(sweeper.process_id), make_record(watcher.process_id)]
            for record in survivors:
                await sweeper.create(record)
            watch = watcher.watch(request_id)
            waiting = asyncio.ensure_future(watch.wait())
            assert await sweeper.sweep_orphans() == []  # the owner is alive
        finally:
            child.kill()
            await child.wait()
            if child.stdout is not None:
                await child.stdout.read()
        try:
            for _ in range(200):  # until the heartbeat lapses (and any stale lock)
                if failed := await sweeper.sweep_orphans():
                    break
                await asyncio.sleep(0.1)
            assert [r.id for r in failed] == [request_id]
            assert failed[0].state == "failed" and failed[0].error_code == OWNER_LOST
            assert failed[0].note == OWNER_LOST_NOTE and failed[0].finished_at is not None
            got = await asyncio.wait_for(waiting, 5)
            assert (got.state, got.error_code) == ("failed", OWNER_LOST)
        finally:
            watch.close()
        assert not await redis_admin.exists(f"{store_prefix}:alive:doomed")
        assert await sweeper.open_records(owner="doomed") == []
        assert {r.id for r in await sweeper.open_records()} == {r.id for r in survivors}
        assert await sweeper.sweep_orphans() == []
        owners = await redis_admin.smembers(f"{store_prefix}:owners")
        assert owners == {sweeper.process_id, watcher.process_id}  # the lost one is forgotten


@pytest.mark.slow
async def test_heartbeat_loop_sweeps_and_reports_orphans(
    redis_store_factory: RedisStoreFactory,
) -> None:
    async with asyncio.timeout(15):
        doomed = await redis_store_factory(heartbeat_interval=0.2, heartbeat_ttl=0.6)
        watcher = await redis_store_factory(heartbeat_interval=30, heartbeat_ttl=90)
        sweeper = await redis_store_factory(heartbeat_interval=0.2, heartbeat_ttl=0.6)
        reported: asyncio.Queue[list[PendingRecord]] = asyncio.Queue()

        async def on_orphans(records: list[PendingRecord]) -> None:
            await reported.put(records)

        sweeper.on_orphans = on_orphans
        record = make_record(doomed.process_id)
        await doomed.create(record)
        watch = watcher.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.5)
            assert reported.empty() and not waiting.done()  # alive: nothing to sweep
            await doomed.close()  # its heartbeat goes; its question is left open
            orphans = await asyncio.wait_for(reported.get(), 5)
            assert [(r.id, r.state, r.error_code) for r in orphans] == [
                (record.id, "failed", OWNER_LOST)
            ]
            got = await asyncio.wait_for(waiting, 5)
            assert (got.state, got.error_code, got.note) == ("failed", OWNER_LOST, OWNER_LOST_NOTE)
        finally:
            watch.close()


@pytest.mark.slow
async def test_unreachable_redis_at_start_names_redis_url_without_password() -> None:
    async with asyncio.timeout(10):
        url = f"redis://:secret@127.0.0.1:{free_port()}/0"
        store = RedisPendingStore(url, op_timeout=1.0)
        assert "secret" not in repr(store)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as info:
            await store.start()
        assert time.monotonic() - started < 3
        message = str(info.value)
        assert "REDIS_URL" in message and "redis://:***@127.0.0.1" in message
        assert "secret" not in message and "secret" not in repr(info.value)
        assert isinstance(info.value, ConnectionError)
        await store.close()


@pytest.mark.slow
async def test_operations_against_a_dead_server_fail_in_bounded_time() -> None:
    async with asyncio.timeout(15):
        store = RedisPendingStore(f"redis://127.0.0.1:{free_port()}/0", op_timeout=0.5)
        record = make_record(store.process_id)
        calls = [
            store.get(record.id),
            store.create(record),
            store.compare_and_set(record.next()),
            store.open_records(),
            store.sweep_orphans(),
        ]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(UserQuestionError) as info:
                await call
            assert info.value.code == STORE_UNAVAILABLE
            assert time.monotonic() - started < 1.5
        await store.close()


@pytest.mark.slow
async def test_a_silent_server_cannot_hang_an_operation() -> None:
    """A server that accepts connections and never answers (a black hole)."""
    async with asyncio.timeout(15):
        writers: list[asyncio.StreamWriter] = []

        async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            while await reader.read(4096):
                pass

        server = await asyncio.start_server(swallow, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = RedisPendingStore(f"redis://127.0.0.1:{port}/0", op_timeout=0.5)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="REDIS_URL"):
                await store.start()
            started = time.monotonic()
            with pytest.raises(UserQuestionError) as info:
                await store.get("r-1")
            assert info.value.code == STORE_UNAVAILABLE
            assert time.monotonic() - started < 1.5
        finally:
            await store.close()
            server.close()
            for writer in writers:
                writer.close()
            await server.wait_closed()


async def _kill(admin: aioredis.Redis, store: RedisPendingStore, kind: str) -> int:
    """Kill ``store``'s connections of one type (only its own: found by client name)."""
    name = f"{store.prefix}:{store.process_id}"
    killed = 0
    for client in await admin.client_list(_type=kind):
        if client.get("name") == name:
            killed += await admin.client_kill_filter(_id=client["id"], _type=kind)
    return killed


async def test_a_write_after_connections_are_killed_still_wakes_the_watch(
    redis_store: RedisPendingStore,
    other_redis_store: RedisPendingStore,
    redis_admin: aioredis.Redis,
) -> None:
    async with asyncio.timeout(15):
        asker, clicker = redis_store, other_redis_store
        record = make_record(asker.process_id)
        await asker.create(record)
        watch = asker.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            assert await clicker.get(record.id) == record
            await asyncio.sleep(0.1)
            assert await _kill(redis_admin, asker, "pubsub") == 1
            assert await _kill(redis_admin, asker, "normal") >= 1
            assert await _kill(redis_admin, clicker, "normal") >= 1
            _, done = await mutate(clicker, record.id, finish_if_open(answered_by="U9"))
            assert done is not None  # redis-py reconnected the clicker on its own
            assert await asyncio.wait_for(waiting, 10) == done
            assert await asker.get(record.id) == done
        finally:
            watch.close()


@pytest.mark.slow
async def test_a_missed_notification_is_recovered_after_resubscribing(
    redis_store: RedisPendingStore, redis_admin: aioredis.Redis
) -> None:
    async with asyncio.timeout(15):
        record = make_record(redis_store.process_id)
        await redis_store.create(record)
        watch = redis_store.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.1)
            # The ending lands without its notification (as if published while we were away).
            done = finished(record)
            key = f"{redis_store.prefix}:req:{record.id}"
            await redis_admin.set(key, done.dump(), keepttl=True)
            await asyncio.sleep(0.5)
            assert not waiting.done()
            assert await _kill(redis_admin, redis_store, "pubsub") == 1
            assert await asyncio.wait_for(waiting, 10) == done
        finally:
            watch.close()


class _Proxy:
    """A TCP relay in front of the test Redis that a test can cut, restore or freeze."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._links: dict[asyncio.Task[None], list[asyncio.StreamWriter]] = {}
        self._frozen: set[asyncio.Task[None]] = set()
        self.port = 0
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._links[task] = [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    if task not in self._frozen:
                        dst.write(data)
                        await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._links.pop(task, None)
            self._frozen.discard(task)

    def freeze(self) -> None:
        """Existing connections go silent (half-open); new ones still work."""
        self._frozen.update(self._links)

    async def cut(self) -> None:
        """Stop listening and drop every connection: Redis is gone."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        links = list(self._links)
        for writers in self._links.values():
            for writer in writers:
                writer.close()
        await asyncio.gather(*links, return_exceptions=True)

    async def restore(self) -> None:
        """Listen again on the same port: Redis is back (with its data)."""
        await self.start()


@pytest.fixture
async def proxy(redis_url: str) -> AsyncIterator[_Proxy]:
    """A relay to the test Redis; ``proxy.url`` reaches Redis through it."""
    target = urlsplit(redis_url)
    relay = _Proxy(target.hostname or "127.0.0.1", target.port or 6379)
    await relay.start()
    auth = f"{target.username or ''}:{target.password}@" if target.password else ""
    relay.url = f"redis://{auth}127.0.0.1:{relay.port}{target.path or '/0'}"
    try:
        yield relay
    finally:
        await relay.cut()


@pytest.mark.slow
async def test_redis_lost_and_back_while_running(
    proxy: _Proxy,
    store_prefix: str,
    redis_store: RedisPendingStore,
    redis_admin: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Operations fail fast while Redis is gone, the wait keeps waiting, and all recovers."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    clicker = redis_store
    asker = RedisPendingStore(
        proxy.url,
        prefix=store_prefix,
        heartbeat_interval=0.2,
        heartbeat_ttl=30,
        op_timeout=0.5,
    )
    async with asyncio.timeout(30):
        await asker.start()
        watch = asker.watch("unset")
        try:
            record = make_record(asker.process_id)
            await asker.create(record)
            watch.close()
            watch = asker.watch(record.id)
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.1)

            await proxy.cut()
            started = time.monotonic()
            with pytest.raises(UserQuestionError) as info:
                await asker.get(record.id)
            assert info.value.code == STORE_UNAVAILABLE
            assert time.monotonic() - started < 1.5
            _, done = await mutate(clicker, record.id, finish_if_open(answered_by="U7"))
            await asyncio.sleep(1.0)
            assert not waiting.done()  # still waiting (the ask's timeout/abort decide)

            await proxy.restore()
            assert await asyncio.wait_for(waiting, 10) == done
            assert await asker.get(record.id) == done
            alive = f"{store_prefix}:alive:{asker.process_id}"
            for _ in range(50):
                if await redis_admin.exists(alive):
                    break
                await asyncio.sleep(0.1)
            assert await redis_admin.exists(alive)
        finally:
            watch.close()
            await asker.close()
    mine = [r.getMessage() for r in caplog.records if f":{proxy.port}" in r.getMessage()]
    assert sum("lost Redis" in m for m in mine) == 1, mine
    assert sum("reconnected" in m for m in mine) == 1, mine


@pytest.mark.slow
async def test_a_half_open_subscription_is_noticed_and_replaced(
    proxy: _Proxy, store_prefix: str, redis_store: RedisPendingStore
) -> None:
    """Pub/sub that silently stops delivering (no RST) is dropped after heartbeat_ttl."""
    clicker = redis_store
    asker = RedisPendingStore(
        proxy.url,
        prefix=store_prefix,
        heartbeat_interval=0.2,
        heartbeat_ttl=0.8,
        op_timeout=1.0,
    )
    async with asyncio.timeout(20):
        await asker.start()
        record = make_record(clicker.process_id)
        await clicker.create(record)
        watch = asker.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.1)
            proxy.freeze()
            _, done = await mutate(clicker, record.id, finish_if_open())
            assert await asyncio.wait_for(waiting, 10) == done
        finally:
            watch.close()
            await asker.close()


@pytest.mark.slow
async def test_a_wait_fails_with_store_unavailable_after_the_outage_limit(
    proxy: _Proxy, store_prefix: str
) -> None:
    """Redis gone for longer than ``outage_limit``: the waiting ask fails, it never hangs."""
    asker = RedisPendingStore(
        proxy.url,
        prefix=store_prefix,
        heartbeat_interval=0.2,
        heartbeat_ttl=30,
        op_timeout=0.3,
        outage_limit=1.0,
    )
    async with asyncio.timeout(20):
        await asker.start()
        record = make_record(asker.process_id)
        await asker.create(record)
        watch = asker.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.1)
            await proxy.cut()
            started = time.monotonic()
            with pytest.raises(UserQuestionError) as info:
                await waiting
            elapsed = time.monotonic() - started
            assert info.value.code == STORE_UNAVAILABLE
            assert "unreachable" in info.value.message
            assert 0.9 <= elapsed < 5.0
        finally:
            watch.close()
            await proxy.restore()
            await asker.close()


# -- Redis killed and started again: the append-only file ---------------------------------


async def _started(
    stack: contextlib.AsyncExitStack, url: str, prefix: str, **options: Any
) -> RedisPendingStore:
    """A started Redis store (a client of its own), closed when ``stack`` closes."""
    store = RedisPendingStore(url, prefix=prefix, **options)
    stack.push_async_callback(store.close)
    await store.start()
    return store


async def _write_a_run(store: RedisPendingStore) -> list[str]:
    """What a run leaves, every change with its event: the ids of ``open`` (this process's,
    two draft saves), ``placed`` (nobody's: a bookkeeping write, then an event of no write),
    ``reopened`` (nobody's: failed, asked again, a draft saved), ``answered`` (a draft, then
    the answer) and ``cancelled``, in that order."""
    me = store.process_id
    open_, placed, reopened, answered = (make_record(me) for _ in range(4))
    placed = placed.model_copy(update={"owner": None, "allowed_users": ["U1", "U2"]})
    reopened = reopened.model_copy(update={"owner": None})
    cancelled = make_record(me).model_copy(update={"owner": None})
    for record in (open_, reopened, answered, cancelled):
        assert await store.create(record, asked_event(record, by="api:alpha", link=None))
    assert await store.create(placed)
    _, posted = await mutate(store, placed.id, lambda r: r.next(message_ts="1700000000.000100"))
    assert posted is not None
    link = "https://t.slack.com/archives/C0123456/p1700000000000100"
    await store.append_event(asked_event(posted, by="api:alpha", link=link))

    def ticks(*selected: int) -> Callable[[PendingRecord], PendingRecord]:
        return lambda r: r.next(drafts=[Draft(selected=list(selected))])

    for request_id, change in (
        (open_.id, ticks(0)),
        (open_.id, ticks(0, 1)),
        (reopened.id, finish_if_open("failed", error_code="ASK_TIMEOUT", note="No answer.")),
        (reopened.id, lambda r: r.next(state="pending", note="Asked again.", finished_at=None)),
        (reopened.id, ticks(1)),
        (answered.id, ticks(1)),
        (answered.id, finish_if_open(answered_by="U2", answered_by_name="bob")),
        (cancelled.id, finish_if_open("cancelled", note="The agent withdrew it.")),
    ):
        _, written = await mutate(store, request_id, change, by="U1", by_name="alice")
        assert written is not None
    return [open_.id, placed.id, reopened.id, answered.id, cancelled.id]


@dataclass(frozen=True)
class _Kept:
    """What a Redis store holds of some questions, as any client reads it."""

    records: list[PendingRecord | None]
    trails: list[list[AuditEvent]]
    export: list[AuditEvent]
    """``audit(since)``: every event of the run, in the order appended."""
    open_ids: set[str]
    owned: dict[str, set[str]]
    """The open ids each of the records' owners holds."""
    audiences: set[Audience]
    expiry: list[str]
    """Each record key's: ``kept`` (no TTL, as while pending), ``retention`` or ``gone``."""


async def _kept(store: RedisPendingStore, url: str, ids: list[str], since: float) -> _Kept:
    """What ``store`` reads of ``ids`` and of the events since ``since`` (the TTLs read
    from the server at ``url`` directly: the store has no reader for them)."""
    records = await store.get_many(ids)
    owners = {r.owner for r in records if r is not None and r.owner is not None}
    admin = aioredis.from_url(url)
    try:
        ttls = [await admin.pttl(f"{store.prefix}:req:{request_id}") for request_id in ids]
    finally:
        await admin.aclose()
    return _Kept(
        records=records,
        trails=[await store.events(request_id) for request_id in ids],
        export=[event async for event in store.audit(since)],
        open_ids={r.id for r in await store.open_records()},
        owned={o: {r.id for r in await store.open_records(owner=o)} for o in owners},
        audiences=set(await store.open_audiences()),
        expiry=["gone" if t == -2 else "kept" if t == -1 else "retention" for t in ttls],
    )


async def test_redis_killed_and_started_again_with_its_append_only_file_loses_nothing(
    tmp_path: Path, store_prefix: str
) -> None:
    """A private redis-server (``--appendonly yes --appendfsync always``) is killed with
    SIGKILL, no SHUTDOWN and no snapshot, so only the append-only file can bring anything
    back: a new client on the server started again reads every record at its version, the
    index sets, each question's trail and the export as they were, and writes on."""
    async with asyncio.timeout(60), contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(RedisServer.start(tmp_path / "redis"))
        # the writer stays connected (its heartbeat outlives the test: nothing is swept)
        writer = await _started(
            stack, server.url, store_prefix, heartbeat_interval=0.5, heartbeat_ttl=120
        )
        since = time.time() - 1
        ids = await _write_a_run(writer)
        before = await _kept(writer, server.url, ids, since)
        assert [(r.state, r.version) for r in before.records if r is not None] == [
            ("pending", 2),
            ("pending", 1),
            ("pending", 3),
            ("answered", 2),
            ("cancelled", 1),
        ]
        assert [[(e.kind, e.version) for e in trail] for trail in before.trails] == [
            [("asked", 0), ("changed", 1), ("changed", 2)],
            [("asked", 1)],
            [("asked", 0), ("failed", 1), ("reopened", 2), ("changed", 3)],
            [("asked", 0), ("changed", 1), ("answered", 2)],
            [("asked", 0), ("cancelled", 1)],
        ]
        assert sorted(e.dump() for e in before.export) == sorted(
            e.dump() for trail in before.trails for e in trail
        )
        assert before.open_ids == set(ids[:3]) and before.owned == {writer.process_id: {ids[0]}}
        assert len(before.audiences) == 3
        assert before.expiry == ["kept", "kept", "kept", "retention", "retention"]
        assert await writer.open_count() == OpenCount(total=3, mine=1, unowned=2)

        await server.restart(signal.SIGKILL)  # no SHUTDOWN: nothing saved on the way out
        assert server.starts == 2
        reader = await _started(stack, server.url, store_prefix)
        assert await _kept(reader, server.url, ids, since) == before
        assert await reader.open_count() == OpenCount(total=3, mine=0, unowned=2)

        # and both clients write on where the run stopped
        _, done = await mutate(reader, ids[0], finish_if_open(answered_by="U3"))
        assert done is not None and done.version == 3
        assert await writer.get(ids[0]) == done  # the writer reconnected on its own
        trail = await writer.events(ids[0])
        assert trail[:3] == before.trails[0] and [e.kind for e in trail[3:]] == ["answered"]
        first = before.records[0]
        assert first is not None  # the write the reader's won over is refused
        assert not await writer.compare_and_set(first.next(label="late"))
        assert await reader.open_count() == OpenCount(total=2, mine=0, unowned=2)


async def test_redis_killed_without_an_append_only_file_comes_back_empty(
    tmp_path: Path, store_prefix: str
) -> None:
    """The converse, which shows the restart above is one: with no append-only file (and no
    snapshot) the same run is gone after the SIGKILL."""
    async with asyncio.timeout(60), contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            RedisServer.start(tmp_path / "redis", appendonly=False)
        )
        writer = await _started(
            stack, server.url, store_prefix, heartbeat_interval=0.5, heartbeat_ttl=120
        )
        since = time.time() - 1
        ids = await _write_a_run(writer)
        assert len((await _kept(writer, server.url, ids, since)).export) == 13
        await server.restart(signal.SIGKILL)
        reader = await _started(stack, server.url, store_prefix)
        assert await _kept(reader, server.url, ids, since) == _Kept(
            records=[None] * 5,
            trails=[[] for _ in ids],
            export=[],
            open_ids=set(),
            owned={},
            audiences=set(),
            expiry=["gone"] * 5,
        )
        assert await reader.open_count() == OpenCount(total=0, mine=0, unowned=0)
