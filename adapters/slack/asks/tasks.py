"""Background work the provider starts after acking: tracked, logged, drained on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from adapters.slack.pacing.scheduler import untagged_context

__all__ = ["BackgroundTasks"]


class BackgroundTasks:
    """A set of running tasks; failures are logged, never lost, and ``drain`` waits for all."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; ``what`` names it in logs."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(coro, name=what, context=untagged_context())
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._logger.warning(
                "background task failed",
                extra={"task": task.get_name(), "error": f"{type(error).__name__}: {error}"},
            )

    async def drain(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for every task (new ones too); cancel the rest."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await asyncio.wait(set(self._tasks), timeout=remaining)
        leftover = set(self._tasks)
        for task in leftover:
            task.cancel()
        if leftover:
            await asyncio.wait(leftover)
