"""The host's requests held open in Slack, one ``HostAsk`` per id, capped per session and per
host (the rest wait in order); what a replay leaves out is closed as gone, and so are the
requests of this host a stopped bot released that the host no longer has."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.dsh.asks import (
    APPROVAL_GONE_NOTE,
    GONE_NOTE,
    RESTARTING_NOTE,
    HostAsk,
    ask_key,
)
from adapters.dsh.host import Host, describe
from adapters.slack import Released, SlackQuestionProvider

QUEUED_NOTE: Final = (
    "More requests from this session are waiting: the bot shows {limit} at a time and posts "
    "the next one as each of these is answered."
)

_GONE_REMEMBERED: Final = 1024
_KEY_PREFIX: Final = ask_key("")


@dataclass(eq=False)
class _Replay:
    """The requests seen since a downlink opened, until the host's replay is over
    (``window`` seconds after the last one, when ``settle`` runs)."""

    window: float
    settle: Callable[[_Replay], None]
    seen: set[str] = field(default_factory=set)
    over: bool = False
    timer: asyncio.TimerHandle | None = None

    def saw(self, rpc_id: str | None = None) -> None:
        """Note a replayed request and (re)start the window, unless the replay is over."""
        if rpc_id is not None:
            self.seen.add(rpc_id)
        if self.over:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(self.window, self.settle, self)


class OpenRequests:
    """The host's requests being asked or answered (``serve`` runs each), and those waiting
    (oldest first); after each replay, the released requests of ``asker`` the host no longer
    has are closed."""

    def __init__(
        self,
        provider: SlackQuestionProvider,
        serve: Callable[[HostAsk], Coroutine[Any, Any, None]],
        host: Host,
        *,
        max_open: int,
        replay_window: float,
        asker: str,
        max_open_host: int = 100,
    ) -> None:
        self._notes = provider
        self._asker = asker
        self._serve = serve
        self._max_open = max_open
        self._max_host = max_open_host  # all sessions': the host chooses session ids
        self._replay_window = replay_window
        self._stopping = host.stopping
        self._logger = host.logger
        self._replay: _Replay | None = None
        self._asks: dict[str, HostAsk] = {}
        self._waiting: dict[str, HostAsk] = {}  # not shown yet in Slack, oldest first
        self._gone: set[str] = set()
        self._closing: set[str] = set()  # released requests being closed as gone
        self._late: dict[str, HostAsk] = {}  # replayed while being closed: asked after
        self._sweeps: set[asyncio.Task[None]] = set()

    @property
    def queued(self) -> int:
        """Requests waiting for a free place in their session's share of Slack."""
        return len(self._waiting)

    def holds(self, rpc_id: str) -> bool:
        """Whether request ``rpc_id`` is open, waiting, or to be asked again."""
        return rpc_id in self._asks or rpc_id in self._waiting or rpc_id in self._late

    def replayed(self, rpc_id: str) -> bool:
        """Whether the current socket's ``$events`` sent request ``rpc_id`` (replay or new)."""
        return self._replay is not None and rpc_id in self._replay.seen

    def counts(self) -> tuple[int, int]:
        """(questions, approvals) open or waiting."""
        asks = [*self._asks.values(), *self._waiting.values()]
        approvals = sum(1 for ask in asks if ask.approval is not None)
        return len(asks) - approvals, approvals

    def opened(self) -> None:
        """A downlink opened: the host's replay begins."""
        self._replay = _Replay(self._replay_window, self._settle)
        self._replay.saw()

    def closed(self) -> None:
        """The downlink closed: its replay window no longer runs."""
        if self._replay is not None and self._replay.timer is not None:
            self._replay.timer.cancel()

    def _settle(self, replay: _Replay) -> None:
        """The replay is over: end the asks, and earlier bots' released requests, not in it."""
        if replay.over:
            return
        replay.over = True
        self._waiting = {r: ask for r, ask in self._waiting.items() if r in replay.seen}
        self._late = {rpc_id: ask for rpc_id, ask in self._late.items() if rpc_id in replay.seen}
        for ask in [a for a in self._asks.values() if a.open and a.rpc_id not in replay.seen]:
            self._logger.info(
                "dsh host: request no longer pending after reconnect",
                extra={"rpc_id": ask.rpc_id, "session": ask.session_id},
            )
            _remember(self._gone, ask.rpc_id)
            ask.controller.abort(GONE_NOTE if ask.approval is None else APPROVAL_GONE_NOTE)
        sweep = asyncio.get_running_loop().create_task(
            self._close_released(replay), name="dsh released requests"
        )
        self._sweeps.add(sweep)
        sweep.add_done_callback(self._sweeps.discard)

    async def _close_released(self, replay: _Replay) -> None:
        """Close as gone this host's open requests a stopped bot released that nothing holds
        (not replayed, open, waiting or closing): no process owns them, and left open their
        message would take answers the host never gets. A replay of one meanwhile is asked."""
        try:
            found = await self._notes.store.open_records()
        except Exception as exc:  # the store is down: the next replay looks again
            self._logger.warning(
                "dsh host: could not list the released requests", extra={"error": describe(exc)}
            )
            return
        for record in found:
            key = record.key  # this host's request, no process owns (a stopped bot released it)
            if record.owner is not None or record.asked_by != self._asker or key is None:
                continue
            rpc_id = key.removeprefix(_KEY_PREFIX)
            if any(
                rpc_id in held for held in (replay.seen, self._asks, self._waiting, self._closing)
            ):
                continue
            self._logger.info(
                "dsh host: released request not replayed; closing it", extra={"rpc_id": rpc_id}
            )
            self._closing.add(rpc_id)
            try:
                gone = GONE_NOTE if record.approval is None else APPROVAL_GONE_NOTE
                await self._notes.abort(record.id, gone)
                _remember(self._gone, rpc_id)
            except Exception as exc:  # the store is down: the next replay tries again
                self._logger.warning(
                    "dsh host: could not close a released request",
                    extra={"rpc_id": rpc_id, "error": describe(exc)},
                )
            finally:
                self._closing.discard(rpc_id)
            self._ask_late(rpc_id)

    def requested(self, ask: HostAsk) -> None:
        """The host asks (or replays) ``ask``: open it, or queue it behind its session's."""
        replay = self._replay
        assert replay is not None, "a request arrives on an open downlink"
        rpc_id = ask.rpc_id
        replay.saw(rpc_id)
        if rpc_id in self._closing or (rpc_id in self._asks and rpc_id in self._gone):
            # Being closed as gone (its ask, or a released record), yet replayed just after the
            # window: the host still has it. Asked again (the same message reopened) after.
            self._late[rpc_id] = ask
            return
        if rpc_id in self._asks or rpc_id in self._waiting:
            return  # a replay: the ask already open (or waiting) is the one
        self._admit(ask)

    def _admit(self, ask: HostAsk) -> None:
        """Open ``ask`` in Slack, or queue it when its session shows its limit already."""
        if not self._has_room(ask.session_id) or len(self._asks) >= self._max_host:
            first = not self._has_waiting(ask.session_id)
            self._waiting[ask.rpc_id] = ask
            if first:
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
        if self._has_waiting(ask.session_id):
            self._note_queue(ask.session_id, ask)

    def _note_queue(self, session_id: str, latest: HostAsk | None = None) -> None:
        """Say on the session's latest message that more of its requests are waiting."""
        mine = [a for a in self._asks.values() if a.session_id == session_id]
        if (latest := latest or (mine[-1] if mine else None)) is None:
            return
        note = QUEUED_NOTE.format(limit=self._max_open)
        task = asyncio.get_running_loop().create_task(self._notes.add_note(latest.request_id, note))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _finished(self, ask: HostAsk, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (error := task.exception()) is not None:
            self._logger.error(
                "dsh host: request handling failed",
                extra={"rpc_id": ask.rpc_id, "error": describe(error)},
            )
        reason = ask.controller.signal.reason
        if not task.cancelled() and isinstance(reason, str):
            # Aborted (gone, or settled by the host): the ask stays held until its record
            # is ended, so a late replay waits for that instead of racing it.
            ended = self._notes.abort(ask.request_id, reason)
            end = _store(self._logger, ask, "close an ended request", ended)
            closing = asyncio.get_running_loop().create_task(end, name=f"dsh closing {ask.rpc_id}")
            ask.task = closing
            closing.add_done_callback(lambda _: self._done(ask))
            return
        self._done(ask)

    def _done(self, ask: HostAsk) -> None:
        """``ask`` is over: its place goes to its late replay, else to its session's next."""
        if self._asks.get(ask.rpc_id) is ask:
            del self._asks[ask.rpc_id]
        if self._ask_late(ask.rpc_id):
            return
        if self._stopping() or len(self._asks) >= self._max_host:
            return
        # Its session's oldest waiting request, else the oldest of a session with room.
        same = [w for w in self._waiting.values() if w.session_id == ask.session_id]
        for waiting in (*same[:1], *self._waiting.values()):
            if self._has_room(waiting.session_id):
                del self._waiting[waiting.rpc_id]
                self._launch(waiting)
                return

    def _has_room(self, session_id: str) -> bool:
        return sum(a.session_id == session_id for a in self._asks.values()) < self._max_open

    def _has_waiting(self, session_id: str) -> bool:
        return any(ask.session_id == session_id for ask in self._waiting.values())

    def _ask_late(self, rpc_id: str) -> bool:
        """Ask the replay that came while ``rpc_id`` was being closed as gone; whether one did."""
        late = self._late.pop(rpc_id, None)
        if late is None or self._stopping():
            return False
        self._admit(late)
        return True

    def resolved(self, rpc_id: str, outcome: str) -> None:
        """The host resolved request ``rpc_id`` with ``outcome``: end its ask in Slack."""
        self._late.pop(rpc_id, None)  # settled: not to be asked again
        if self._waiting.pop(rpc_id, None) is not None:
            return  # never shown in Slack: nothing to close
        if (ask := self._asks.get(rpc_id)) is not None:
            ask.resolve(outcome)

    async def release(self, grace: float) -> None:
        """Leave the open requests to a later bot; after ``grace`` s, cancel the tasks left."""
        self._waiting.clear()
        self._late.clear()
        for sweep in self._sweeps:
            sweep.cancel()  # the next bot looks again
        for ask in [ask for ask in self._asks.values() if ask.open]:
            release = self._notes.release(ask.request_id, RESTARTING_NOTE)
            await _store(self._logger, ask, "release a request", release)
            ask.controller.abort(Released())
        await drain(self._running, grace)

    def _running(self) -> set[asyncio.Task[None]]:
        asks = {ask.task for ask in self._asks.values() if ask.task is not None}
        return {task for task in asks | self._sweeps if not task.done()}


async def _store(logger: logging.Logger, ask: HostAsk, what: str, write: Awaitable[object]) -> None:
    """Write ``ask``'s record; a store that is down is logged (a later sweep settles it)."""
    try:
        await write
    except Exception as exc:
        logger.warning(
            f"dsh host: could not {what}", extra={"rpc_id": ask.rpc_id, "error": describe(exc)}
        )


def _remember(gone: set[str], rpc_id: str) -> None:
    """Add ``rpc_id`` to ``gone``, forgetting one when it holds ``_GONE_REMEMBERED``."""
    if len(gone) >= _GONE_REMEMBERED:
        gone.pop()
    gone.add(rpc_id)


async def drain(running: Callable[[], set[asyncio.Task[None]]], grace: float) -> None:
    """Wait up to ``grace`` s for the tasks ``running`` gives (it may add some), then cancel."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while tasks := running():
        remaining = deadline - loop.time()
        if remaining <= 0:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            return
        await asyncio.wait(tasks, timeout=remaining)
