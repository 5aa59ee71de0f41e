"""``OtherTask``: another task on the event loop, counting the turns the loop gives it (what
a click arriving meanwhile would get)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["OtherTask"]


class OtherTask:
    """Another task on the loop, counting the turns it gets (``async with``)."""

    def __init__(self) -> None:
        self.turns = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OtherTask:
        self._task = asyncio.ensure_future(self._run())
        await asyncio.sleep(0)  # started
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.turns += 1
