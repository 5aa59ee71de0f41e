"""``DshHostClient``: the bot as a connected client of a running dsh web host (§6.1, §7).

One loop holds the downlink (``GET /api/events.mux`` as a WebSocket) open, reconnecting with
backoff. Each ``question/requested`` frame becomes one ask through the ``UserQuestionService``
(so the Slack provider asks it), keyed by the frame's rpcId: a frame replayed after a
reconnect attaches to the ask already open instead of posting twice. The answer goes back
with ``POST /api/respond``; the receipt decides what the Slack message says next::

    client = DshHostClient("http://127.0.0.1:13080", service, provider=provider)
    await client.start()      # returns at once; the host may be down
    ...
    await client.stop()       # open asks end as ASK_ABORTED, their messages say why

A ``question/resolved`` frame (answered in another client, cancelled, the turn aborted)
aborts the matching ask, so its message loses its buttons at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import aiohttp
from pydantic import ValidationError

from adapters.dsh.protocol import (
    EVENTS_MUX_PATH,
    RESPOND_PATH,
    QuestionRequested,
    QuestionResolved,
    Receipt,
    answer_problem,
    answer_response,
    cancel_response,
    parse_frame,
)
from adapters.slack.ids import key_request_id
from adapters.slack.pending import PendingStore
from bot.logs import redact_url
from bot.questions.abort import AbortController
from bot.questions.errors import ASK_ABORTED, ASK_CANCELLED, UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionItem, AskUserQuestionRequest
from bot.questions.service import UserQuestionService

__all__ = [
    "ANSWERED_ELSEWHERE",
    "CANCELLED_IN_HARNESS",
    "DISCONNECTED_NOTE",
    "GONE_NOTE",
    "NOT_DELIVERED_NOTE",
    "SETTLED_ELSEWHERE",
    "ConnectionState",
    "DshHostClient",
    "QuestionNotes",
    "ask_key",
    "session_label",
]

ANSWERED_ELSEWHERE: Final = "Answered in another client."
CANCELLED_IN_HARNESS: Final = (
    "Cancelled in the harness (the agent's turn ended or the question was dismissed elsewhere)."
)
SETTLED_ELSEWHERE: Final = (
    "The harness had already settled this question elsewhere; this answer was not used."
)
DISCONNECTED_NOTE: Final = "The bot disconnected from the harness before anyone answered."
GONE_NOTE: Final = (
    "The harness no longer has this question: it ended (or the harness restarted) while the "
    "bot was disconnected."
)
NOT_DELIVERED_NOTE: Final = (
    "The harness could not be reached to take this response; it is sent again if the harness "
    "asks again."
)
REFUSED: Final = (
    "The harness refused that answer: it does not match the question the harness is waiting "
    "for (bad-response)."
)
REOPENED_NOTE: Final = "The harness is still waiting for an answer to this question."

ConnectionState = Literal["connecting", "connected", "disconnected"]
"""What ``status()`` reports about the downlink."""

_Phase = Literal["asking", "responding"]
_HTTP_FAILURES = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
_PASSING_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
_POST_TIMEOUT: Final = aiohttp.ClientTimeout(total=30.0)
_GONE_REMEMBERED: Final = 1024


class QuestionNotes(Protocol):
    """What the client needs of the provider beyond ``ask``: its store, notes on messages."""

    @property
    def store(self) -> PendingStore:
        """Where the provider keeps its requests."""
        ...

    async def add_note(self, request_id: str, note: str) -> object:
        """Show ``note`` on the message of request ``request_id`` (open or finished)."""
        ...


def ask_key(rpc_id: str) -> str:
    """The provider's idempotency key for the question with this rpcId."""
    return f"dsh:{rpc_id}"


def session_label(session_id: str) -> str:
    """Who is asking, as the Slack message shows it: ``session`` and a short session id."""
    return f"session {session_id[:8]}"


@dataclass(frozen=True, slots=True)
class _Retry:
    """Why the person is asked again: the note to reopen with, and the one if that fails."""

    note: str
    stuck: str

    @classmethod
    def of(cls, what: str) -> _Retry:
        """The notes for an answer that was not taken, for the reason ``what``."""
        return cls(
            f"{what} Please answer again.",
            f"{what} This message could not be reopened; answer in the harness instead.",
        )


class _Refused(Exception):
    """The host answered the POST with something other than a receipt."""


class _Unavailable(Exception):
    """The host (or a proxy before it) answered the POST with a passing failure: retry."""


