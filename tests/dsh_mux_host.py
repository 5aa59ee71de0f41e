"""A dsh 0.2 host stand-in, for what the real host cannot be made to do on cue.

Huge, malformed or deeply nested frames, floods of requests across many sessions, a replay
held back, a host out of reach, a request settled elsewhere at a chosen moment: the real
host (``tests/dsh_real.py``) is used for the rest. What it sends is shaped as the real host
sends it (``tests/dsh/test_dsh_mux_agreement.py`` runs one scenario on both and compares the
frames): ``/connect`` login with a cookie, ``/api/remote.mux`` with ``$events`` (``ready``,
``waterfall``, ``cancel``) and ``session/follow`` (``snapshot``, ``event``), ``POST
/api/$events/result`` taking any well-formed result (first wins) with ``{"ok": true}``.

The test plays the agent's side::

    host = MuxHost()
    await host.start()
    event_id, answer = host.ask(sid, [AskUserQuestionItem(id="q", question="Go?")])
    event_id, approval_id, outcome = host.request_approval(sid, "bash", {"command": "ls"})
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from pydantic import ValidationError

from bot.questions.errors import ASK_ABORTED, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

__all__ = ["DEFAULT_REASON", "HostRequest", "MuxHost", "new_session_id"]

_COOKIE = "dsh-auth-standin"
ABORTED_MESSAGE = "ask_user_question was aborted before the user answered"
DISPOSED_MESSAGE = "web user-questions provider was disposed"
DEFAULT_REASON = (
    "escalate sandbox to danger-full-access: The user asked for a file under /srv, which is "
    "outside the workspace."
)
Json = dict[str, Any]


def new_session_id() -> str:
    """A session id as the real host mints them: ``session-<uuid>``."""
    return f"session-{uuid.uuid4()}"


def _mark_retrieved(future: asyncio.Future[Any]) -> None:
    # A test need not await every ask; keep asyncio from logging "never retrieved".
    if not future.cancelled():
        future.exception()


@dataclass(eq=False)
class HostRequest:
    """A pending waterfall: a question batch, or an approval (``approval_id``: its log id)."""

    rpc_id: str
    session_id: str
    frame: Json
    call_id: str
    future: asyncio.Future[Any]
    questions: list[AskUserQuestionItem] = field(default_factory=list)
    approval_id: str | None = None


@dataclass(eq=False)
class _Socket:
    ws: web.WebSocketResponse
    queue: asyncio.Queue[Json | None] = field(default_factory=asyncio.Queue)
    client_id: str | None = None
    events: str = "ev"


class MuxHost:
    """One stand-in host on 127.0.0.1; ``launch_url`` is what ``dsh web`` would print."""

    def __init__(self, token: str | None = "standin-token") -> None:
        self.token = token
        self.results: list[Json] = []
        """Every ``$events/result`` body taken, in order."""
        self.responses: list[Json] = []
        """The same, as ``{"eventId", "outcome"}``."""
        self.frames: list[Json] = []
        """Every item this host sent."""
        self.total_connections = 0
        self.refusing = False
        """While set, logins and sockets are refused with 503 (the host is out of reach)."""
        self.replay_delay = 0.0
        """Seconds between a new socket's ``ready`` and its replay of the pending requests."""
        self.before_result: Callable[[str], None] | None = None
        """Called with the eventId of each result before it is applied (a race to lose)."""
        self._requests: dict[str, HostRequest] = {}
        self._logs: dict[str, list[Json]] = {}
        self._sockets: dict[web.WebSocketResponse, _Socket] = {}
        self._follows: dict[str, list[tuple[_Socket, str]]] = {}
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (kept after ``stop`` so that ``start(port=host.port)`` reuses it)."""
        if self._port is None:
            raise RuntimeError("the stand-in was never started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def launch_url(self) -> str:
        return f"{self.base_url}/?token={self.token}"

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self, port: int = 0, *, after_outage: bool = False) -> str:
        """Serve on ``port`` (0: any free) and return the base URL.

        By default a fresh host process (a first start, or a restart): the requests pending
        before fail (questions: ASK_ABORTED; approvals: cancelled) and are not replayed.
        ``after_outage=True``: the host lived on out of reach, its requests still pending.
        """
        if self._runner is not None:
            raise RuntimeError("the stand-in is already running")
        if not after_outage:
            for request in list(self._requests.values()):
                self._end(request, None, "Error", ASK_ABORTED)
                _fail(request, UserQuestionError(DISPOSED_MESSAGE, ASK_ABORTED))
        app = web.Application()
        app.router.add_get("/connect", self._connect)
        app.router.add_get("/api/remote.mux", self._mux)
        app.router.add_post("/api/$events/result", self._result)
        runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner, self._port = runner, sock.getsockname()[1]
        return self.base_url

    async def stop(self) -> None:
        """Close every socket and the server; pending requests stay (see ``start``)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        await self.drop()
        await runner.cleanup()
        await self._notify()

    async def drop(self) -> None:
        """Close every socket (the host stays up: the bot connects again)."""
        for sock in list(self._sockets.values()):
            sock.queue.put_nowait(None)
        await asyncio.gather(*(ws.close() for ws in list(self._sockets)), return_exceptions=True)

    async def __aenter__(self) -> MuxHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the agent's side --------------------------------------------------------------------

    def ask(
        self, session_id: str, questions: Sequence[AskUserQuestionItem | Mapping[str, Any]]
    ) -> tuple[str, asyncio.Future[AskUserQuestionAnswer]]:
        """A question batch (``tool/call``, then the waterfall); its eventId and a future
        for the answer (or the ``UserQuestionError`` the tool fails with). Questions given
        as JSON are sent verbatim, keys the seam lacks too."""
        wire = [q.to_wire() if isinstance(q, AskUserQuestionItem) else dict(q) for q in questions]
        call = self._tool_call(session_id, "ask_user_question", {"questions": wire})
        sent = [
            {**q, "intent": {**q["intent"], "callId": call}} if isinstance(q.get("intent"), dict)
            else q
            for q in wire
        ]  # fmt: skip
        request = self._waterfall(session_id, "user-questions/request", {"questions": sent}, call)
        with contextlib.suppress(ValidationError):
            request.questions = [AskUserQuestionItem.model_validate(q) for q in wire]
        return request.rpc_id, request.future

    ask_raw = ask

    def request_approval(
        self,
        session_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        reason: str | None = DEFAULT_REASON,
        call_id: str | None = None,
        logged: bool = True,
    ) -> tuple[str, str, asyncio.Future[str]]:
        """A tool asks for wider rights: ``tool/call`` (unless not ``logged``),
        ``approval/asked``, the waterfall. Returns ``(eventId, approval id, future)``; the
        future gets the outcome."""
        call = call_id or f"call-{uuid.uuid4().hex[:12]}"
        if logged:
            self._tool_call(session_id, tool_name, dict(arguments), call)
        approval_id = str(uuid.uuid4())
        asked: Json = {"id": approval_id, "toolName": tool_name, "callId": call}
        request: Json = {"toolName": tool_name, "callId": call}
        if reason is not None:
            asked["reason"] = request["reason"] = reason
            request["displayReason"] = {"en": reason, "zh": reason}
        self._log(session_id, "approval/asked", asked)
        pending = self._waterfall(session_id, "approval/request", request, call)
        pending.approval_id = approval_id
        return pending.rpc_id, approval_id, pending.future

    def abort(self, rpc_id: str) -> bool:
        """The agent's turn aborted: the tool fails with ``ASK_ABORTED``; clients get cancel."""
        request = self._requests.get(rpc_id)
        if request is None:
            return False
        self._end(request, None, "Error", ASK_ABORTED)
        _fail(request, UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED))
        return True

    def cancel_turn(self, session_id: str) -> int:
        """``session/cancel``: every request of the session is aborted."""
        mine = [r for r in self._requests.values() if r.session_id == session_id]
        return sum(self.abort(request.rpc_id) for request in mine)

    def resolve_elsewhere(self, rpc_id: str, answer: AskUserQuestionAnswer) -> bool:
        """Another client answered first: the log shows its answer; clients get cancel."""
        request = self._requests.get(rpc_id)
        if request is None:
            return False
        self._end(request, None, json.dumps(answer.to_wire()), None)
        _set(request, answer)
        return True

    def approve_elsewhere(self, rpc_id: str, outcome: str = "allowed-once") -> bool:
        """Another client decided the approval first."""
        request = self._requests.get(rpc_id)
        if request is None:
            return False
        self._end(request, outcome, "ok\n", None)
        _set(request, outcome)
        return True

    async def push_raw(self, text: str) -> None:
        """Send ``text`` as is on every socket (a frame the real host never sends)."""
        for ws in list(self._sockets):
            if not ws.closed:
                await ws.send_str(text)

    def is_pending(self, rpc_id: str) -> bool:
        return rpc_id in self._requests

    @property
    def pending(self) -> list[HostRequest]:
        """The pending questions, oldest first."""
        return [r for r in self._requests.values() if r.approval_id is None]

    @property
    def approvals(self) -> list[HostRequest]:
        """The pending approvals, oldest first."""
        return [r for r in self._requests.values() if r.approval_id is not None]

    def forget(self) -> None:
        """Lose every pending request (a host restart the bot never saw)."""
        self._requests.clear()

    @property
    def connections(self) -> int:
        """How many ``$events`` streams are open now."""
        return len(self.client_ids())

    def client_ids(self) -> list[str]:
        """The clientIds of the open ``$events`` streams."""
        return [s.client_id for s in self._sockets.values() if s.client_id is not None]

    async def wait_for_connections(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` s for at least ``n`` open ``$events`` streams."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: self.connections >= n)

    async def wait_for_total_connections(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` s until ``n`` streams were opened in all, one open."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(
                lambda: self.total_connections >= n and self.connections >= 1
            )

    async def wait_for_responses(self, n: int, within: float = 5.0) -> None:
        """Wait up to ``within`` s for at least ``n`` results taken in all."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.responses) >= n)

    # -- what the host sends -----------------------------------------------------------------

    def _tool_call(
        self, session_id: str, name: str, arguments: Json, call_id: str | None = None
    ) -> str:
        call = call_id or f"call-{uuid.uuid4().hex[:12]}"
        data = {"callId": call, "name": name, "arguments": json.dumps(arguments)}
        self._log(session_id, "tool/call", data)
        return call

    def _log(self, session_id: str, kind: str, data: Json) -> None:
        records = self._logs.setdefault(session_id, [])
        event = {"type": kind, "seq": len(records), "time": int(time.time() * 1000), "data": data}
        item = {"type": "event", "event": event}
        records.append(item)
        for sock, stream in self._follows.get(session_id, []):
            self._send(sock, stream, item)

    def _waterfall(self, session_id: str, event: str, request: Json, call: str) -> HostRequest:
        event_id = str(uuid.uuid4())
        frame = {
            "type": "waterfall",
            "event": event,
            "eventId": event_id,
            "agentId": session_id,
            "request": request,
        }
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_mark_retrieved)
        pending = HostRequest(event_id, session_id, frame, call, future)
        self._requests[event_id] = pending
        for sock in self._sockets.values():
            if sock.client_id is not None:
                self._send(sock, sock.events, frame)
        return pending

    def _end(
        self,
        request: HostRequest,
        decided: str | None,
        text: str,
        code: str | None,
        answerer: str | None = None,
    ) -> None:
        """Settle ``request`` (first wins): its outcome logged, ``cancel`` to every client
        but the ``answerer``."""
        if self._requests.pop(request.rpc_id, None) is None:
            return
        sid = request.session_id
        if request.approval_id is not None and decided is not None:
            self._log(sid, "approval/decided", {"id": request.approval_id, "outcome": decided})
        message = {
            "toolCallId": request.call_id,
            "content": [{"type": "text", "text": text}],
            "isError": code is not None or decided not in (None, "allowed-once"),
        }
        data: Json = {"message": message}
        if code is not None:
            data["error"] = {"code": code}
        self._log(sid, "tool/result", data)
        for sock in self._sockets.values():
            if sock.client_id not in (None, answerer):
                self._send(sock, sock.events, {"type": "cancel", "eventId": request.rpc_id})

    def _send(self, sock: _Socket, stream: str, value: Json) -> None:
        item = {"type": "item", "streamId": stream, "value": value}
        self.frames.append(item)
        sock.queue.put_nowait(item)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- routes ------------------------------------------------------------------------------

    async def _connect(self, request: web.Request) -> web.Response:
        if self.refusing:
            return web.Response(status=503)
        if self.token is not None and request.query.get("token") != self.token:
            return web.Response(status=401)
        response = web.Response(status=302, headers={"Location": "./api/remote.mux"})
        response.set_cookie(_COOKIE, "v2.standin", path="/", httponly=True)
        return response

    async def _mux(self, request: web.Request) -> web.StreamResponse:
        if self.refusing:
            return web.Response(status=503)
        if request.cookies.get(_COOKIE) is None:
            return web.Response(status=401, text="unauthorized")
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        sock = self._sockets[ws] = _Socket(ws)
        pump = asyncio.create_task(_pump(sock))
        try:
            async for message in ws:
                if message.type is not WSMsgType.TEXT:
                    await ws.close(code=1003)
                    break
                await self._opened(sock, json.loads(message.data))
        finally:
            self._sockets.pop(ws, None)
            for follows in self._follows.values():
                follows[:] = [(s, stream) for s, stream in follows if s is not sock]
            sock.queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await pump
            await self._notify()
        return ws

    async def _opened(self, sock: _Socket, frame: Json) -> None:
        stream = frame.get("streamId")
        if frame.get("endpoint") == "$events":
            sock.events, client_id = stream, str(uuid.uuid4())
            self._send(sock, stream, {"type": "ready", "clientId": client_id, "host": {}})
            if self.replay_delay:
                await asyncio.sleep(self.replay_delay)
            sock.client_id = client_id  # replay and joining the broadcast happen together
            for pending in list(self._requests.values()):
                self._send(sock, stream, pending.frame)
            self.total_connections += 1
            await self._notify()
        elif frame.get("endpoint") == "session/follow":
            sid = frame["payload"]["args"]["request"]["address"]["sessionId"]
            self._follows.setdefault(sid, []).append((sock, stream))
            records = self._logs.get(sid, [])
            snapshot = {
                "type": "snapshot",
                "header": {"id": sid},
                "cursor": len(records) - 1,
                "records": list(records),
                "hasMore": False,
                "projections": {},
            }
            self._send(sock, stream, snapshot)

    async def _result(self, request: web.Request) -> web.Response:
        body = await request.json()
        args = body["payload"]["args"]
        if args["clientId"] not in self.client_ids():
            error = {"code": "gateway/bad-client", "message": "identifies no active event stream"}
            result: Json = {"ok": False, "error": error}
        else:
            result = {"ok": True}
            self.results.append(body)
            self.responses.append({"eventId": args["eventId"], "outcome": args["outcome"]})
            if self.before_result is not None:
                self.before_result(args["eventId"])
            pending = self._requests.get(args["eventId"])
            if pending is not None:  # the first result wins; later ones are taken and dropped
                self._take(pending, args["outcome"], args["clientId"])
            await self._notify()
        return web.json_response(
            {"type": "server-response", "rpcId": body["rpcId"], "result": result}
        )

    def _take(self, request: HostRequest, outcome: Json, by: str) -> None:
        if outcome["kind"] == "rejected":
            error = outcome["error"]
            self._end(request, None, "Error", error["code"], by)
            _fail(request, UserQuestionError(error["message"], error["code"]))
        elif request.approval_id is not None:
            self._end(request, outcome["value"], "ok\n", None, by)
            _set(request, outcome["value"])
        else:
            self._end(request, None, json.dumps(outcome["value"]), None, by)
            _set(request, AskUserQuestionAnswer.model_validate(outcome["value"]))


def _fail(request: HostRequest, error: BaseException) -> None:
    if request.approval_id is not None:
        _set(request, "cancelled")
    elif not request.future.done():
        request.future.set_exception(error)


def _set(request: HostRequest, value: Any) -> None:
    if not request.future.done():
        request.future.set_result(value)


async def _pump(sock: _Socket) -> None:
    while (item := await sock.queue.get()) is not None:
        if sock.ws.closed:
            return
        try:
            await sock.ws.send_json(item)
        except ConnectionError:
            return
