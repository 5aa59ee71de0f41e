"""A local stand-in of the dsh web host's question relay (§6.1, §7), for tests.

It serves the real host's protocol on 127.0.0.1:

- ``GET /api/events.mux``: a WebSocket downlink only (a plain GET gets 426), one
  ``server-request`` JSON per text message. Every new downlink first receives every
  still-pending ``question/requested`` with its original rpcId; then every frame is
  broadcast to every open downlink.
- ``POST /api/respond``: ``application/json`` only (else 415), JSON only (else 400), then
  the host's ``respond`` rules; every receipt has status 200.

The test plays the agent's side::

    host = DshHostStandIn()
    base_url = await host.start()
    rpc_id, answer = host.ask("s1", [AskUserQuestionItem(id="q", question="Go?")])
    ...  # the client under test answers over HTTP
    assert (await answer).to_wire() == {...}
    await host.stop()

Frames around an ask come in the real host's order: ``session/event`` ``tool/call``,
``question/requested`` … ``question/resolved``, ``session/event`` ``tool/result``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from pydantic import ValidationError

from adapters.dsh.protocol import (
    CANCELLED_CODE,
    EVENTS_MUX_PATH,
    RESPOND_PATH,
    ErrorResult,
    Outcome,
    QuestionResponse,
    Receipt,
    ReceiptReason,
    answer_problem,
    parse_client_response,
    question_requested_frame,
    question_resolved_frame,
)
from bot.questions.errors import ASK_ABORTED, ASK_CANCELLED, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

__all__ = [
    "ABORTED_MESSAGE",
    "CANCELLED_MESSAGE",
    "DISPOSED_MESSAGE",
    "DshHostStandIn",
    "PendingQuestion",
]

CANCELLED_MESSAGE = "the user cancelled ask_user_question"
ABORTED_MESSAGE = "ask_user_question was aborted before the user answered"
DISPOSED_MESSAGE = "web user-questions provider was disposed"


@dataclass(eq=False)
class PendingQuestion:
    """One ask waiting for its answer, as the host keeps it."""

    rpc_id: str
    session_id: str
    questions: list[AskUserQuestionItem]
    future: asyncio.Future[AskUserQuestionAnswer]
    call_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def frame(self) -> str:
        """The ``question/requested`` frame, the same on every (re)play."""
        return json.dumps(question_requested_frame(self.rpc_id, self.session_id, self.questions))


@dataclass(eq=False)
class _Downlink:
    ws: web.WebSocketResponse
    queue: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)


def _mark_retrieved(future: asyncio.Future[AskUserQuestionAnswer]) -> None:
    # A test need not await every ask; keep asyncio from logging "never retrieved".
    if not future.cancelled():
        future.exception()


class DshHostStandIn:
    """The dsh web host's question relay on a local port, driven by the test."""

    def __init__(self, *, token: str | None = None, interleave: bool = True) -> None:
        self.token = token
        self.interleave = interleave
        self.responses: list[Any] = []
        self.frames: list[dict[str, Any]] = []
        self.total_connections = 0
        self._pending: dict[str, PendingQuestion] = {}
        self._forced: list[Receipt] = []
        self._downlinks: set[_Downlink] = set()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The bound port (kept after ``stop`` so that ``start(port=host.port)`` reuses it)."""
        if self._port is None:
            raise RuntimeError("the stand-in was never started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        """The downlink's URL, ``ws://127.0.0.1:<port>/api/events.mux``."""
        return f"ws://127.0.0.1:{self.port}{EVENTS_MUX_PATH}"

    @property
    def running(self) -> bool:
        """Whether the server is up."""
        return self._runner is not None

    async def start(self, port: int = 0, *, keep_state: bool = False) -> str:
        """Serve on ``port`` (0: any free) and return the base URL; ``keep_state`` keeps asks."""
        # Without keep_state, pending questions of an earlier run are dropped and their
        # askers fail with ASK_ABORTED (the provider was disposed), like a fresh host process.
        if self._runner is not None:
            raise RuntimeError("the stand-in is already running")
        if not keep_state:
            for pending in list(self._pending.values()):
                self._claim(pending, "cancelled")
                self._fail(pending, UserQuestionError(DISPOSED_MESSAGE, ASK_ABORTED))
            self._forced.clear()
        app = web.Application()
        app.router.add_get(EVENTS_MUX_PATH, self._events_mux)
        app.router.add_post(RESPOND_PATH, self._respond)
        runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            site = web.SockSite(runner, sock)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = sock.getsockname()[1]
        return self.base_url

    async def stop(self) -> None:
        """Close every downlink and the server; pending questions stay (see ``start``)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        for downlink in list(self._downlinks):
            downlink.queue.put_nowait(None)
        await asyncio.gather(
            *(downlink.ws.close(code=1001) for downlink in list(self._downlinks)),
            return_exceptions=True,
        )
        await runner.cleanup()
        await self._notify()

    async def __aenter__(self) -> DshHostStandIn:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ the agent's side

    def ask(
        self, session_id: str, questions: Sequence[AskUserQuestionItem]
    ) -> tuple[str, asyncio.Future[AskUserQuestionAnswer]]:
        """Park and broadcast an ask; its future gets the answer or a ``UserQuestionError``."""
        future: asyncio.Future[AskUserQuestionAnswer] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_mark_retrieved)
        pending = PendingQuestion(str(uuid.uuid4()), session_id, list(questions), future)
        self._pending[pending.rpc_id] = pending
        if self.interleave:
            self._broadcast(self._tool_event(pending, "tool/call"))
        self._broadcast(json.loads(pending.frame()))
        return pending.rpc_id, future

    def abort(self, rpc_id: str) -> bool:
        """The agent's turn aborted: claim as cancelled, broadcast, fail with ``ASK_ABORTED``."""
        pending = self._pending.get(rpc_id)
        if pending is None:
            return False
        self._claim(pending, "cancelled")
        self._fail(pending, UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED))
        return True

    def resolve_elsewhere(self, rpc_id: str, answer: AskUserQuestionAnswer) -> bool:
        """Another client answered first: claim as answered, broadcast, resolve with ``answer``."""
        pending = self._pending.get(rpc_id)
        if pending is None:
            return False
        self._claim(pending, "answered")
        if not pending.future.done():
            pending.future.set_result(answer)
        return True

    def force_receipt(self, reason: ReceiptReason, *, times: int = 1) -> None:
        """Make the next ``times`` POSTs get ``{accepted: false, reason}``, changing nothing."""
        self._forced.extend(Receipt(accepted=False, reason=reason) for _ in range(times))

    def is_pending(self, rpc_id: str) -> bool:
        """Whether ``rpc_id`` is still waiting for an answer."""
        return rpc_id in self._pending

    @property
    def pending(self) -> list[PendingQuestion]:
        """The pending questions, oldest first."""
        return list(self._pending.values())

    @property
    def connections(self) -> int:
        """How many downlinks are open now."""
        return len(self._downlinks)

    async def wait_for_connections(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds for at least ``n`` open downlinks (replay queued)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self._downlinks) >= n)

    async def wait_for_responses(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds for at least ``n`` POST bodies in total."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.responses) >= n)

    # ------------------------------------------------------------------ internals

    def _tool_event(self, pending: PendingQuestion, kind: str, **extra: Any) -> dict[str, Any]:
        event = {"type": kind, "callId": pending.call_id, "name": "ask_user_question", **extra}
        return {
            "type": "server-request",
            "rpcId": str(uuid.uuid4()),
            "method": "session/event",
            "payload": {"type": "session/event", "sessionId": pending.session_id, "event": event},
        }

    def _broadcast(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        text = json.dumps(frame)
        for downlink in self._downlinks:
            downlink.queue.put_nowait(text)

    def _claim(self, pending: PendingQuestion, outcome: Outcome) -> None:
        # Deleting first makes the first claimant win (claimQuestion).
        if self._pending.pop(pending.rpc_id, None) is None:
            return
        self._broadcast(
            question_resolved_frame(str(uuid.uuid4()), pending.session_id, pending.rpc_id, outcome)
        )
        if self.interleave:
            self._broadcast(self._tool_event(pending, "tool/result", outcome=outcome))

    @staticmethod
    def _fail(pending: PendingQuestion, error: BaseException) -> None:
        if not pending.future.done():
            pending.future.set_exception(error)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _authorized(self, request: web.Request) -> bool:
        return self.token is None or request.headers.get("Authorization") == (
            f"Bearer {self.token}"
        )

    async def _events_mux(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        ws = web.WebSocketResponse(timeout=1.0)
        if not ws.can_prepare(request).ok:
            return web.Response(
                status=426,
                text="events.mux is served as a WebSocket only\n",
                headers={"Upgrade": "websocket", "Connection": "Upgrade"},
            )
        await ws.prepare(request)
        downlink = _Downlink(ws)
        # Replay and joining the broadcast set happen together: no frame is lost or doubled.
        for pending in self._pending.values():
            downlink.queue.put_nowait(pending.frame())
        self._downlinks.add(downlink)
        self.total_connections += 1
        await self._notify()
        pump = asyncio.create_task(self._pump(downlink))
        try:
            async for message in ws:
                if message.type is WSMsgType.ERROR:
                    break
        finally:
            self._downlinks.discard(downlink)
            downlink.queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await pump
            await self._notify()
        return ws

    @staticmethod
    async def _pump(downlink: _Downlink) -> None:
        while (text := await downlink.queue.get()) is not None:
            if downlink.ws.closed:
                return
            try:
                await downlink.ws.send_str(text)
            except ConnectionError:
                return

    async def _respond(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        if request.content_type != "application/json":
            return web.json_response({"error": "content-type must be application/json"}, status=415)
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response({"error": "body is not JSON"}, status=400)
        self.responses.append(body)
        await self._notify()
        receipt = self._forced.pop(0) if self._forced else self._receipt(body)
        return web.json_response(receipt.to_wire())

    def _receipt(self, body: Any) -> Receipt:
        try:
            message = parse_client_response(body)
        except ValueError:
            return Receipt(accepted=False, reason="bad-response")
        pending = self._pending.get(message.rpc_id)
        if pending is None:
            return Receipt(accepted=False, reason="not-pending")
        result = message.result
        if isinstance(result, ErrorResult):
            if result.error.code != CANCELLED_CODE:
                return Receipt(accepted=False, reason="bad-response")
            self._claim(pending, "cancelled")
            self._fail(pending, UserQuestionError(CANCELLED_MESSAGE, ASK_CANCELLED))
            return Receipt(accepted=True)
        try:
            value = QuestionResponse.model_validate(result.value)
        except ValidationError:
            return Receipt(accepted=False, reason="bad-response")
        if value.session_id != pending.session_id:
            return Receipt(accepted=False, reason="bad-response")
        if answer_problem(pending.questions, value.answer) is not None:
            return Receipt(accepted=False, reason="bad-response")
        self._claim(pending, "answered")
        if not pending.future.done():
            pending.future.set_result(value.answer)
        return Receipt(accepted=True)
