"""A local stand-in of the dsh web host's relay (§6.1, §7 and dsh-approvals.md), for tests.

It behaves as ``dsh-captured/*.jsonl`` shows the real host behaving, on 127.0.0.1:

- ``GET /api/events.mux``: a WebSocket downlink only (a plain GET gets 426), one
  ``server-request`` JSON per text message. A new downlink first gets one
  ``session/subscribed`` per attached session, then every pending ``question/requested``
  and every pending ``approval/requested``, byte-identical with their original rpcIds,
  then a ``session/queue`` baseline per session; then it joins the broadcast. Anything a
  client sends on the downlink closes it with 1008.
- ``POST /api/respond``: ``application/json`` only (else 415), JSON only (else 400), then
  the host's ``respond`` rules for questions and approvals; every receipt has status 200.
- ``POST /api/session.history``: ``{"sessionId"}`` → ``{"events": [{"event": …}, …]}``.

Session ids are ``session-<uuid>`` (``new_session_id``); every session event carries its
session's next ``seq``. The test plays the agent's side::

    host = DshHostStandIn()
    base_url = await host.start()
    rpc_id, answer = host.ask(sid, [AskUserQuestionItem(id="q", question="Go?")])
    rpc_id, answer = host.ask_raw(sid, [{"id": "q", "question": "Go?", "extra": 1}])
    rpc_id, approval_id, outcome = host.request_approval(sid, "bash", {"command": "ls /srv"})
    ...  # the client under test answers over HTTP
    await host.stop()

Frames come in the real host's order: ``tool/call`` event, then ``question/requested`` …
``question/resolved``, ``tool/result``; for an approval ``tool/call``, ``approval/asked``,
``approval/requested`` … ``approval/resolved``, ``approval/decided``, ``tool/result``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from pydantic import ValidationError

from adapters.dsh.protocol import (
    CANCELLED_CODE,
    EVENTS_MUX_PATH,
    RESPOND_PATH,
    SESSION_HISTORY_PATH,
    Outcome,
    Receipt,
    ReceiptReason,
    ResolvedOutcome,
    answer_problem,
)
from bot.questions.errors import ASK_ABORTED, ASK_CANCELLED, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from tests.dsh_wire import (
    ApprovalResponse,
    ErrorResult,
    QuestionResponse,
    approval_requested_frame,
    approval_resolved_frame,
    parse_client_response,
    question_requested_frame,
    question_resolved_frame,
)

__all__ = [
    "ABORTED_MESSAGE",
    "CANCELLED_MESSAGE",
    "DISPOSED_MESSAGE",
    "DshHostStandIn",
    "PendingApproval",
    "PendingQuestion",
    "new_session_id",
]

CANCELLED_MESSAGE = "the user cancelled ask_user_question"
ABORTED_MESSAGE = "ask_user_question was aborted before the user answered"
DISPOSED_MESSAGE = "web user-questions provider was disposed"
DEFAULT_REASON = (
    "escalate sandbox to danger-full-access: The user asked for a file under /srv, which is "
    "outside the workspace."
)


def new_session_id() -> str:
    """A session id as the real host mints them: ``session-<uuid>``."""
    return f"session-{uuid.uuid4()}"


def _server_request(method: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "server-request",
        "rpcId": str(uuid.uuid4()),
        "method": method,
        "payload": payload,
    }


@dataclass(eq=False)
class PendingQuestion:
    """One ask waiting for its answer, as the host keeps it."""

    rpc_id: str
    session_id: str
    questions: list[AskUserQuestionItem]
    future: asyncio.Future[AskUserQuestionAnswer]
    call_id: str = field(default_factory=lambda: f"call-{uuid.uuid4().hex[:12]}")
    wire: list[dict[str, Any]] | None = None
    """The questions as the tool gave them, extra keys too (``ask_raw``); else ``questions``."""

    def frame(self) -> str:
        """The ``question/requested`` frame, the same on every (re)play."""
        frame = question_requested_frame(self.rpc_id, self.session_id, self.questions)
        if self.wire is not None:
            frame["payload"]["questions"] = self.wire  # verbatim, as the host pushes them
        return json.dumps(frame)


@dataclass(eq=False)
class PendingApproval:
    """One approval waiting for an answer; its future gets the outcome."""

    rpc_id: str
    session_id: str
    approval_id: str
    tool_name: str
    call_id: str
    reason: str | None
    future: asyncio.Future[ResolvedOutcome]

    def frame(self) -> str:
        """The ``approval/requested`` frame, the same on every (re)play."""
        return json.dumps(
            approval_requested_frame(
                self.rpc_id,
                self.session_id,
                self.approval_id,
                self.tool_name,
                call_id=self.call_id,
                reason=self.reason,
            )
        )


@dataclass(eq=False)
class _Session:
    events: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0

    @property
    def last_seq(self) -> int:
        return len(self.events) - 1


@dataclass(eq=False)
class _Downlink:
    ws: web.WebSocketResponse
    queue: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)


# The host's frame schema (askUserQuestionItemSchema, §7), written out here and not taken
# from the client under test: what the host's own checks read of a question.
_QUESTION_KEYS = frozenset({"id", "question", "detail", "header", "options", "multiSelect"})
_OPTION_KEYS = frozenset({"label", "description"})
_INTENT_KEYS = frozenset({"kind", "approve"})


def _known_keys(question: Mapping[str, Any]) -> dict[str, Any]:
    """``question`` with the keys the host's schema does not know dropped (zod's strip)."""
    known = {key: value for key, value in question.items() if key in _QUESTION_KEYS}
    if isinstance(question.get("options"), list):
        known["options"] = [
            {key: value for key, value in option.items() if key in _OPTION_KEYS}
            for option in question["options"]
        ]
    if isinstance(question.get("intent"), dict):
        intent = question["intent"]
        known["intent"] = {key: value for key, value in intent.items() if key in _INTENT_KEYS}
    return known


def _mark_retrieved(future: asyncio.Future[Any]) -> None:
    # A test need not await every ask; keep asyncio from logging "never retrieved".
    if not future.cancelled():
        future.exception()


class DshHostStandIn:
    """The dsh web host's relay on a local port, driven by the test."""

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.responses: list[Any] = []
        self.frames: list[dict[str, Any]] = []
        self.history_requests: list[str] = []
        self.total_connections = 0
        self._sessions: dict[str, _Session] = {}
        self._pending: dict[str, PendingQuestion] = {}
        self._approvals: dict[str, PendingApproval] = {}
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

    async def start(self, port: int = 0, *, after_outage: bool = False) -> str:
        """Serve on ``port`` (0: any free) and return the base URL.

        By default this is a fresh host process (a first start, or a restart): pending
        questions fail with ASK_ABORTED (the provider was disposed), approvals were settled
        as cancelled at shutdown, and no session is attached. The real host never replays a
        request from before its restart (``questions.jsonl``: rpcId 2bd021a2 is not
        replayed; dsh-approvals.md: pending requests do not survive a host restart).

        ``after_outage=True`` is not a restart: the host process lived on but was out of
        reach (a network outage or partition) and is reachable again, so its pending
        questions and approvals, sessions and forced receipts are as they were, and a new
        downlink replays them.
        """
        if self._runner is not None:
            raise RuntimeError("the stand-in is already running")
        if not after_outage:
            for pending in list(self._pending.values()):
                self._claim(pending, "cancelled")
                self._fail(pending, UserQuestionError(DISPOSED_MESSAGE, ASK_ABORTED))
            for approval in list(self._approvals.values()):
                self._settle(approval, "cancelled")
            self._forced.clear()
            self._sessions.clear()
        app = web.Application()
        app.router.add_get(EVENTS_MUX_PATH, self._events_mux)
        app.router.add_post(RESPOND_PATH, self._respond)
        app.router.add_post(SESSION_HISTORY_PATH, self._history)
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
        """Close every downlink and the server; pending requests stay (see ``start``)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        await self.drop_connections(code=1001)
        await runner.cleanup()
        await self._notify()

    async def drop_connections(self, *, code: int = 1011) -> None:
        """Close every open downlink (the host stays up): a dropped connection."""
        for downlink in list(self._downlinks):
            downlink.queue.put_nowait(None)
        await asyncio.gather(
            *(downlink.ws.close(code=code) for downlink in list(self._downlinks)),
            return_exceptions=True,
        )

    async def __aenter__(self) -> DshHostStandIn:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ the agent's side

    def attach(self, session_id: str) -> None:
        """Attach a session (as opening it in ``dsh web`` does): it gets ``session/subscribed``."""
        if session_id not in self._sessions:
            self._sessions[session_id] = _Session()
            for kind, data in (
                ("permission/preset", {"preset": "workspace-write"}),
                ("sandbox/mode", {"mode": "workspace-write"}),
                ("approval/policy", {"policy": "ask"}),
            ):
                self._event(session_id, kind, data)
            self._broadcast(self._subscribed(session_id))

    def ask(
        self, session_id: str, questions: Sequence[AskUserQuestionItem]
    ) -> tuple[str, asyncio.Future[AskUserQuestionAnswer]]:
        """Park and broadcast an ask; its future gets the answer or a ``UserQuestionError``."""
        return self._park(session_id, list(questions), None)

    def ask_raw(
        self, session_id: str, questions: Sequence[Mapping[str, Any]]
    ) -> tuple[str, asyncio.Future[AskUserQuestionAnswer]]:
        """As ``ask``, with the questions as raw JSON, pushed verbatim, keys the seam lacks too.

        The tool's schema lets extra keys through (``additionalProperties: true``, §5.3: an
        option ``{"label": "pnpm", "recommended": true}``) and the host pushes the questions
        as given (§6.1); its own checks read the known keys only (zod's strip).
        """
        wire = [dict(question) for question in questions]
        known = [AskUserQuestionItem.model_validate(_known_keys(question)) for question in wire]
        return self._park(session_id, known, wire)

    def _park(
        self,
        session_id: str,
        questions: list[AskUserQuestionItem],
        wire: list[dict[str, Any]] | None,
    ) -> tuple[str, asyncio.Future[AskUserQuestionAnswer]]:
        self.attach(session_id)
        future: asyncio.Future[AskUserQuestionAnswer] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_mark_retrieved)
        pending = PendingQuestion(str(uuid.uuid4()), session_id, questions, future, wire=wire)
        self._pending[pending.rpc_id] = pending
        shown = wire if wire is not None else [question.to_wire() for question in questions]
        self._tool_call(session_id, pending.call_id, "ask_user_question", {"questions": shown})
        self._broadcast(json.loads(pending.frame()))
        return pending.rpc_id, future

    def request_approval(
        self,
        session_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        reason: str | None = DEFAULT_REASON,
        call_id: str = "mock-call-1",
    ) -> tuple[str, str, asyncio.Future[ResolvedOutcome]]:
        """A tool asks for wider rights: ``tool/call``, ``approval/asked``, the request.

        Returns ``(rpc_id, approval_id, future)``; the future gets the outcome
        (``allowed-once``, ``rejected`` or ``cancelled``).
        """
        self.attach(session_id)
        future: asyncio.Future[ResolvedOutcome] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_mark_retrieved)
        approval = PendingApproval(
            str(uuid.uuid4()), session_id, str(uuid.uuid4()), tool_name, call_id, reason, future
        )
        self._tool_call(session_id, call_id, tool_name, arguments)
        asked: dict[str, Any] = {
            "id": approval.approval_id,
            "toolName": tool_name,
            "callId": call_id,
        }
        if reason is not None:
            asked["reason"] = reason
        self._event(session_id, "approval/asked", asked)
        self._approvals[approval.rpc_id] = approval
        self._broadcast(json.loads(approval.frame()))
        return approval.rpc_id, approval.approval_id, future

    def cancel_turn(self, session_id: str) -> int:
        """``session.cancel``: settle the session's approvals as cancelled, abort its asks."""
        count = 0
        for approval in [a for a in self._approvals.values() if a.session_id == session_id]:
            self._settle(approval, "cancelled")
            count += 1
        for pending in [p for p in self._pending.values() if p.session_id == session_id]:
            self.abort(pending.rpc_id)
            count += 1
        return count

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

    def approve_elsewhere(self, rpc_id: str, outcome: ResolvedOutcome = "allowed-once") -> bool:
        """Another client answered the approval first."""
        approval = self._approvals.get(rpc_id)
        if approval is None:
            return False
        self._settle(approval, outcome)
        return True

    def force_receipt(self, reason: ReceiptReason, *, times: int = 1) -> None:
        """Make the next ``times`` POSTs get ``{accepted: false, reason}``, changing nothing."""
        self._forced.extend(Receipt(accepted=False, reason=reason) for _ in range(times))

    def push_raw(self, text: str) -> None:
        """Send ``text`` as one downlink message to every client (for malformed input)."""
        for downlink in self._downlinks:
            downlink.queue.put_nowait(text)

    def is_pending(self, rpc_id: str) -> bool:
        """Whether question or approval ``rpc_id`` is still waiting for an answer."""
        return rpc_id in self._pending or rpc_id in self._approvals

    @property
    def pending(self) -> list[PendingQuestion]:
        """The pending questions, oldest first."""
        return list(self._pending.values())

    @property
    def approvals(self) -> list[PendingApproval]:
        """The pending approvals, oldest first."""
        return list(self._approvals.values())

    @property
    def connections(self) -> int:
        """How many downlinks are open now."""
        return len(self._downlinks)

    async def wait_for_connections(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds for at least ``n`` open downlinks (replay queued)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self._downlinks) >= n)

    async def wait_for_total_connections(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds until ``n`` downlinks were opened in all, one open."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(
                lambda: self.total_connections >= n and len(self._downlinks) >= 1
            )

    async def wait_for_responses(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds for at least ``n`` POST bodies in total."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.responses) >= n)

    # ------------------------------------------------------------------ internals

    def _subscribed(self, session_id: str) -> dict[str, Any]:
        last = self._sessions[session_id].last_seq
        return _server_request(
            "session/subscribed",
            {"type": "session/subscribed", "sessionId": session_id, "lastSeq": last},
        )

    def _event(self, session_id: str, kind: str, data: dict[str, Any]) -> None:
        session = self._sessions.setdefault(session_id, _Session())
        event = {
            "type": kind,
            "seq": len(session.events),
            "time": int(time.time() * 1000),
            "data": data,
        }
        session.events.append(event)
        self._broadcast(
            _server_request(
                "session/event", {"type": "session/event", "sessionId": session_id, "event": event}
            )
        )

    def _tool_call(
        self, session_id: str, call_id: str, name: str, arguments: Mapping[str, Any]
    ) -> None:
        session = self._sessions[session_id]
        session.turn += 1
        data = {
            "turn": session.turn,
            "step": 1,
            "callId": call_id,
            "name": name,
            "arguments": json.dumps(dict(arguments)),
        }
        self._event(session_id, "tool/call", data)

    def _tool_result(self, session_id: str, call_id: str, text: str, error: bool) -> None:
        content = [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": error,
            }
        ]
        message = {
            "source": {"kind": "tool", "callId": call_id},
            "content": content,
            "role": "user",
            "id": str(uuid.uuid4()),
        }
        turn = self._sessions[session_id].turn
        self._event(session_id, "tool/result", {"turn": turn, "step": 1, "message": message})

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
        self._tool_result(pending.session_id, pending.call_id, outcome, outcome != "answered")

    def _settle(self, approval: PendingApproval, outcome: ResolvedOutcome) -> None:
        if self._approvals.pop(approval.rpc_id, None) is None:
            return
        sid = approval.session_id
        self._broadcast(
            approval_resolved_frame(str(uuid.uuid4()), sid, approval.approval_id, outcome)
        )
        self._event(sid, "approval/decided", {"id": approval.approval_id, "outcome": outcome})
        text = {
            "allowed-once": "ok\n",
            "rejected": 'Error: the user rejected escalating this command to "danger-full-access"',
        }.get(outcome, 'Error: approval for escalating to "danger-full-access" was cancelled')
        self._tool_result(sid, approval.call_id, text, outcome != "allowed-once")
        if not approval.future.done():
            approval.future.set_result(outcome)

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
        ws = web.WebSocketResponse(timeout=1.0, max_msg_size=0)
        if not ws.can_prepare(request).ok:
            return web.Response(
                status=426,
                text="events.mux is served as a WebSocket only\n",
                headers={"Upgrade": "websocket", "Connection": "Upgrade"},
            )
        await ws.prepare(request)
        downlink = _Downlink(ws)
        # The real host's order on a new downlink (dsh-approvals.md §5); replay and joining
        # the broadcast set happen together: no frame is lost or doubled.
        for session_id in self._sessions:
            downlink.queue.put_nowait(json.dumps(self._subscribed(session_id)))
        for pending in self._pending.values():
            downlink.queue.put_nowait(pending.frame())
        for approval in self._approvals.values():
            downlink.queue.put_nowait(approval.frame())
        for session_id in self._sessions:
            queue = {"type": "session/queue", "sessionId": session_id, "items": []}
            downlink.queue.put_nowait(json.dumps(_server_request("session/queue", queue)))
        self._downlinks.add(downlink)
        self.total_connections += 1
        await self._notify()
        pump = asyncio.create_task(self._pump(downlink))
        try:
            async for message in ws:
                if message.type is WSMsgType.ERROR:
                    break
                # The downlink is downlink-only: anything a client sends closes it.
                await ws.close(code=1008, message=b"downlink only")
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

    async def _json_body(self, request: web.Request) -> Any:
        if request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(
                text=json.dumps({"error": "content-type must be application/json"}),
                content_type="application/json",
            )
        try:
            return json.loads(await request.read())
        except ValueError:
            raise web.HTTPBadRequest(
                text=json.dumps({"error": "body is not JSON"}), content_type="application/json"
            ) from None

    async def _history(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        body = await self._json_body(request)
        # As the real 0.1.1-rc.2 host: a client-request envelope, or HTTP 200 "bad-request".
        payload = body.get("payload") if isinstance(body, dict) else None
        session_id = payload.get("sessionId") if isinstance(payload, dict) else None
        if body.get("type") != "client-request" or not isinstance(session_id, str):
            return web.Response(text="bad-request: invalid client-request message")
        self.history_requests.append(session_id)
        session = self._sessions.get(session_id)
        if session is None:
            error = {"code": "not-found", "message": "unknown session"}
            return web.json_response(
                {
                    "type": "server-response",
                    "rpcId": body.get("rpcId"),
                    "result": {"ok": False, "error": error},
                }
            )
        events = [{"event": event} for event in session.events]
        return web.json_response(
            {
                "type": "server-response",
                "rpcId": body.get("rpcId"),
                "result": {"ok": True, "value": {"events": events}},
            }
        )

    async def _respond(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        body = await self._json_body(request)
        self.responses.append(body)
        await self._notify()
        receipt = self._forced.pop(0) if self._forced else self._receipt(body)
        return web.json_response(receipt.to_wire())

    def _receipt(self, body: Any) -> Receipt:
        try:
            message = parse_client_response(body)
        except ValueError:
            return Receipt(accepted=False, reason="bad-response")
        approval = self._approvals.get(message.rpc_id)
        if approval is not None:
            return self._approval_receipt(approval, message.result)
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

    def _approval_receipt(self, approval: PendingApproval, result: Any) -> Receipt:
        # No dismissal for approvals: any ok:false (even "cancelled") is a bad response.
        if isinstance(result, ErrorResult):
            return Receipt(accepted=False, reason="bad-response")
        try:
            value = ApprovalResponse.model_validate(result.value)
        except ValidationError:
            return Receipt(accepted=False, reason="bad-response")
        if (value.session_id, value.approval_id) != (approval.session_id, approval.approval_id):
            return Receipt(accepted=False, reason="bad-response")
        self._settle(approval, value.outcome)
        return Receipt(accepted=True)
