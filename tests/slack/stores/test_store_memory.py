"""MemoryPendingStore and mutate: compare-and-set, endings, watches, expiry.

What every store must do is also in test_pending_contract.py; this file pins down the
in-process store's own behaviour (copies, the expiry clock, watch bookkeeping) and
``mutate``'s retry loop against a writer that keeps getting in first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.stores import MemoryPendingStore, StoreConflict, mutate
from adapters.slack.stores import memory as pending
from bot.questions.models import AskUserQuestionItem

RID = "0123456789abcdef0123"
OTHER = "fedcba9876543210fedc"


def record(request_id: str = RID, owner: str = "proc-1", **fields: Any) -> PendingRecord:
    question = AskUserQuestionItem(id="q", question="Go?")
    return PendingRecord(
        id=request_id, owner=owner, channel="C0QUESTION", questions=[question], **fields
    )


class Contended(MemoryPendingStore):
    """A store where another writer (a click, another process) gets in before each of our
    next ``rivals`` writes, with the change ``rival`` makes to the current record."""

    def __init__(
        self, rival: Callable[[PendingRecord], PendingRecord], rivals: int = 1_000_000
    ) -> None:
        super().__init__()
        self._rival = rival
        self.rivals = rivals

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        if self.rivals:
            self.rivals -= 1
            current = await self.get(record.id)
            assert current is not None
            assert await super().compare_and_set(self._rival(current))
        return await super().compare_and_set(record, event)


class Clock:
    """Stands in for the ``time`` module inside pending.py (only ``monotonic`` is used)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(pending, "time", fake)
    return fake


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


# --- create / get / compare_and_set ----------------------------------------------------


async def test_create_then_get_and_no_duplicate() -> None:
    store = MemoryPendingStore()
    assert await store.get(RID) is None
    assert await store.create(record()) is True
    assert await store.create(record(note="second")) is False
    got = await store.get(RID)
    assert got is not None and got.note is None
    assert got.model_dump(exclude={"created_at"}) == record().model_dump(exclude={"created_at"})


async def test_store_keeps_its_own_copies() -> None:
    store = MemoryPendingStore()
    original = record(drafts=[Draft(selected=[1])])
    await store.create(original)
    original.drafts[0].selected.append(2)
    got = await store.get(RID)
    assert got is not None and got.drafts[0].selected == [1]
    got.drafts[0].selected.append(3)
    again = await store.get(RID)
    assert again is not None and again.drafts[0].selected == [1]
    written = again.next(note="x")
    assert await store.compare_and_set(written)
    written.note = "changed after the write"
    final = await store.get(RID)
    assert final is not None and final.note == "x"


async def test_compare_and_set_needs_the_next_version() -> None:
    store = MemoryPendingStore()
    await store.create(record())
    current = await store.get(RID)
    assert current is not None and current.version == 0
    assert await store.compare_and_set(current) is False  # same version
    assert await store.compare_and_set(current.next().next()) is False  # skips one
    assert await store.compare_and_set(current.next(note="a")) is True
    assert await store.compare_and_set(current.next(note="b")) is False  # stale base
    stored = await store.get(RID)
    assert stored is not None and (stored.version, stored.note) == (1, "a")
    assert await store.compare_and_set(record(OTHER).next()) is False  # never created


async def test_an_ending_is_final_the_second_ending_loses() -> None:
    store = MemoryPendingStore()
    await store.create(record())
    base = await store.get(RID)
    assert base is not None
    answered = base.next(state="answered", answered_by="U1")
    cancelled = base.next(state="cancelled", answered_by="U2")
    assert await store.compare_and_set(answered) is True
    assert await store.compare_and_set(cancelled) is False  # same base: version lost
    after = await store.get(RID)
    assert after is not None
    for state in ("cancelled", "aborted", "failed"):  # on the fresh base: still refused
        assert await store.compare_and_set(after.next(state=state)) is False
    final = await store.get(RID)
    assert final is not None and (final.state, final.answered_by) == ("answered", "U1")


async def test_a_finished_record_still_takes_bookkeeping_in_its_state() -> None:
    """The provider records the message ts even when a click beat the post."""
    store = MemoryPendingStore()
    await store.create(record())
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="answered"))
    done = await store.get(RID)
    assert done is not None
    assert await store.compare_and_set(done.next(message_ts="1.2")) is True
    stored = await store.get(RID)
    assert stored is not None and (stored.state, stored.message_ts) == ("answered", "1.2")


# --- watches ---------------------------------------------------------------------------


