"""A click the pending store cannot take in time: 200 to Slack, a private note, no traceback.

Under load (hundreds of clicks at once over two processes) a Redis operation can pass its
bound; bolt then answered Slack with a 500 and logged a traceback, and the person saw an
error icon with no word of what happened.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import SqlitePendingStore
from bot.questions import AskOptions, UserQuestionError
from bot.questions.errors import STORE_UNAVAILABLE
from tests.slack.asks.test_slack_provider import one
from tests.slack_harness import SlackHarness, message_ts_kept, until


class _Flaky:
    """Reads that can be made to time out like an overloaded Redis."""

    failing = False
    failing_once = False
    failed = 0

    async def get(self, request_id: str) -> PendingRecord | None:
        if self.failing or self.failing_once:
            self.failing_once = False
            self.failed += 1
            raise UserQuestionError("the pending store (Redis) could not get", STORE_UNAVAILABLE)
        got: PendingRecord | None = await super().get(request_id)  # type: ignore[misc]
        return got


class FlakySqliteStore(_Flaky, SqlitePendingStore):
    """A SQLite store whose reads can be made to fail (a store outside the process: a
    waiting ``ask()`` keeps its record's JSON for such a moment; with the memory store,
    which cannot fail so, it keeps none)."""


@pytest.mark.slow
async def test_a_click_the_store_cannot_take_is_acked_and_the_person_told(
    caplog: pytest.LogCaptureFixture, sqlite_path: Path
) -> None:
    store = FlakySqliteStore(path=sqlite_path, process_id="flaky")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            task = h.ask(one(options=["Deploy", "Wait"]))
            message = await h.posted()
            await message_ts_kept(store)
            store.failing = True
            with caplog.at_level(logging.WARNING):
                status, _ = await h.click(message, h.alice, text="Deploy")
            assert status == 200
            note = await until(lambda: h.ephemerals(h.alice))
            assert "not recorded" in note[-1].text and "try again" in note[-1].text
            assert not any(r.exc_info for r in caplog.records)
            store.failing = False
            await h.click(message, h.alice, text="Deploy")
            assert (await task).answers[0].selected == ["Deploy"]
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_store_unreadable_as_the_wait_begins_does_not_fail_the_question(
    caplog: pytest.LogCaptureFixture, sqlite_path: Path
) -> None:
    # The read the wait begins with (for the question's deadlines) times out once: the
    # question waits all the same, with its deadlines as posted, and a click answers it.
    store = FlakySqliteStore(path=sqlite_path, process_id="flaky")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:

            def posted(_: str) -> None:
                store.failing_once = True  # the next read is the wait's

            with caplog.at_level(logging.WARNING):
                task = h.ask(one(options=["Deploy", "Wait"]), options=AskOptions(on_posted=posted))
                message = await h.posted()
                await until(lambda: store.failed == 1, what="the wait's read to fail")
            assert "waiting all the same" in caplog.text
            await asyncio.sleep(0.05)
            assert not task.done()  # still waiting
            await h.click(message, h.alice, text="Deploy")
            assert (await asyncio.wait_for(task, 10)).answers[0].selected == ["Deploy"]
    finally:
        await store.close()


async def test_a_wait_that_begins_while_the_store_cannot_be_read_still_gets_its_ending(
    sqlite_path: Path,
) -> None:
    """The record ended before the watch began, and the store could not be read at that
    moment: the wait goes on (the watch looks again until it can, or the ending arrives),
    instead of failing the ask with the moment's STORE_UNAVAILABLE."""
    from tests.slack.stores.test_store_contract import finished, make_record

    store = FlakySqliteStore(path=sqlite_path, process_id="flaky")
    await store.start()
    try:
        record = make_record("flaky")
        assert await store.create(record)
        assert await store.compare_and_set(finished(record))
        watch = store.watch(record.id)
        store.failing = True
        waiting = asyncio.ensure_future(watch.wait())
        await until(lambda: store.failed >= 1, what="the watch to look")
        await asyncio.sleep(0.2)
        store.failing = False
        ended = await asyncio.wait_for(waiting, 10)
        assert (ended.id, ended.state) == (record.id, "answered")
        watch.close()
    finally:
        await store.close()
