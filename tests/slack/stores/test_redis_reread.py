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


async def test_a_reread_cancelled_while_redis_is_slow_keeps_the_ids_it_owed() -> None:
    """An ending heard while Redis blipped is retried even if a later look at it (a long-poll
    that timed out) was cancelled mid-read: the asker's watch still gets it."""
    upkeep = RedisUpkeep.__new__(RedisUpkeep)
    upkeep._retry = set()
    upkeep._keys = SimpleNamespace(record=lambda i: f"p:r:{i}")  # type: ignore[assignment]
    upkeep._log = logging.getLogger("test")
    upkeep._link = link = _SlowLink()  # type: ignore[assignment]
    upkeep.watches = WatchRegistry(upkeep.reread, shielded=True)
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
