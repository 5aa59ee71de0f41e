"""How the bot stops: one deadline (``SHUTDOWN_GRACE``) for the whole stop; each step bounded by
what is left of it (at least ``STEP_FLOOR``), abandoned and logged past it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.app.runtime import Runtime

logger = logging.getLogger("bot")

HANDLER_GRACE = 0.5
"""At most this much of SHUTDOWN_GRACE goes to the HTTP requests still running at the end."""
STEP_FLOOR = 0.25
"""Each step of a stop gets at least this long, even once SHUTDOWN_GRACE is used up."""
DRAIN_MARGIN = 0.1
"""The provider's own grace at a stop ends this long before the step that runs it."""


class Deadline:
    """When a stop must be over: ``grace`` seconds after it began (at ``begin``, or at the
    first ``left`` when a failed start releases its parts)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._at: float | None = None

    def begin(self) -> float:
        """The stop begins now (once); the loop's time it must be over by."""
        if self._at is None:
            self._at = asyncio.get_running_loop().time() + self.grace
        return self._at

    def left(self, reserve: float = 0.0) -> float:
        """Seconds until ``reserve`` seconds before the deadline (negative once past)."""
        return self.begin() - reserve - asyncio.get_running_loop().time()


async def logged(what: str, close: Callable[[], Awaitable[None]]) -> None:
    """Await ``close``, logging its failure instead of raising it, so the rest still closes."""
    try:
        await close()
    except Exception as exc:
        logger.warning("error while closing", extra={"part": what, "error": repr(exc)})


async def bounded(
    what: str,
    close: Callable[[], Awaitable[None]],
    deadline: Deadline,
    *,
    doing: str,
    reserve: float = 0.0,
) -> None:
    """Await ``close`` (logged as ``logged``), abandoned when ``reserve`` seconds before
    ``deadline`` come (after ``STEP_FLOOR`` at least); ``doing`` says what was abandoned."""
    seconds = max(deadline.left(reserve), STEP_FLOOR)
    try:
        async with asyncio.timeout(seconds):
            await logged(what, close)
    except TimeoutError:  # close's own errors are logged inside: this is the deadline's
        logger.warning(
            f"shutdown: gave up on {doing} after {seconds:.2f} s",
            extra={"part": what, "shutdown_grace": deadline.grace},
        )


def handler_grace(grace: float) -> float:
    """The part of ``grace`` (SHUTDOWN_GRACE) left to requests still handled at the end."""
    return min(HANDLER_GRACE, grace / 4)


async def interrupt(runtime: Runtime) -> None:
    """Refuse new questions, release the API's waiters and a dsh host's requests (left open for
    the next bot), end the ones this process owns, answer the long-polls; by the deadline less
    the HTTP drain (given up past it: the rest stay as the store has them)."""
    provider, gateway, deadline = runtime.provider, runtime.gateway, runtime.deadline
    logger.info("shutting down", extra={"pending": provider.pending_count})
    reserve = handler_grace(deadline.grace)
    gateway.close()

    async def release_and_end() -> None:
        if runtime.dsh is not None:
            await logged("dsh host client", runtime.dsh.stop)
        try:  # SHUTDOWN_GRACE in all: what the dsh client took is not given again
            # (its own grace ends a little before this step's, so its drain, which cancels
            # what is still running, is not itself cut short)
            await provider.aclose(grace=max(0.0, deadline.left(reserve + DRAIN_MARGIN)))
        except Exception as exc:  # e.g. the store is unreachable: still close the rest
            logger.warning("could not interrupt the pending questions", extra={"error": repr(exc)})

    try:
        doing = "ending this process's pending questions"
        await bounded("questions", release_and_end, deadline, doing=doing, reserve=reserve)
    finally:
        gateway.polls_ended.set()  # long-polls on questions of other processes answer now
