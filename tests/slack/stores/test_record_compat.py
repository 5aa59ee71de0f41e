"""Rolling deploys: a record stored by a newer version of the bot stays readable here.

A newer version adds fields to ``PendingRecord`` (``detached``, ``asked_by``, ``reminded``,
``escalated`` and ``shown_sha256`` each came later). An older process still running beside
it must read such a record (ignoring what it does not know), so its waiters wake, its
``get`` answers and its clicks apply. Outside input (the HTTP API, the seam) stays strict.
A stored record this version cannot read at all ends its waiters with a clear error and
``get`` raises ``UserQuestionError``: nobody is left waiting on it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import pytest
from pydantic import ValidationError

from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.stores import SqlitePendingStore, mutate
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionItem

RedisStoreFactory = Callable[..., Awaitable[RedisPendingStore]]
SqliteStoreFactory = Callable[..., Awaitable[SqlitePendingStore]]


class NewerRecord(PendingRecord):
    """The record as a newer version of the bot stores it: one field more."""

    answer_source: str | None = None


NewerState = Literal["pending", "answered", "cancelled", "aborted", "failed", "expired"]


class NewerStatesRecord(PendingRecord):
    """A newer version's record this version cannot read: a state it does not know."""

    state: NewerState = "pending"  # type: ignore[assignment]


def make_record(owner: str | None) -> PendingRecord:
    return PendingRecord(
        id=f"r-{uuid.uuid4().hex[:12]}",
        owner=owner,
        questions=[AskUserQuestionItem(id="q1", question="Ship it?")],
        channel="C0123456",
    )


def answered_by_newer(record: PendingRecord) -> NewerRecord:
    """``record`` answered by a newer process, which keeps its new field in it."""
    ended = record.next(state="answered", answered_by="U1", finished_at=time.time())
    return NewerRecord(**ended.model_dump(), answer_source="button")


# -- the record itself --------------------------------------------------------------------


def test_a_stored_record_with_fields_this_version_does_not_know_loads() -> None:
    record = make_record("old").next(drafts=[Draft(selected=[0])])
    newer = NewerRecord(**record.model_dump(), answer_source="button")
    raw = newer.dump()
    assert '"answer_source":"button"' in raw
    assert PendingRecord.load(raw) == record
    # unknown fields inside the stored record's parts (a draft, a question) as well
    nested = raw.replace('"selected":[0]', '"selected":[0],"typed_at":1.5').replace(
        '"question":"Ship it?"', '"question":"Ship it?","hint":"new"'
    )
    assert nested != raw
    assert PendingRecord.load(nested) == record


def test_outside_input_stays_strict() -> None:
    raw = NewerRecord(**make_record(None).model_dump(), answer_source="x").dump()
    with pytest.raises(ValidationError, match="extra_forbidden"):
        PendingRecord.model_validate_json(raw)
    with pytest.raises(ValidationError, match="extra_forbidden"):
        AskUserQuestionItem.model_validate({"id": "q", "question": "Ship it?", "hint": "x"})
    with pytest.raises(ValidationError, match="extra_forbidden"):
        Draft.model_validate({"selected": [], "typed_at": 1})


def test_a_stored_record_that_cannot_be_read_is_a_user_question_error() -> None:
    raw = make_record("old").dump().replace('"state":"pending"', '"state":"expired"')
    with pytest.raises(UserQuestionError) as info:
        PendingRecord.load(raw)
    assert info.value.code == STORE_UNAVAILABLE
    assert "cannot read" in info.value.message
    with pytest.raises(UserQuestionError):
        PendingRecord.load("{not json")


# -- Redis: an older process beside a newer one ---------------------------------------------


