"""The host's requests this client holds open in Slack, from their frame to their end.

Each ``question/requested`` or ``approval/requested`` frame becomes one :class:`HostAsk`
keyed by its rpcId: a frame replayed after a reconnect attaches to the ask already open
instead of posting twice. At most ``max_open`` requests of one session are open in Slack at
once; the rest wait in order (:class:`WaitingRoom`), noted on the session's latest message,
and each ask that ends lets the session's next one in.

On every new downlink the host replays its pending requests; the replay ends
``replay_window`` seconds after the last replayed one, and only then is an ask the host did
not replay closed as gone. A ``*/resolved`` frame ends the matching ask early.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.dsh.approval_relay import resolved_note
from adapters.dsh.approvals import ApprovalResolved
from adapters.dsh.asks import (
    ANSWERED_ELSEWHERE,
    CANCELLED_IN_HARNESS,
    GONE_NOTE,
    RESTARTING_NOTE,
    HostAsk,
    QuestionNotes,
)
from adapters.dsh.uplink import describe
from adapters.dsh.waiting import WaitingRoom
from adapters.slack import Released

__all__ = ["QUEUED_NOTE", "OpenRequests"]

QUEUED_NOTE: Final = (
    "More requests from this session are waiting: the bot shows {limit} at a time and posts "
    "the next one as each of these is answered."
)

_GONE_REMEMBERED: Final = 1024


@dataclass(eq=False)
class _Replay:
    """The requests seen since a downlink opened, until the host's replay is over."""

    seen: set[str] = field(default_factory=set)
    over: bool = False
    timer: asyncio.TimerHandle | None = None


