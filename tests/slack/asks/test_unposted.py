"""A question's record before its message is posted (issue 14).

A note or a release written while the post is on its way (waiting its turn, or Slack slow
to answer) is shown on the message once the post's ts is stored: the post's render is
older than the record by then. An API question (detached) whose process stopped or died
before posting it is posted by exactly one live process: a stop sends none of its queued
posts, the orphan sweeps of two processes take a lost one's question once (compare-and-set),
and of two bots starting at once only one posts a question left owned by nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest

from adapters.slack.asks.endings import Released
from adapters.slack.clicks.bolt_app import build_app, close_web_client, web_client
from adapters.slack.model.record import PendingRecord
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.provider import SlackQuestionProvider
from bot.questions import AskOptions, AskUserQuestionRequest, UserQuestionError
from bot.questions.abort import AbortController
from tests.e2e.test_multiprocess import eventually
from tests.slack_harness import SECRET, SlackHarness, all_text, until

pytestmark = pytest.mark.timeout(60)

SLOW_STORED: dict[str, Any] = {"method": "chat.postMessage", "kind": "slow_stored", "delay": 1.0}


def one(question: str = "Deploy 2.3.1?") -> dict[str, Any]:
    return {"questions": [{"id": "q", "question": question, "options": [{"label": "Yes"}]}]}


@pytest.mark.slow
async def test_a_note_written_before_the_ts_is_stored_is_shown_on_the_message() -> None:
    async with SlackHarness() as h:
        h.slack.faults.add(**SLOW_STORED)  # stored at once, answered a second later
        h.ask(one())
        message = await h.posted()
        (record,) = await h.provider.store.open_records()
        assert record.message_ts is None  # the post has not come back yet
        await h.provider.add_note(record.id, "Asked again by the nightly job.")
        await until(
            lambda: "Asked again by the nightly job." in all_text(h.current(message).blocks),
            what="the note on the message",
        )
        stored = await h.provider.store.get(record.id)
        assert stored is not None and stored.message_ts == message.ts and stored.is_open


# -- a detached question whose message was never posted: taken up by exactly one process --


def stranded(owner: str | None, request_id: str | None = None) -> PendingRecord:
    """An API question's record whose message was never posted (asked of ``owner``)."""
    questions = AskUserQuestionRequest.model_validate(one("Rotate the keys?")).questions
    return PendingRecord(
        id=request_id or f"r{uuid.uuid4().hex[:12]}",
        owner=owner,
        detached=True,
        questions=list(questions),
        channel="C0STRANDED",
        asked_by="api",
    )


async def test_two_sqlite_sweeps_take_a_lost_processes_unposted_question_once(
    sqlite_store_factory: Any,
) -> None:
    await sweeps_take_it_once(await sqlite_store_factory(), await sqlite_store_factory())


async def test_two_redis_sweeps_take_a_lost_processes_unposted_question_once(
    redis_store_factory: Any,
) -> None:
    await sweeps_take_it_once(await redis_store_factory(), await redis_store_factory())


async def sweeps_take_it_once(first: Any, second: Any) -> None:
    """Two processes sweep at once: one takes the unposted API question (not failed), and
    an in-process ask's question of the lost process still fails ``OWNER_LOST``."""
    unposted = stranded("gone-process")
    asked_in_process = stranded("gone-process").model_copy(update={"detached": False})
    for record in (unposted, asked_in_process):
        assert await first.create(record)
    stores = (first, second)
    swept = await asyncio.gather(first.sweep_orphans(), second.sweep_orphans())
    taken = [(s, r) for s, found in zip(stores, swept, strict=True) for r in found if r.is_open]
    assert len(taken) == 1, swept  # one sweep took it, by compare-and-set
    store, record = taken[0]
    assert (record.id, record.owner, record.detached) == (unposted.id, store.process_id, True)
    stored = await first.get(unposted.id)
    assert stored is not None and stored.is_open and stored.owner == store.process_id
    ended = await first.get(asked_in_process.id)
    assert ended is not None and ended.error_code == "OWNER_LOST"


@pytest.mark.slow
async def test_two_starting_bots_post_a_question_left_unposted_exactly_once(
    sqlite_store_factory: Any,
) -> None:
    mine = await sqlite_store_factory()
    async with SlackHarness(store=mine) as h:
        other_store = await sqlite_store_factory()
        client = web_client(h.slack.token, base_url=h.slack.url, limits=h.limits)
        try:
            app = await build_app(client, signing_secret=SECRET)
            other = SlackQuestionProvider(app, channel=h.channel, store=other_store)
            record = stranded(None).model_copy(update={"channel": h.channel})
            assert await mine.create(record)
            adopted = await asyncio.gather(h.provider.resume(), other.resume())
            # Both look for it; one may find it claimed by the other already ...
            assert 1 <= sum(len(found) for found in adopted) <= 2
            message = await h.posted()
            stored = await eventually(lambda: _posted(mine, record.id), what="the ts stored")
            assert stored.owner is None and stored.message_ts == message.ts
            assert request_of(message) == record.id
            watch = mine.watch(record.id)
            try:
                await h.click(message, h.alice, text="Yes")
                ended = await asyncio.wait_for(watch.wait(), 5)
            finally:
                watch.close()
            assert ended.state == "answered"
            assert len(h.top_messages()) == 1  # ... and only one posted it
            assert h.slack.calls.count("chat.postMessage") == 1
            await other.aclose(grace=1.0)
        finally:
            await close_web_client(client)


async def _posted(store: Any, request_id: str) -> PendingRecord | None:
    record: PendingRecord | None = await store.get(request_id)
    return record if record is not None and record.message_ts is not None else None


def request_of(message: Any) -> str:
    request_id: str = message.metadata["event_payload"]["request_id"]
    return request_id


@pytest.mark.slow
async def test_a_stop_never_sends_a_queued_detached_post_and_leaves_it_to_the_next(
    sqlite_store_factory: Any,
) -> None:
    # Posts of API questions wait their turn (a slow post ahead of them in the channel);
    # a stop takes them off the queue unsent, and keeps them open, this process's still.
    store = await sqlite_store_factory()
    async with SlackHarness(store=store, limits=SlackLimits(time_scale=2.0)) as h:
        waiters = [AbortController() for _ in range(6)]
        asks = [
            h.ask(one(f"Question {i}?"), options=AskOptions(detached=True), signal=w.signal)
            for i, w in enumerate(waiters)
        ]
        await h.posted()
        for waiter in waiters:  # as the HTTP API does at a stop
            waiter.abort(Released())
        await h.provider.aclose(grace=2.0)
        for task in asks:
            with contextlib.suppress(UserQuestionError):
                await task
        posted = len(h.top_messages())
        records = await store.open_records()
        assert len(records) == 6  # none ended
        unposted = [r for r in records if r.message_ts is None]
        assert len(unposted) == 6 - posted and unposted  # posts were still queued
        assert all(r.owner == store.process_id and r.detached for r in unposted)
        assert all(r.owner is None for r in records if r.message_ts is not None)
        await asyncio.sleep(1.5)  # their turn would have come by now
        assert len(h.top_messages()) == posted == h.slack.calls.count("chat.postMessage")
