"""``Waits``: the deadlines of questions other processes asked, kept through a store blip
and after a release, on a real SQLite store."""

from __future__ import annotations

import gc
import logging
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.asks import deadlines
from adapters.slack.asks.deadlines import Crew, SystemClock
from adapters.slack.asks.waits import Waits
from adapters.slack.stores import SqlitePendingStore, mutate
from bot.questions import UserQuestionError
from bot.questions.errors import STORE_UNAVAILABLE
from tests.slack.stores.test_store_contract import make_record
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlitePendingStore]:
    opened = SqlitePendingStore(tmp_path / "q.db", process_id="this-bot")
    await opened.start()
    try:
        yield opened
    finally:
        await opened.close()


def follower(store: SqlitePendingStore) -> Waits:
    """The deadline keeping of a running bot (no Slack call is due within the test)."""
    log = logging.getLogger("tests.follow")
    return Waits(Crew(None, store, None, None, SystemClock(), log))  # type: ignore[arg-type]


async def asked(store: SqlitePendingStore, owner: str | None, due_in: float = 3600) -> str:
    """A posted question due in ``due_in`` s, owned by ``owner`` (``None``: the HTTP API's)."""
    record = make_record("other-bot").model_copy(
        update={"owner": owner, "deadline": time.time() + due_in, "message_ts": "1.2"}
    )
    assert await store.create(record)
    return record.id


async def test_a_deadline_due_in_a_store_blip_is_kept_until_the_store_is_back(
    store: SqlitePendingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rid = await asked(store, None, due_in=0.2)
    record = await store.get(rid)
    assert record is not None
    real, failed, ended = store.get, [], []

    async def get(request_id: str) -> Any:
        if len(failed) < 3:
            failed.append(request_id)
            raise UserQuestionError("the store is out of reach", STORE_UNAVAILABLE)
        return await real(request_id)

    class Endings:
        async def end(self, request_id: str, *_: Any) -> None:
            ended.append(request_id)

    monkeypatch.setattr(store, "get", get)
    monkeypatch.setattr(deadlines, "RETRY", 0.05)
    log = logging.getLogger("tests.follow")
    waits = Waits(Crew(None, store, None, Endings(), SystemClock(), log))  # type: ignore[arg-type]
    try:
        assert waits.keep(record)
        await until(lambda: ended == [rid], what="the expiry, once the store answers")
        assert len(failed) == 3  # due, and tried again through the blip
        await until(lambda: waits.keeper_count == 0, what="nothing left to keep")
    finally:
        await waits.close()


async def test_a_question_released_by_its_owner_is_kept_within_a_few_looks(
    store: SqlitePendingStore,
) -> None:
    rid = await asked(store, "other-bot")
    mine = await asked(store, "this-bot")
    waits = follower(store)
    try:
        assert await waits.follow_once() == 0  # its owner's waiter keeps it
        await mutate(store, rid, lambda r: r.next(owner=None))  # that bot stopped: released
        started = [await waits.follow_once() for _ in range(deadlines.RELOOK_OWNED)]
        assert sum(started) == 1 and waits.keeper_count == 1
        await mutate(store, mine, lambda r: r.next(owner=None))
        assert [await waits.follow_once() for _ in range(deadlines.RELOOK_OWNED)] == [0] * 6
    finally:
        await waits.close()


async def test_a_followed_question_that_ended_elsewhere_is_forgotten_at_the_next_look(
    store: SqlitePendingStore,
) -> None:
    rid = await asked(store, None)
    waits = follower(store)
    try:
        assert await waits.follow_once() == 1 and waits.keeper_count == 1
        await mutate(store, rid, lambda r: r.next(state="answered", finished_at=time.time()))
        assert await waits.follow_once() == 0
        assert waits.keeper_count == 0  # not held until its deadline
    finally:
        await waits.close()


async def test_a_question_kept_after_a_look_that_ended_elsewhere_is_forgotten_at_the_next(
    store: SqlitePendingStore,
) -> None:
    """Kept between two looks (taken over as an orphan, or rejoined), not by the look itself."""
    rid = await asked(store, "other-bot")
    waits = follower(store)
    try:
        assert await waits.follow_once() == 0  # owned by a live process: not kept
        record = await store.get(rid)
        assert record is not None and waits.keep(record) and waits.keeper_count == 1
        await mutate(store, rid, lambda r: r.next(state="answered", finished_at=time.time()))
        await waits.follow_once()
        assert waits.keeper_count == 0  # not held until its deadline
    finally:
        await waits.close()


async def test_a_question_kept_while_a_look_reads_the_store_is_not_forgotten_by_it(
    store: SqlitePendingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process asks (stores, then keeps) while a look's read of the open ids is on its
    way: the look's older list lacks it, and it stays kept."""
    waits = follower(store)
    real = store.open_audiences
    kept: list[str] = []

    async def reading() -> Any:
        listed = await real()  # the look's list, read before the ask below
        rid = await asked(store, "this-bot")
        record = await store.get(rid)
        assert record is not None and waits.keep(record)
        kept.append(rid)
        return listed

    try:
        monkeypatch.setattr(store, "open_audiences", reading)
        await waits.follow_once()
        monkeypatch.setattr(store, "open_audiences", real)
        assert kept and waits.keeper_count == 1
        await waits.follow_once()
        assert waits.keeper_count == 1  # open: kept until it ends
    finally:
        await waits.close()


async def test_following_open_questions_with_no_deadline_keeps_only_their_ids(
    store: SqlitePendingStore,
) -> None:
    """Looked at once each (each one's id kept, so it is not read again), nothing more: a bot
    may follow thousands of open API questions."""
    for _ in range(500):
        record = make_record("other-bot").model_copy(update={"owner": None, "message_ts": "1.2"})
        assert await store.create(record)
    waits = follower(store)
    try:
        await waits.follow_once()  # the store's and the loop's first-use allocations
        gc.collect()
        tracemalloc.start()
        try:
            for _ in range(3):
                assert await waits.follow_once() == 0
            gc.collect()
            mine = [tracemalloc.Filter(True, deadlines.__file__)]  # not the store's caches
            held = tracemalloc.take_snapshot().filter_traces(mine).statistics("filename")
        finally:
            tracemalloc.stop()
        assert waits.keeper_count == 0
        per = sum(stat.size for stat in held) / 500
        assert per < 100, f"{per:.0f} bytes kept per open question"
    finally:
        await waits.close()