async def test_watch_resolves_on_the_ending_and_not_before() -> None:
    store = MemoryPendingStore()
    await store.create(record())
    watch = store.watch(RID)
    waiting = asyncio.ensure_future(watch.wait())
    base = await store.get(RID)
    assert base is not None
    saved = base.next(drafts=[Draft(selected=[0])])
    assert await store.compare_and_set(saved)
    await settle()
    assert not waiting.done()  # a draft is not an ending
    assert await store.compare_and_set(saved.next(state="answered", answered_by="U1"))
    ended = await asyncio.wait_for(waiting, 1)
    assert (ended.state, ended.answered_by, ended.version) == ("answered", "U1", 2)
    watch.close()
    assert store.watch_count == 0


async def test_watch_registered_before_create_still_resolves() -> None:
    store = MemoryPendingStore()
    watch = store.watch(RID)
    assert store.watch_count == 1
    waiting = asyncio.ensure_future(watch.wait())
    await store.create(record())
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="cancelled"))
    assert (await asyncio.wait_for(waiting, 1)).state == "cancelled"
    watch.close()
    assert store.watch_count == 0


async def test_watch_after_the_ending_returns_at_once() -> None:
    store = MemoryPendingStore()
    await store.create(record())
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="aborted", note="bye"))
    watch = store.watch(RID)
    ended = await asyncio.wait_for(watch.wait(), 1)
    assert (ended.state, ended.note) == ("aborted", "bye")
    watch.close()


async def test_an_ending_resumes_its_waiter_before_work_started_after_it() -> None:
    # The provider starts the message update right after the winning write; the person's
    # answer must reach the waiting ask() first (no extra loop turns in between).
    store = MemoryPendingStore()
    await store.create(record())
    watch = store.watch(RID)
    waiter = asyncio.ensure_future(watch.wait())
    await asyncio.sleep(0)  # the waiter is now blocked on the watch
    base = await store.get(RID)
    assert base is not None
    seen_by_later_work: list[bool] = []

    async def later_work() -> None:
        seen_by_later_work.append(waiter.done())

    await store.compare_and_set(base.next(state="answered", answered_by="U1"))
    await asyncio.ensure_future(later_work())
    assert seen_by_later_work == [True]
    assert (await waiter).answered_by == "U1"
    watch.close()


async def test_the_waiter_gets_its_own_copy_of_the_ending() -> None:
    store = MemoryPendingStore()
    await store.create(record(drafts=[Draft(selected=[0])]))
    watches = [store.watch(RID), store.watch(RID)]
    waits = [asyncio.ensure_future(w.wait()) for w in watches]
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="answered"))
    first, second = await asyncio.wait_for(asyncio.gather(*waits), 1)
    first.drafts[0].selected.append(9)
    assert second.drafts[0].selected == [0]
    stored = await store.get(RID)
    assert stored is not None and stored.drafts[0].selected == [0]
    for watch in watches:
        watch.close()


async def test_every_watch_wakes_and_only_its_request_does() -> None:
    store = MemoryPendingStore()
    await store.create(record())
    await store.create(record(OTHER))
    watches = [store.watch(RID), store.watch(RID), store.watch(OTHER)]
    assert store.watch_count == 3
    waits = [asyncio.ensure_future(w.wait()) for w in watches]
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="answered"))
    await asyncio.wait_for(asyncio.gather(*waits[:2]), 1)
    await settle()
    assert not waits[2].done()
    for watch in watches:
        watch.close()
        watch.close()  # idempotent
    assert store.watch_count == 0
    waits[2].cancel()


async def test_cancelling_a_wait_does_not_break_the_watch() -> None:
    store = MemoryPendingStore()
    await store.create(record())
    watch = store.watch(RID)
    first = asyncio.ensure_future(watch.wait())
    await settle()
    first.cancel()
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="failed"))
    assert (await asyncio.wait_for(watch.wait(), 1)).state == "failed"
    watch.close()
    assert store.watch_count == 0


# --- mutate ----------------------------------------------------------------------------


async def test_mutate_returns_seen_and_written() -> None:
    store = MemoryPendingStore()
    assert await mutate(store, RID, lambda r: r.next()) == (None, None)
    await store.create(record())
    seen, written = await mutate(store, RID, lambda r: r.next(note="n"))
    assert seen is not None and written is not None
    assert (seen.version, written.version, written.note) == (0, 1, "n")
    seen, written = await mutate(store, RID, lambda r: None)
    assert seen is not None and seen.version == 1 and written is None


