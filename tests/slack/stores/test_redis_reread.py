"""The Redis subscriber's re-reads: an ending it owes a watch is never dropped."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from adapters.slack.stores.redis_upkeep import RedisUpkeep
from adapters.slack.stores.watches import WatchRegistry
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

pytestmark = pytest.mark.timeout(10)


class _SlowLink:
    """A Redis link whose reads fail (``fail``) or never answer (``hang``)."""

    def __init__(self) -> None:
        self.mode, self.closed = "fail", False

    async def op(self, what: str, action: Any) -> Any:
        if self.mode == "fail":
            raise UserQuestionError("the pending store could not re-read", STORE_UNAVAILABLE)
        await asyncio.Event().wait()


def _upkeep(link: Any) -> RedisUpkeep:
    """The subscriber's re-read state alone, over ``link`` (no Redis, no tasks)."""
    upkeep = RedisUpkeep.__new__(RedisUpkeep)
    upkeep._retry = set()
    upkeep._keys = SimpleNamespace(record=lambda i: f"p:r:{i}")  # type: ignore[assignment]
    upkeep._log = logging.getLogger("test")
    upkeep._link = link
    upkeep.watches = WatchRegistry(upkeep.reread, shielded=True)
    return upkeep


async def test_a_reread_cancelled_while_redis_is_slow_keeps_the_ids_it_owed() -> None:
    """An ending heard while Redis blipped is retried even if a later look at it (a long-poll
    that timed out) was cancelled mid-read: the asker's watch still gets it."""
    link = _SlowLink()
    upkeep = _upkeep(link)
    asker = upkeep.watches.watch("R")
    asker.waiting = True
    await upkeep.reread("R")  # the notice was heard; Redis failed the read
    assert upkeep._retry == {"R"}
    link.mode = "hang"
    poll = upkeep.watches.watch("R")
    task = asyncio.create_task(poll.wait())
    await asyncio.sleep(0.01)
    task.cancel()  # the long-poll timed out
    await asyncio.gather(task, return_exceptions=True)
    poll.close()
    assert upkeep._retry == {"R"}


class _GatedLink:
    """A Redis link whose every read waits for the test to answer it."""

    closed = False

    def __init__(self) -> None:
        self.gates: list[asyncio.Future[Any]] = []

    async def op(self, what: str, action: Any) -> Any:
        gate = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        return await gate


async def test_a_stale_look_answering_late_keeps_the_retry_a_failed_notice_read_owes() -> None:
    """A waiter's look read the record before it ended; the ending's notice read failed; the
    look's (stale) answer landing after must not clear the retry the notice is owed."""
    link = _GatedLink()
    upkeep = _upkeep(link)
    asker = upkeep.watches.watch("R")
    waiting = asyncio.create_task(asker.wait())  # its look reads R while still pending
    await asyncio.sleep(0.01)
    notice = asyncio.create_task(upkeep.reread("R"))  # the ending's notice
    await asyncio.sleep(0.01)
    link.gates[1].set_exception(UserQuestionError("blip", STORE_UNAVAILABLE))
    await notice
    assert upkeep._retry == {"R"}
    link.gates[0].set_result([None])  # the look's stale answer lands late
    await asyncio.sleep(0.01)
    assert upkeep._retry == {"R"}
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    asker.close()
