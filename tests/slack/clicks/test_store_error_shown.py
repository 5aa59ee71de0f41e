"""A pending store's error names its SQLite path or Redis address: it goes to the log and
to the waiter's error, never onto a message everyone in the channel reads.

An ask cancelled during a store outage is ended once the store is back with the ending it
meant (a cancel reads Cancelled, not Failed); a failure the outage itself caused reads a
fixed sentence, not the store's error.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import STORE_DOWN_NOTE
from adapters.slack.stores import SqlitePendingStore
from bot.questions import UserQuestionError
from bot.questions.errors import STORE_UNAVAILABLE
from tests.slack.asks.test_slack_provider import one
from tests.slack_harness import SlackHarness, all_text, interactive_elements, message_ts_kept, until

pytestmark = pytest.mark.timeout(60)


class Outage(SqlitePendingStore):
    """A SQLite store whose reads and writes fail, with SQLite's kind of message (naming
    its file), while ``failing``."""

    failing = False

    def _fail(self) -> None:
        if self.failing:
            raise UserQuestionError(
                f"the pending store (SQLite at {self.path}) failed: disk I/O error",
                STORE_UNAVAILABLE,
            )

    async def get(self, request_id: str) -> PendingRecord | None:
        self._fail()
        return await super().get(request_id)

    async def compare_and_set(self, record: PendingRecord, event: Any = None) -> bool:
        self._fail()
        return await super().compare_and_set(record, event)


async def _closed(h: SlackHarness, message: Any) -> str:
    await until(
        lambda: not interactive_elements(h.current(message).blocks),
        within=20,
        what="the message closed",
    )
    final = h.current(message)
    return all_text(final.blocks) + " " + final.text


@pytest.mark.slow
async def test_an_ask_cancelled_during_an_outage_reads_cancelled_and_names_no_path(
    sqlite_path: Path,
) -> None:
    store = Outage(path=sqlite_path, process_id="p")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            task = h.ask(one(options=["Deploy", "Wait"]))
            message = await h.posted()
            await until(lambda: interactive_elements(h.current(message).blocks), what="posted")
            # Placed first: an outage over the place write itself holds the cancel up to 10 s
            # and the write's next try up to 18.8 s (tested on its own below).
            await message_ts_kept(store)
            store.failing = True
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            store.failing = False  # back: the ending is written now
            shown = await _closed(h, message)
            assert str(sqlite_path) not in shown and "SQLite" not in shown, shown
            assert "Cancelled" in shown and "Failed" not in shown, shown
            assert await store.open_records() == []
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_failure_the_outage_caused_reads_a_fixed_sentence(sqlite_path: Path) -> None:
    store = Outage(path=sqlite_path, process_id="p")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            task = h.ask(one(options=["Deploy", "Wait"]))
            message = await h.posted()
            await until(lambda: interactive_elements(h.current(message).blocks), what="posted")
            (record,) = await store.open_records()
            store.failing = True
            # What the ask does when its wait fails on the store (lifecycle: fail_later).
            h.provider._endings.fail_later(record.id)  # type: ignore[attr-defined]
            await asyncio.sleep(0.2)
            store.failing = False
            shown = await _closed(h, message)
            assert str(sqlite_path) not in shown and "SQLite" not in shown, shown
            assert STORE_DOWN_NOTE in shown, shown
            ended = await store.get(record.id)
            assert ended is not None and ended.error_code == STORE_UNAVAILABLE
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        await store.close()


async def test_a_post_whose_place_the_store_cannot_take_at_once_is_still_answered(
    sqlite_path: Path,
) -> None:
    """Slack took the message and the store failed the write of where: the ask failed and
    left a live message no ending could close. The write is tried again once the store is back."""

    class FailsThePlacement(Outage):
        failed = 0

        async def compare_and_set(self, record: PendingRecord, event: Any = None) -> bool:
            if record.message_ts and not self.failed:
                self.failed += 1
                raise UserQuestionError("the pending store failed", STORE_UNAVAILABLE)
            return await super().compare_and_set(record, event)

    store = FailsThePlacement(path=sqlite_path, process_id="p")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            task = h.ask(one(options=["Deploy", "Wait"]))
            message = await h.posted()
            await message_ts_kept(store)
            await h.click(message, h.alice, text="Deploy")
            answer = await asyncio.wait_for(task, 10)
            assert answer.answers[0].selected == ["Deploy"] and store.failed == 1
            await _closed(h, message)
    finally:
        await store.close()


async def test_an_ask_cancelled_while_its_place_meets_an_outage_reads_cancelled(
    sqlite_path: Path,
) -> None:
    """The store goes down as Slack's reply comes back: the cancel waits for the place write,
    which gets through once the store is back, and the message closes as cancelled."""

    class DownAtThePlacement(Outage):
        failed = 0

        async def compare_and_set(self, record: PendingRecord, event: Any = None) -> bool:
            if record.message_ts and self.failed == 0:
                self.failing = True  # the outage starts with the place write
            if self.failing:
                self.failed += 1
            return await super().compare_and_set(record, event)

    store = DownAtThePlacement(path=sqlite_path, process_id="p")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            task = h.ask(one(options=["Deploy", "Wait"]))
            message = await h.posted()
            await until(lambda: store.failed >= 1, what="the place write failed")
            task.cancel()
            await asyncio.sleep(0)
            store.failing = False  # back while the cancel waits for the place write
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)
            shown = await _closed(h, message)
            assert str(sqlite_path) not in shown and "SQLite" not in shown, shown
            assert "Cancelled" in shown and "Failed" not in shown, shown
            assert await store.open_records() == []
    finally:
        await store.close()