async def test_mutate_retries_when_another_writer_gets_in_first() -> None:
    store = Contended(lambda r: r.next(drafts=[Draft(selected=[r.version + 1])]), rivals=2)
    await store.create(record())
    calls: list[int] = []

    def change(current: PendingRecord) -> PendingRecord:
        calls.append(current.version)
        return current.next(note=f"decided on v{current.version}")

    seen, written = await mutate(store, RID, change)
    assert calls == [0, 1, 2]  # decided again on each fresh record
    assert seen is not None and written is not None
    assert seen.version == 2 and seen.drafts == [Draft(selected=[2])]
    assert (written.version, written.note) == (3, "decided on v2")
    stored = await store.get(RID)
    assert stored == written


async def test_mutate_gives_up_when_the_record_never_stops_changing() -> None:
    store = Contended(lambda r: r.next())
    await store.create(record())

    def change(current: PendingRecord) -> PendingRecord:
        return current.next()

    with pytest.raises(StoreConflict):
        await mutate(store, RID, change, attempts=3)


async def test_mutate_on_a_concurrent_ending_sees_the_ending() -> None:
    store = Contended(lambda r: r.next(state="answered", answered_by="U1"), rivals=1)
    await store.create(record())

    def change(current: PendingRecord) -> PendingRecord | None:
        if current.is_open:
            return current.next(state="cancelled")
        return None  # already ended: leave it

    seen, written = await mutate(store, RID, change)
    assert written is None and seen is not None and seen.state == "answered"


# --- open records and expiry -----------------------------------------------------------


async def test_open_records_by_owner() -> None:
    store = MemoryPendingStore(process_id="proc-1")
    assert store.process_id == "proc-1"
    await store.create(record("aaaaaaaa01", owner="proc-1"))
    await store.create(record("aaaaaaaa02", owner="proc-2"))
    await store.create(record("aaaaaaaa03", owner="proc-1"))
    done = await store.get("aaaaaaaa03")
    assert done is not None
    await store.compare_and_set(done.next(state="answered"))
    assert {r.id for r in await store.open_records()} == {"aaaaaaaa01", "aaaaaaaa02"}
    assert [r.id for r in await store.open_records("proc-1")] == ["aaaaaaaa01"]
    assert [r.id for r in await store.open_records("proc-2")] == ["aaaaaaaa02"]
    assert await store.open_records("proc-3") == []


async def test_finished_records_are_kept_for_the_ttl_then_dropped(clock: Clock) -> None:
    store = MemoryPendingStore(finished_ttl=60)
    await store.create(record())
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="answered", answered_by="U1"))
    clock.now += 59
    kept = await store.get(RID)
    assert kept is not None and kept.answered_by == "U1"  # late clicks learn who answered
    clock.now += 2
    assert await store.get(RID) is None
    assert await store.create(record()) is True  # the id (an idempotency key) is free again


async def test_open_records_never_expire(clock: Clock) -> None:
    store = MemoryPendingStore(finished_ttl=60)
    await store.create(record())
    clock.now += 1_000_000
    await store.create(record(OTHER))  # expiry also runs on create
    assert await store.get(RID) is not None
    assert [r.id for r in await store.open_records()] == [RID, OTHER]


async def test_the_ttl_counts_from_the_ending_not_the_creation(clock: Clock) -> None:
    store = MemoryPendingStore(finished_ttl=60)
    await store.create(record())
    clock.now += 500
    base = await store.get(RID)
    assert base is not None
    await store.compare_and_set(base.next(state="cancelled"))
    clock.now += 30
    assert await store.get(RID) is not None
    clock.now += 31
    assert await store.get(RID) is None


async def test_a_reopened_request_gets_a_fresh_ttl_when_it_ends_again(clock: Clock) -> None:
    """The provider may deliberately reopen an ended request (same key, new note)."""
    store = MemoryPendingStore(finished_ttl=60)
    await store.create(record())
    base = await store.get(RID)
    assert base is not None
    first = base.next(state="failed", note="no answer in time")
    await store.compare_and_set(first)
    clock.now += 10
    reopened = first.next(state="pending", note=None)
    if not await store.compare_and_set(reopened):  # see test_pending_contract's terminal rule
        pytest.skip("this store refuses to reopen an ended request")
    clock.now += 40
    assert await store.compare_and_set(reopened.next(state="answered", answered_by="U1"))
    clock.now += 15  # past the first ending's deadline, 15 s after the second ending
    kept = await store.get(RID)
    assert kept is not None and kept.state == "answered"
    clock.now += 46
    assert await store.get(RID) is None


async def test_the_memory_store_keeps_no_hash_chain() -> None:
    """``python -m bot audit`` says so for a store whose trail ends with its process."""
    assert await MemoryPendingStore().check_chain(0.0) is None
