"""What a waiting question holds: a question may wait for hours, 10,000 of them at once, so
a waiting ``ask()`` keeps no record object of its own (the store has the record).

Counted with the garbage collector, not timed: every ``PendingRecord`` alive while the
questions wait, on each store (memory keeps JSON; SQLite and Redis keep nothing in process),
and what the frames of a waiting ``ask()`` hold.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import types
from collections.abc import Coroutine
from typing import Any

import pytest

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import MemoryPendingStore, PendingStore
from bot.questions.abort import AbortController
from tests.slack_harness import SlackHarness, until

WAITING = 20


def _records_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, PendingRecord))


@pytest.mark.slow
async def test_waiting_questions_hold_no_record_objects(store: PendingStore) -> None:
    question = {"questions": [{"id": "q", "question": "Ship it?", "options": [{"label": "Yes"}]}]}
    async with asyncio.timeout(60), SlackHarness(store=store) as h:
        before = _records_alive()
        signals = [AbortController().signal for _ in range(WAITING)]
        asks = [h.ask(question, signal=signal) for signal in signals]
        await h.posted(WAITING)
        await until(lambda: h.provider.background_count == 0, what="the posts to settle")
        # Each ask listens for its signal while its post is queued too: wait until every
        # one is in ``Waits.wait`` (its post done and let go), not only listening.
        await until(lambda: all(_in_waits(task) for task in asks), what="every ask waiting")
        held = _records_alive() - before
        assert held == 0, f"{held} records alive for {WAITING} waiting questions"
        assert not any(task.done() for task in asks)
        for task in asks:
            task.cancel()
        await asyncio.gather(*asks, return_exceptions=True)


def _chain(task: asyncio.Task[Any]) -> list[Coroutine[Any, Any, Any]]:
    """The coroutines a task is suspended in, outermost first."""
    found: list[Coroutine[Any, Any, Any]] = []
    awaited: object = task.get_coro()
    while isinstance(awaited, Coroutine):
        found.append(awaited)
        awaited = awaited.cr_await  # type: ignore[attr-defined]
    return found


def _in_waits(task: asyncio.Task[Any]) -> bool:
    """Whether the ask waits for its ending (``Waits.wait``), its post behind it."""
    return any(c.cr_code.co_qualname == "Waits.wait" for c in _chain(task))  # type: ignore[attr-defined]


def _waiting_locals(task: asyncio.Task[Any]) -> list[object]:
    """Everything the frames of a waiting task hold (locals and their stacks: what an
    ``async with`` entered), down its chain of awaits."""
    return [v for coroutine in _chain(task) for v in gc.get_referents(coroutine)]


def _waiting_for_its_ending(task: asyncio.Task[Any]) -> bool:
    chain = _chain(task)
    return bool(chain) and chain[-1].cr_code.co_qualname == "Watch.wait"  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_a_waiting_ask_holds_only_what_waiting_needs(store: PendingStore) -> None:
    """No review maker, no timeout object when there is no deadline, and a copy of the
    record's JSON only where the store can lose the record (not in process)."""
    question = {"questions": [{"id": "q", "question": "Ship it?", "options": [{"label": "Yes"}]}]}
    async with asyncio.timeout(60), SlackHarness(store=store) as h:
        task = h.ask(question)
        await h.posted(1)
        await until(
            lambda: _waiting_for_its_ending(task) and h.provider.background_count == 0,
            what="the ask waiting for its ending",
        )
        held = _waiting_locals(task)
        makers = [
            v
            for v in held
            if isinstance(v, functools.partial)
            or (isinstance(v, types.FunctionType) and v.__closure__)  # a frame's own: none
        ]
        assert not makers
        # What ``async with`` keeps on a frame's stack is the bound ``__aexit__``.
        owners = [getattr(v, "__self__", v) for v in held]
        assert not [v for v in owners if isinstance(v, asyncio.Timeout)]
        copies = {id(v) for v in held if isinstance(v, str) and v.startswith('{"id":')}
        in_process = isinstance(store, MemoryPendingStore)
        assert len(copies) == (0 if in_process else 1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