async def test_redis_waiter_wakes_on_an_ending_a_newer_version_stored(
    redis_store_factory: RedisStoreFactory,
) -> None:
    async with asyncio.timeout(20):
        old: RedisPendingStore = await redis_store_factory(process_id="old")
        new: RedisPendingStore = await redis_store_factory(process_id="new")
        record = make_record(old.process_id)
        assert await old.create(record)
        watch = old.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0)  # the wait begins (and looks once) before the answer
            assert await new.compare_and_set(answered_by_newer(record))
            woke = await waiting
        finally:
            watch.close()
        assert woke.state == "answered" and woke.answered_by == "U1"
        got = await old.get(record.id)
        assert got is not None and got.state == "answered" and got.version == 1
        assert await old.get_many([record.id]) == [got]
        # the older process still writes it (bookkeeping), by compare-and-set
        _, noted = await mutate(old, record.id, lambda r: r.next(note="seen by the old one"))
        assert noted is not None and noted.version == 2


async def test_redis_open_records_of_a_newer_version_are_listed(
    redis_store_factory: RedisStoreFactory,
) -> None:
    async with asyncio.timeout(20):
        old = await redis_store_factory(process_id="old")
        new = await redis_store_factory(process_id="new")
        record = make_record(new.process_id)
        assert await new.create(NewerRecord(**record.model_dump(), answer_source="api"))
        assert [r.id for r in await old.open_records()] == [record.id]


async def test_redis_waiter_on_a_record_it_cannot_read_ends_with_an_error(
    redis_store_factory: RedisStoreFactory,
) -> None:
    async with asyncio.timeout(20):
        old = await redis_store_factory(process_id="old")
        new = await redis_store_factory(process_id="new")
        record = make_record(old.process_id)
        assert await old.create(record)
        watch = old.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0)
            ended = NewerStatesRecord(
                **record.next(finished_at=time.time()).model_dump(exclude={"state"}),
                state="expired",
            )
            assert await new.compare_and_set(ended)
            with pytest.raises(UserQuestionError) as info:
                await waiting
        finally:
            watch.close()
        assert info.value.code == STORE_UNAVAILABLE
        assert record.id in info.value.message and "cannot read" in info.value.message
        with pytest.raises(UserQuestionError) as got:
            await old.get(record.id)
        assert got.value.code == STORE_UNAVAILABLE
        # a watch begun after the ending fails at once as well
        late = old.watch(record.id)
        try:
            with pytest.raises(UserQuestionError):
                await late.wait()
        finally:
            late.close()
        assert old.watch_count == 0


# -- SQLite: the same file, an older process beside a newer one -------------------------------


async def test_sqlite_waiter_wakes_on_an_ending_a_newer_version_stored(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    async with asyncio.timeout(20):
        old: SqlitePendingStore = await sqlite_store_factory(process_id="old")
        new: SqlitePendingStore = await sqlite_store_factory(process_id="new")
        record = make_record(old.process_id)
        assert await old.create(record)
        watch = old.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0)
            assert await new.compare_and_set(answered_by_newer(record))

            def stored() -> str:
                with sqlite3.connect(sqlite_path) as db:
                    row = db.execute("SELECT json FROM records WHERE id = ?", (record.id,))
                    return str(row.fetchone()[0])

            assert '"answer_source":"button"' in await asyncio.to_thread(stored)  # in the file
            got = await old.get(record.id)
            assert got is not None and got.state == "answered" and got.answered_by == "U1"
            assert await old.get_many([record.id]) == [got]
            woke = await waiting
        finally:
            watch.close()
        assert woke.state == "answered"
        _, noted = await mutate(old, record.id, lambda r: r.next(note="seen by the old one"))
        assert noted is not None and noted.version == 2


async def test_sqlite_open_records_of_a_newer_version_are_listed(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    async with asyncio.timeout(20):
        old = await sqlite_store_factory(process_id="old")
        new = await sqlite_store_factory(process_id="new")
        record = make_record(new.process_id)
        assert await new.create(NewerRecord(**record.model_dump(), answer_source="api"))
        assert [r.id for r in await old.open_records()] == [record.id]
