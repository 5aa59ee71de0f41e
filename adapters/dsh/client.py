"""``DshHostClient``: the bot as a connected client of a running dsh web host (§6.1, §7).

One loop holds the downlink (``GET /api/events.mux`` as a WebSocket) open, reconnecting with
backoff. Each ``question/requested`` frame becomes one ask through the ``UserQuestionService``
(so the Slack provider asks it), keyed by the frame's rpcId: a frame replayed after a
reconnect attaches to the ask already open instead of posting twice::

    client = DshHostClient("http://127.0.0.1:13080", service, provider=provider)
    await client.start()      # returns at once; the host may be down
    ...
    await client.stop()

On every new downlink the host sends one ``session/subscribed`` per attached session, then
replays every pending request with its original rpcId, then live traffic. No push ends that
replay: it ends ``replay_window`` seconds after the last replayed request, and only then is an
ask the host did not replay closed as gone (the host restarted or settled it meanwhile).
A ``question/resolved`` frame (answered in another client, cancelled, the turn aborted)
aborts the matching ask, so its message loses its buttons at once.

Limits on what a host sends: a downlink message over ``max_frame_bytes`` is skipped with a
log line (the connection stays; aiohttp drops one over four times that), a malformed or
over-nested frame is skipped, and at most ``max_open_per_session`` requests of one session
are open in Slack at once: the rest wait in order, noted on the session's latest message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp

from adapters.dsh.approval_relay import ApprovalDesk, ApprovalRunner, resolved_note
from adapters.dsh.approvals import ApprovalRequested, ApprovalResolved
from adapters.dsh.asks import (
    ANSWERED_ELSEWHERE,
    CANCELLED_IN_HARNESS,
    GONE_NOTE,
    RESTARTING_NOTE,
    HostAsk,
    QuestionRunner,
)
from adapters.dsh.downlink import ConnectionState, Downlink
from adapters.dsh.events import SESSION_EVENT, CallLedger, session_event
from adapters.dsh.protocol import (
    OtherPayload,
    QuestionRequested,
    QuestionResolved,
    parse_frame,
)
from adapters.dsh.uplink import HostUplink, describe
from adapters.dsh.waiting import WaitingRoom
from adapters.slack import Released
from bot.logs import redact_url
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

__all__ = ["QUEUED_NOTE", "ConnectionState", "DshHostClient"]

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


class DshHostClient:
    """Answers a running dsh web host's questions and approvals (and so in Slack).

    - ``base_url``: the host, ``http(s)://host:port``; ``token``: sent as a Bearer token.
    - ``provider``: the Slack provider (for notes on messages that already ended).
    - ``backoff_initial`` / ``backoff_max``: seconds between reconnects and POST retries.
    - ``respond_retry_for``: how long to keep retrying a POST while the host is unreachable.
    - ``replay_window``: after a downlink opens, how long after the last replayed request the
      replay counts as over (asks of earlier connections it did not replay are then gone).
    - ``heartbeat``: WebSocket ping interval, to notice a dead connection.
    - ``max_frame_bytes``: the largest downlink message handled; larger ones are skipped.
    - ``max_open_per_session``: requests of one session open in Slack at once.
    - ``review``: the review policy of the host's plan reviews (default: one approval
      decides); a session's plan review after a declined one is shown as its revision.
    - ``approvers`` / ``approver_groups``: who may decide approvals (default: whoever may
      answer questions).
    """

    def __init__(
        self,
        base_url: str,
        service: UserQuestionService,
        *,
        provider: ApprovalDesk,
        token: str | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        respond_retry_for: float = 120.0,
        replay_window: float = 2.0,
        heartbeat: float | None = 30.0,
        stop_grace: float = 5.0,
        max_frame_bytes: int = 8 * 1024 * 1024,
        max_open_per_session: int = 20,
        review: ReviewPolicy | None = None,
        approvers: Sequence[str] | None = None,
        approver_groups: Sequence[str] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("backoff needs 0 < backoff_initial <= backoff_max")
        if max_frame_bytes < 1024 or max_open_per_session < 1:
            raise ValueError("max_frame_bytes must be >= 1024 and max_open_per_session >= 1")
        self._base = base_url.rstrip("/")
        self._shown_url = redact_url(self._base)
        self._provider = provider
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._replay_window = replay_window
        self._stop_grace = stop_grace
        self._max_open = max_open_per_session
        self._logger = logger or logging.getLogger("adapters.dsh")
        self._replay: _Replay | None = None
        self._asks: dict[str, HostAsk] = {}
        self._waiting = WaitingRoom()
        self._gone: set[str] = set()
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False
        self._downlink = Downlink(
            self._base,
            self._http,
            self._headers,
            shown_url=self._shown_url,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            heartbeat=heartbeat,
            max_frame=max_frame_bytes,
            on_open=self._opened,
            on_text=self._on_message,
            on_close=self._closed,
            logger=self._logger,
        )
        self._uplink = HostUplink(
            self._base,
            self._http,
            self._headers,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            retry_for=respond_retry_for,
            stopping=lambda: self._stopping,
            logger=self._logger,
        )
        self._questions = QuestionRunner(
            service,
            provider,
            self._uplink,
            on_posted=self._posted,
            logger=self._logger,
            review=review,
        )
        self._ledger = CallLedger()
        self._approvals = ApprovalRunner(
            provider,
            self._uplink,
            approvers=approvers,
            approver_groups=approver_groups,
            on_posted=self._posted,
            logger=self._logger,
        )

    # -- public surface -------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The downlink's state."""
        return self._downlink.state

    @property
    def in_flight(self) -> int:
        """Requests of the host this client is asking or answering now (queued ones too)."""
        return len(self._asks) + self.queued

    @property
    def queued(self) -> int:
        """Requests waiting for a free place in their session's share of Slack."""
        return len(self._waiting)

    def status(self) -> dict[str, Any]:
        """For ``/healthz``: the downlink's state and the host's open questions and approvals."""
        asks = [*self._asks.values(), *self._waiting]
        approvals = sum(1 for ask in asks if ask.approval is not None)
        return {
            "dsh": self._downlink.state,
            "dshQuestions": len(asks) - approvals,
            "dshApprovals": approvals,
        }

    async def start(self) -> None:
        """Start the connection loop and return at once (the host may still be down)."""
        if self._loop is not None or self._stopping:
            raise RuntimeError("a dsh host client starts once")
        # No total timeout on the session: it would cut the long-lived downlink.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0)
        )
        self._logger.info("dsh host: connecting", extra={"url": self._shown_url})
        self._loop = asyncio.get_running_loop().create_task(
            self._downlink.run(), name="dsh downlink"
        )

    async def stop(self) -> None:
        """Stop reconnecting, release the host's open requests, close the HTTP session.

        The host's questions and approvals belong to the host, not to this process: they
        stay open in the store and in Slack (noted as "the bot is restarting"), and a bot
        started later adopts them when the host replays them.
        """
        if self._stopping:
            return
        self._stopping = True
        loop_task, self._loop = self._loop, None
        if loop_task is not None:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
        self._waiting.clear()
        asks = list(self._asks.values())
        for ask in asks:
            if ask.phase == "asking":
                try:
                    await self._provider.release(ask.request_id, RESTARTING_NOTE)
                except Exception as exc:  # the store is down: the sweep settles it later
                    self._logger.warning(
                        "dsh host: could not release a request",
                        extra={"rpc_id": ask.rpc_id, "error": describe(exc)},
                    )
                ask.controller.abort(Released())
        tasks = {ask.task for ask in asks if ask.task is not None and not ask.task.done()}
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self._stop_grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._session is not None:
            await self._session.close()
        self._downlink.state = "disconnected"
        self._logger.info("dsh host: stopped", extra={"url": self._shown_url})

    # -- the downlink ---------------------------------------------------------------------

    def _http(self) -> aiohttp.ClientSession:
        assert self._session is not None, "start() first"
        return self._session

    def _opened(self) -> None:
        self._replay = _Replay()
        self._extend(self._replay)

    def _closed(self) -> None:
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

    def _on_message(self, text: str) -> None:
        """Handle one downlink message; nothing in it may end the connection."""
        replay = self._replay
        assert replay is not None
        try:
            frame = parse_frame(text)
        except ValueError as exc:
            self._logger.warning(
                "dsh host: skipped a malformed frame", extra={"error": str(exc)[:500]}
            )
            return
        try:
            payload = frame.payload
            if isinstance(payload, QuestionRequested | ApprovalRequested):
                replay.seen.add(frame.rpc_id)
                self._extend(replay)
                if isinstance(payload, QuestionRequested):
                    ask = HostAsk(frame.rpc_id, payload.session_id, list(payload.questions))
                else:
                    # Paired now: the ledger may forget it before the ask is served.
                    aid = payload.approval_id
                    ask = HostAsk(
                        frame.rpc_id,
                        payload.session_id,
                        approval=payload,
                        call=self._ledger.call_for(aid),
                        call_known=self._ledger.knows(aid),
                    )
                self._on_requested(ask)
            elif isinstance(payload, QuestionResolved):
                self._on_resolved(payload.question_rpc_id, payload.outcome)
            elif isinstance(payload, ApprovalResolved):
                self._on_approval_resolved(payload)
            elif frame.method == SESSION_EVENT and isinstance(payload, OtherPayload):
                event = session_event(payload.model_extra or {})
                if event is not None:
                    self._ledger.observe(event)
        except Exception:  # a bug here must not drop the downlink
            self._logger.exception(
                "dsh host: could not handle a frame", extra={"rpc_id": frame.rpc_id}
            )

    # -- requests ---------------------------------------------------------------------------

    def _on_requested(self, ask: HostAsk) -> None:
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
        runner = self._questions if ask.approval is None else self._approvals
        ask.task = asyncio.get_running_loop().create_task(
            runner.serve(ask), name=f"dsh request {ask.rpc_id}"
        )
        ask.task.add_done_callback(lambda task: self._finished(ask, task))

    def _posted(self, ask: HostAsk) -> None:
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
        task = asyncio.get_running_loop().create_task(
            self._provider.add_note(latest.request_id, note)
        )
        task.add_done_callback(_ignore_result)

    def _finished(self, ask: HostAsk, task: asyncio.Task[None]) -> None:
        if self._asks.get(ask.rpc_id) is ask:
            del self._asks[ask.rpc_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            self._logger.error(
                "dsh host: request handling failed",
                extra={"rpc_id": ask.rpc_id, "error": describe(error)},
            )
        following = None if self._stopping else self._waiting.next(ask.session_id)
        if following is not None:
            self._launch(following)

    def _on_approval_resolved(self, payload: ApprovalResolved) -> None:
        def mine(ask: HostAsk) -> bool:
            return ask.approval is not None and ask.approval.approval_id == payload.approval_id

        self._waiting.remove(mine)
        for ask in [a for a in self._asks.values() if mine(a)]:
            self._on_resolved(ask.rpc_id, payload.outcome)
        self._ledger.forget(payload.approval_id)

    def _on_resolved(self, rpc_id: str, outcome: str) -> None:
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


def _ignore_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