@dataclass(eq=False)
class _Ask:
    """One question of the host being asked in Slack."""

    rpc_id: str
    session_id: str
    questions: list[AskUserQuestionItem]
    controller: AbortController = field(default_factory=AbortController)
    phase: _Phase = "asking"
    resolved: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def request_id(self) -> str:
        """The provider's request id for this question."""
        return key_request_id(ask_key(self.rpc_id))


@dataclass(eq=False)
class _Replay:
    """The question frames seen since a downlink opened, until the host's replay is over."""

    seen: set[str] = field(default_factory=set)
    over: bool = False


class DshHostClient:
    """Answers a running dsh web host's questions through ``service`` (and so in Slack).

    - ``base_url``: the host, ``http(s)://host:port``; ``token``: sent as a Bearer token.
    - ``provider``: the Slack provider (for notes on messages that already ended).
    - ``backoff_initial`` / ``backoff_max``: seconds between reconnects and POST retries.
    - ``respond_retry_for``: how long to keep retrying a POST while the host is unreachable.
    - ``replay_window``: after a reconnect, how long to wait for the host to replay its pending
      questions before asks it did not replay are closed as gone.
    - ``heartbeat``: WebSocket ping interval, to notice a dead connection.
    """

    def __init__(
        self,
        base_url: str,
        service: UserQuestionService,
        *,
        provider: QuestionNotes,
        token: str | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        respond_retry_for: float = 120.0,
        replay_window: float = 2.0,
        heartbeat: float | None = 30.0,
        stop_grace: float = 5.0,
        logger: logging.Logger | None = None,
    ) -> None:
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("backoff needs 0 < backoff_initial <= backoff_max")
        self._base = base_url.rstrip("/")
        self._shown_url = redact_url(self._base)
        self._service = service
        self._provider = provider
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._respond_retry_for = respond_retry_for
        self._replay_window = replay_window
        self._heartbeat = heartbeat
        self._stop_grace = stop_grace
        self._logger = logger or logging.getLogger("adapters.dsh")
        self._state: ConnectionState = "connecting"
        self._ever_connected = False
        self._asks: dict[str, _Ask] = {}
        self._gone: set[str] = set()
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    # -- public surface -------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The downlink's state."""
        return self._state

    @property
    def in_flight(self) -> int:
        """Questions of the host this client is asking or answering now."""
        return len(self._asks)

    def status(self) -> dict[str, Any]:
        """For ``/healthz``: ``{"dsh": state, "dshQuestions": in-flight questions}``."""
        return {"dsh": self._state, "dshQuestions": len(self._asks)}

    async def start(self) -> None:
        """Start the connection loop and return at once (the host may still be down)."""
        if self._loop is not None or self._stopping:
            raise RuntimeError("a dsh host client starts once")
        # No total timeout on the session: it would cut the long-lived downlink.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0)
        )
        self._logger.info("dsh host: connecting", extra={"url": self._shown_url})
        self._loop = asyncio.get_running_loop().create_task(self._run(), name="dsh downlink")

    async def stop(self) -> None:
        """Stop reconnecting, end every ask this client started, close the HTTP session."""
        if self._stopping:
            return
        self._stopping = True
        loop_task, self._loop = self._loop, None
        if loop_task is not None:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
        asks = list(self._asks.values())
        for ask in asks:
            if ask.phase == "asking":
                ask.controller.abort(DISCONNECTED_NOTE)
        tasks = {ask.task for ask in asks if ask.task is not None and not ask.task.done()}
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self._stop_grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._session is not None:
            await self._session.close()
        self._state = "disconnected"
        self._logger.info("dsh host: stopped", extra={"url": self._shown_url})

    # -- the downlink ---------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._session is not None
        url = self._base + EVENTS_MUX_PATH
        delay = self._backoff_initial
        while True:
            try:
                async with self._session.ws_connect(
                    url,
                    headers=self._headers,
                    heartbeat=self._heartbeat,
                    timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
                ) as ws:
                    self._connected()
                    delay = self._backoff_initial
                    await self._read(ws)
                reason = "the host closed the downlink"
            except aiohttp.WSServerHandshakeError as exc:
                reason = f"the host refused the downlink: HTTP {exc.status}"
                if exc.status in (401, 403):
                    reason += " (check DSH_HOST_TOKEN)"
            except _HTTP_FAILURES as exc:
                reason = _describe(exc)
            except Exception as exc:  # a bug in frame handling must not end the loop
                self._logger.exception("dsh host: downlink failed")
                reason = _describe(exc)
            self._lost(reason)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self._backoff_max)

    def _connected(self) -> None:
        again = self._ever_connected
        self._ever_connected = True
        self._state = "connected"
        self._logger.info(
            "dsh host: reconnected" if again else "dsh host: connected",
            extra={"url": self._shown_url},
        )

    def _lost(self, reason: str) -> None:
        if self._state == "connected":
            self._state = "disconnected"
            self._logger.warning(
                "dsh host: disconnected; reconnecting with backoff",
                extra={"url": self._shown_url, "reason": reason},
            )
        elif self._state == "connecting":
            self._state = "disconnected"
            self._logger.warning(
                "dsh host: cannot connect; retrying with backoff",
                extra={"url": self._shown_url, "reason": reason},
            )
        else:
            self._logger.debug("dsh host: still not connected", extra={"reason": reason})

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        # The host replays every pending question as soon as a downlink opens, before any
        # other frame: once that is over, an ask it did not replay has ended without us.
        replay = _Replay()
        timer = asyncio.get_running_loop().call_later(self._replay_window, self._settle, replay)
        try:
            async for message in ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    if not self._on_text(message.data, replay) and not replay.over:
                        timer.cancel()
                        self._settle(replay)
                elif message.type is aiohttp.WSMsgType.ERROR:
                    break
                else:
                    self._logger.warning(
                        "dsh host: skipped a non-text downlink message",
                        extra={"kind": message.type.name},
                    )
        finally:
            timer.cancel()

    def _settle(self, replay: _Replay) -> None:
        """The replay is over: abort the asks of earlier connections the host did not replay."""
        if replay.over:
            return
        replay.over = True
        for ask in list(self._asks.values()):
            if ask.phase == "asking" and ask.rpc_id not in replay.seen:
                self._logger.info(
                    "dsh host: question no longer pending after reconnect",
                    extra={"rpc_id": ask.rpc_id, "session": ask.session_id},
                )
                if len(self._gone) >= _GONE_REMEMBERED:
                    self._gone.pop()
                self._gone.add(ask.rpc_id)
                ask.controller.abort(GONE_NOTE)

    def _on_text(self, text: str, replay: _Replay) -> bool:
        """Handle one frame; ``True`` if it is a ``question/requested`` (possibly a replay)."""
        try:
            frame = parse_frame(text)
        except ValueError as exc:
            self._logger.warning(
                "dsh host: skipped a malformed frame", extra={"error": str(exc)[:500]}
            )
            return False
        payload = frame.payload
        if isinstance(payload, QuestionRequested):
            replay.seen.add(frame.rpc_id)
            self._on_requested(frame.rpc_id, payload)
            return True
        if isinstance(payload, QuestionResolved):
            self._on_resolved(payload)
        return False

    def _on_requested(self, rpc_id: str, payload: QuestionRequested) -> None:
        if rpc_id in self._asks:
            return  # a replay: the ask already open is the one
        ask = _Ask(rpc_id, payload.session_id, list(payload.questions))
        self._asks[rpc_id] = ask
        ask.task = asyncio.get_running_loop().create_task(
            self._serve(ask), name=f"dsh question {rpc_id}"
        )
        ask.task.add_done_callback(lambda task: self._finished(ask, task))

    def _finished(self, ask: _Ask, task: asyncio.Task[None]) -> None:
        if self._asks.get(ask.rpc_id) is ask:
            del self._asks[ask.rpc_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            self._logger.error(
                "dsh host: question handling failed",
                extra={"rpc_id": ask.rpc_id, "error": f"{type(error).__name__}: {error}"},
            )

    def _on_resolved(self, payload: QuestionResolved) -> None:
        ask = self._asks.get(payload.question_rpc_id)
        # Not ours, or already answered here (the echo of our own answer): nothing to do.
        if ask is None or ask.phase != "asking":
            if ask is not None:
                ask.resolved = payload.outcome
            return
        ask.resolved = payload.outcome
        ask.controller.abort(
            ANSWERED_ELSEWHERE if payload.outcome == "answered" else CANCELLED_IN_HARNESS
        )

    # -- one question ---------------------------------------------------------------------

    async def _serve(self, ask: _Ask) -> None:
        """Ask in Slack until the host takes an answer (or the question ends otherwise)."""
        retry: _Retry | None = None
        if ask.rpc_id in self._gone:
            # We closed it as gone, yet the host still has it: reopen the same message.
            self._gone.discard(ask.rpc_id)
            retry = _Retry(REOPENED_NOTE, GONE_NOTE)
        key, label = ask_key(ask.rpc_id), session_label(ask.session_id)
        while True:
            ask.phase = "asking"
            before = await self._version(ask) if retry is not None else None
            note = None if retry is None else retry.note
            request = AskUserQuestionRequest(
                questions=ask.questions,
                signal=ask.controller.signal,
                options=AskOptions(key=key, label=label, note=note),
            )
            try:
                answer = await self._service.ask(request)
            except UserQuestionError as exc:
                await self._not_answered(ask, exc)
                return
            if retry is not None and before is not None and await self._version(ask) == before:
                # Nothing was written: the provider did not reopen the message and handed back
                # the earlier outcome. Sending it again would loop; say so and stop here.
                self._logger.error(
                    "dsh host: could not reopen the question in Slack",
                    extra={"rpc_id": ask.rpc_id},
                )
                await self._provider.add_note(ask.request_id, retry.stuck)
                return
            problem = answer_problem(ask.questions, answer)
            if problem is not None:
                # The host would refuse it: do not send it, ask the person again at once.
                self._logger.info(
                    "dsh host: answer would not match the question; asking again",
                    extra={"rpc_id": ask.rpc_id, "problem": problem},
                )
                retry = _Retry.of(f"That answer cannot be sent to the harness: {problem}.")
                continue
            ask.phase = "responding"
            receipt = await self._respond(ask, answer_response(ask.rpc_id, ask.session_id, answer))
            if receipt is None:
                await self._provider.add_note(ask.request_id, NOT_DELIVERED_NOTE)
                return
            if receipt.accepted:
                self._logger.info(
                    "dsh host: answer accepted",
                    extra={"rpc_id": ask.rpc_id, "session": ask.session_id},
                )
                return
            if receipt.reason == "not-pending":
                await self._provider.add_note(ask.request_id, self._settled_note(ask))
                return
            self._logger.warning(
                "dsh host: answer refused (bad-response); asking again",
                extra={"rpc_id": ask.rpc_id},
            )
            retry = _Retry.of(REFUSED)

    async def _version(self, ask: _Ask) -> int | None:
        record = await self._provider.store.get(ask.request_id)
        return None if record is None else record.version

    async def _not_answered(self, ask: _Ask, error: UserQuestionError) -> None:
        if error.code == ASK_CANCELLED:
            ask.phase = "responding"
            receipt = await self._respond(ask, cancel_response(ask.rpc_id))
            if receipt is None:
                await self._provider.add_note(ask.request_id, NOT_DELIVERED_NOTE)
            elif receipt.reason == "not-pending":
                await self._provider.add_note(ask.request_id, self._settled_note(ask))
            elif not receipt.accepted:
                self._logger.warning(
                    "dsh host: dismissal refused",
                    extra={"rpc_id": ask.rpc_id, "reason": receipt.reason},
                )
            return
        if error.code == ASK_ABORTED:
            self._logger.debug("dsh host: ask ended", extra={"rpc_id": ask.rpc_id})
            return
        # The question could not be asked in Slack (delivery, limits, timeout): the host keeps
        # it pending for its other clients.
        self._logger.warning(
            "dsh host: could not ask in Slack",
            extra={"rpc_id": ask.rpc_id, "code": error.code, "error": error.message},
        )

    @staticmethod
    def _settled_note(ask: _Ask) -> str:
        if ask.resolved == "cancelled":
            return f"{CANCELLED_IN_HARNESS} This answer was not used."
        return SETTLED_ELSEWHERE

    async def _respond(self, ask: _Ask, body: Mapping[str, Any]) -> Receipt | None:
        """POST ``body``; retry while the host is unreachable; ``None`` if it never took it."""
        assert self._session is not None
        url = self._base + RESPOND_PATH
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._respond_retry_for
        delay = self._backoff_initial
        warned = False
        while True:
            try:
                async with self._session.post(
                    url, json=body, headers=self._headers, timeout=_POST_TIMEOUT
                ) as response:
                    if response.status != 200:
                        detail = f"HTTP {response.status}: {(await response.text())[:200]}"
                        if response.status in _PASSING_STATUSES:
                            raise _Unavailable(detail)
                        raise _Refused(detail)
                    return Receipt.model_validate(await response.json(content_type=None))
            except (_Refused, ValueError, ValidationError) as exc:
                # The host is up and answered, but not with a receipt: retrying will not help.
                self._logger.error(
                    "dsh host: response not taken",
                    extra={"rpc_id": ask.rpc_id, "error": str(exc)[:300]},
                )
                return None
            except (_Unavailable, *_HTTP_FAILURES) as exc:
                if self._stopping or loop.time() + delay > deadline:
                    self._logger.error(
                        "dsh host: gave up sending a response",
                        extra={"rpc_id": ask.rpc_id, "error": _describe(exc)},
                    )
                    return None
                if not warned:
                    warned = True
                    self._logger.warning(
                        "dsh host: could not send a response; retrying",
                        extra={"rpc_id": ask.rpc_id, "error": _describe(exc)},
                    )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff_max)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
