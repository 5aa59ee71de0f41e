"""What a waiting question holds: a question may wait for hours, 10,000 of them at once, so
a waiting ``ask()`` keeps no record object of its own (the store has the record).

Counted with the garbage collector, not timed: every ``PendingRecord`` alive while the
questions wait, on each store (memory keeps JSON; SQLite and Redis keep nothing in process).
"""

from __future__ import annotations

import asyncio
import gc

from adapters.slack.record import PendingRecord
from adapters.slack.stores import PendingStore
from bot.questions.abort import AbortController
from tests.slack_harness import SlackHarness, until

WAITING = 20


def _records_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, PendingRecord))


async def test_waiting_questions_hold_no_record_objects(store: PendingStore) -> None:
    question = {"questions": [{"id": "q", "question": "Ship it?", "options": [{"label": "Yes"}]}]}
    async with asyncio.timeout(60), SlackHarness(store=store) as h:
        before = _records_alive()
        signals = [AbortController().signal for _ in range(WAITING)]
        asks = [h.ask(question, signal=signal) for signal in signals]
        await h.posted(WAITING)
        await until(lambda: h.provider.background_count == 0, what="the posts to settle")
        # Each ask listens for its signal only once it waits for the ending.
        await until(lambda: all(s._listeners for s in signals), what="every ask waiting")
        held = _records_alive() - before
        # One per waiting question would be 20; a few are transient (on SQLite up to 5
        # were seen at once, in 1 of 5 runs).
        assert held < WAITING // 2, f"{held} records alive for {WAITING} waiting questions"
        assert not any(task.done() for task in asks)
        for task in asks:
            task.cancel()
        await asyncio.gather(*asks, return_exceptions=True)