class OpenRequests:
    """The host's requests being asked or answered, and those waiting for their turn.

    ``serve(ask)`` asks one request in Slack and answers the host (run as a task per ask);
    ``stopping()`` tells whether the client is stopping (no waiting request starts then).
    """

    def __init__(
        self,
        notes: QuestionNotes,
        serve: Callable[[HostAsk], Coroutine[Any, Any, None]],
        *,
        max_open: int,
        replay_window: float,
        stopping: Callable[[], bool],
        logger: logging.Logger,
    ) -> None:
        self._notes = notes
        self._serve = serve
        self._max_open = max_open
        self._replay_window = replay_window
        self._stopping = stopping
        self._logger = logger
        self._replay: _Replay | None = None
        self._asks: dict[str, HostAsk] = {}
        self._waiting = WaitingRoom()
        self._gone: set[str] = set()

    @property
    def in_flight(self) -> int:
        """Requests being asked or answered now, queued ones included."""
        return len(self._asks) + self.queued

    @property
    def queued(self) -> int:
        """Requests waiting for a free place in their session's share of Slack."""
        return len(self._waiting)

    def counts(self) -> tuple[int, int]:
        """(questions, approvals) open or waiting."""
        asks = [*self._asks.values(), *self._waiting]
        approvals = sum(1 for ask in asks if ask.approval is not None)
        return len(asks) - approvals, approvals

    # -- the replay -----------------------------------------------------------------------

    def opened(self) -> None:
        """A downlink opened: the host's replay begins."""
        self._replay = _Replay()
        self._extend(self._replay)

    def closed(self) -> None:
        """The downlink closed: its replay window no longer runs."""
        if self._replay is not None and self._replay.timer is not None:
            self._replay.timer.cancel()

    def _extend(self, replay: _Replay) -> None:
        """(Re)start the replay window: it closes ``replay_window`` s after the last replay."""
        if replay.over:
            return
        if replay.timer is not None:
            replay.timer.cancel()
        loop = asyncio.get_running_loop()
        replay.timer = loop.call_later(self._replay_window, self._settle, replay)

    def _settle(self, replay: _Replay) -> None:
        """The replay is over: end the asks of earlier connections the host did not replay."""
        if replay.over:
            return
        replay.over = True
        self._waiting.keep_only(replay.seen)
        for ask in list(self._asks.values()):
            if ask.phase == "asking" and ask.rpc_id not in replay.seen:
                self._logger.info(
                    "dsh host: request no longer pending after reconnect",
                    extra={"rpc_id": ask.rpc_id, "session": ask.session_id},
                )
                if len(self._gone) >= _GONE_REMEMBERED:
                    self._gone.pop()
                self._gone.add(ask.rpc_id)
                ask.controller.abort(GONE_NOTE)

    # -- requests -------------------------------------------------------------------------

    def requested(self, ask: HostAsk) -> None:
        """The host asks (or replays) ``ask``: open it, or queue it behind its session's."""
        replay = self._replay
        assert replay is not None, "a request arrives on an open downlink"
        replay.seen.add(ask.rpc_id)
        self._extend(replay)
        if ask.rpc_id in self._asks or ask.rpc_id in self._waiting:
            return  # a replay: the ask already open (or waiting) is the one
        session_open = sum(1 for a in self._asks.values() if a.session_id == ask.session_id)
        if session_open >= self._max_open:
            if self._waiting.add(ask):
                self._logger.info(
                    "dsh host: session over its open-request limit; queueing",
                    extra={"session": ask.session_id, "limit": self._max_open},
                )
                self._note_queue(ask.session_id)
            return
        self._launch(ask)

    def _launch(self, ask: HostAsk) -> None:
        if ask.rpc_id in self._gone:
            # We closed it as gone, yet the host still has it: reopen the same message.
            self._gone.discard(ask.rpc_id)
            ask.reopen = True
        self._asks[ask.rpc_id] = ask
        ask.task = asyncio.get_running_loop().create_task(
            self._serve(ask), name=f"dsh request {ask.rpc_id}"
        )
        ask.task.add_done_callback(lambda task: self._finished(ask, task))

    def posted(self, ask: HostAsk) -> None:
        """``ask`` is in Slack now: its message tells when more of its session wait."""
        self._logger.info(
            "dsh host: request posted in Slack",
            extra={"rpc_id": ask.rpc_id, "session": ask.session_id},
        )
        if self._waiting.has_waiting(ask.session_id):
            self._note_queue(ask.session_id, ask)

    def _note_queue(self, session_id: str, latest: HostAsk | None = None) -> None:
        """Say on the session's latest message that more of its requests are waiting."""
        if latest is None:
            mine = [a for a in self._asks.values() if a.session_id == session_id]
            if not mine:
                return
            latest = mine[-1]
        note = QUEUED_NOTE.format(limit=self._max_open)
        task = asyncio.get_running_loop().create_task(self._notes.add_note(latest.request_id, note))
        task.add_done_callback(_ignore_result)

    def _finished(self, ask: HostAsk, task: asyncio.Task[None]) -> None:
        if self._asks.get(ask.rpc_id) is ask:
            del self._asks[ask.rpc_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            self._logger.error(
                "dsh host: request handling failed",
                extra={"rpc_id": ask.rpc_id, "error": describe(error)},
            )
        following = None if self._stopping() else self._waiting.next(ask.session_id)
        if following is not None:
            self._launch(following)

    def approval_resolved(self, payload: ApprovalResolved) -> None:
        """The host settled an approval (here or elsewhere): end its ask, drop its wait."""

        def mine(ask: HostAsk) -> bool:
            return ask.approval is not None and ask.approval.approval_id == payload.approval_id

        self._waiting.remove(mine)
        for ask in [a for a in self._asks.values() if mine(a)]:
            self.resolved(ask.rpc_id, payload.outcome)

    def resolved(self, rpc_id: str, outcome: str) -> None:
        """The host resolved request ``rpc_id`` with ``outcome``: end its ask in Slack."""
        if self._waiting.remove(lambda waiting: waiting.rpc_id == rpc_id):
            return  # never shown in Slack: nothing to close
        ask = self._asks.get(rpc_id)
        # Not ours, or already answered here (the echo of our own answer): nothing to do.
        if ask is None or ask.phase != "asking":
            if ask is not None:
                ask.resolved = outcome
            return
        ask.resolved = outcome
        if ask.approval is not None:
            ask.controller.abort(resolved_note(outcome))
        else:
            ask.controller.abort(
                ANSWERED_ELSEWHERE if outcome == "answered" else CANCELLED_IN_HARNESS
            )

    # -- stopping -------------------------------------------------------------------------

    async def release(self, grace: float) -> None:
        """Leave the open requests to a later bot: released in the store, asks ended.

        Waits ``grace`` seconds for their tasks, then cancels the late ones.
        """
        self._waiting.clear()
        asks = list(self._asks.values())
        for ask in asks:
            if ask.phase == "asking":
                try:
                    await self._notes.release(ask.request_id, RESTARTING_NOTE)
                except Exception as exc:  # the store is down: the sweep settles it later
                    self._logger.warning(
                        "dsh host: could not release a request",
                        extra={"rpc_id": ask.rpc_id, "error": describe(exc)},
                    )
                ask.controller.abort(Released())
        tasks = {ask.task for ask in asks if ask.task is not None and not ask.task.done()}
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)


def _ignore_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
