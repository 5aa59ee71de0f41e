"""A dsh 0.2 host stand-in, only for what the real host cannot be made to send.

Huge, malformed or deeply nested frames, floods of requests across many sessions, and a
replay held back or a host out of reach at a chosen moment: the real host
(``tests/dsh_real.py``) is used for everything else. What it does send is shaped as the real
host sends it (``tests/dsh/test_dsh_mux_agreement.py`` runs one scenario on both and
compares the frames): ``/connect`` login with a cookie, ``/api/remote.mux`` with ``$events``
(``ready``, ``waterfall``, ``cancel``) and ``session/follow`` (``snapshot``, ``event``),
``POST /api/$events/result`` taking any well-formed result (first wins) with ``{"ok": true}``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["MuxHost"]

_COOKIE = "dsh-auth-standin"
Json = dict[str, Any]


class MuxHost:
    """One stand-in host on 127.0.0.1; ``launch_url`` is what ``dsh web`` would print."""

    def __init__(self, token: str = "standin-token") -> None:
        self.token = token
        self.url = ""
        self.results: list[Json] = []
        """Every ``$events/result`` body taken, in order."""
        self.frames: list[Json] = []
        """Every item this host sent (for the agreement test)."""
        self.pending: dict[str, Json] = {}
        self._logs: dict[str, list[Json]] = {}
        self._sockets: dict[web.WebSocketResponse, str] = {}  # socket → its clientId
        self._follows: dict[str, list[tuple[web.WebSocketResponse, str]]] = {}
        self._calls = 0
        self._runner: web.AppRunner | None = None
        self.refusing = False
        """While set, logins and sockets are refused with 503 (the host is out of reach)."""
        self.replay_delay = 0.0
        """Seconds between a new socket's ``ready`` and its replay of the pending requests."""

    @property
    def launch_url(self) -> str:
        return f"{self.url}/?token={self.token}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/connect", self._connect)
        app.router.add_get("/api/remote.mux", self._mux)
        app.router.add_post("/api/$events/result", self._result)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def connected(self) -> int:
        return len(self._sockets)

    def client_ids(self) -> list[str]:
        """The clientIds of the open ``$events`` streams."""
        return list(self._sockets.values())

    async def drop(self) -> None:
        """Close every socket (the host stays up: the bot connects again)."""
        for socket in list(self._sockets):
            await socket.close()

    # -- what the host sends ----------------------------------------------------------------

    async def send_raw(self, text: str) -> None:
        """Send ``text`` as is on every socket (a frame the real host never sends)."""
        for socket in list(self._sockets):
            await socket.send_str(text)

    async def ask(self, session_id: str, questions: list[Json]) -> str:
        """A question batch: ``tool/call`` in the log, then the waterfall; its eventId."""
        call = await self._call(session_id, "ask_user_question", {"questions": questions})
        return await self._waterfall(
            session_id, "user-questions/request", {"questions": questions}, call
        )

    async def approval(self, session_id: str, command: str) -> str:
        """A bash call asking for wider rights: ``tool/call``, ``approval/asked``, waterfall."""
        call = await self._call(session_id, "bash", {"command": command})
        await self._log(session_id, "approval/asked", {"id": str(uuid.uuid4()), "callId": call})
        request = {"toolName": "bash", "callId": call, "reason": "escalate sandbox"}
        return await self._waterfall(session_id, "approval/request", request, call)

    async def _call(self, session_id: str, name: str, arguments: Json) -> str:
        self._calls += 1
        call = f"call-{self._calls}"
        await self._log(
            session_id,
            "tool/call",
            {"callId": call, "name": name, "arguments": json.dumps(arguments)},
        )
        return call

    def _event(self, kind: str, data: Json, session_id: str) -> Json:
        seq = len(self._logs.get(session_id, []))
        return {
            "type": "event",
            "event": {"type": kind, "seq": seq, "time": int(time.time() * 1000), "data": data},
        }

    async def _log(self, session_id: str, kind: str, data: Json) -> None:
        item = self._event(kind, data, session_id)
        self._logs.setdefault(session_id, []).append(item)
        for socket, stream in self._follows.get(session_id, []):
            await self._send(socket, stream, item)

    async def _waterfall(self, session_id: str, event: str, request: Json, call: str) -> str:
        event_id = str(uuid.uuid4())
        frame = {
            "type": "waterfall",
            "event": event,
            "eventId": event_id,
            "agentId": session_id,
            "request": request,
        }
        self.pending[event_id] = {"frame": frame, "call": call, "session": session_id}
        for socket in list(self._sockets):
            await self._send(socket, "ev", frame)
        return event_id

    async def _send(self, socket: web.WebSocketResponse, stream: str, value: Json) -> None:
        item = {"type": "item", "streamId": stream, "value": value}
        self.frames.append(item)
        if not socket.closed:
            await socket.send_json(item)

    # -- routes -----------------------------------------------------------------------------

    async def _connect(self, request: web.Request) -> web.Response:
        if self.refusing:
            return web.Response(status=503)
        if request.query.get("token") != self.token:
            return web.Response(status=401)
        response = web.Response(status=302, headers={"Location": "./api/remote.mux"})
        response.set_cookie(_COOKIE, "v2.standin", path="/", httponly=True)
        return response

    async def _mux(self, request: web.Request) -> web.StreamResponse:
        if self.refusing:
            return web.Response(status=503)
        if request.cookies.get(_COOKIE) is None:
            return web.Response(status=401, text="unauthorized")
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        async for message in socket:
            if message.type is not WSMsgType.TEXT:
                await socket.close(code=1003)
                break
            frame = json.loads(message.data)
            stream = frame.get("streamId")
            if frame.get("endpoint") == "$events":
                self._sockets[socket] = str(uuid.uuid4())
                await self._send(
                    socket,
                    stream,
                    {
                        "type": "ready",
                        "clientId": self._sockets[socket],
                        "host": {"home": "/home/dev"},
                    },
                )
                if self.replay_delay:
                    await asyncio.sleep(self.replay_delay)
                for pending in list(self.pending.values()):
                    await self._send(socket, stream, pending["frame"])
            elif frame.get("endpoint") == "session/follow":
                sid = frame["payload"]["args"]["request"]["address"]["sessionId"]
                self._follows.setdefault(sid, []).append((socket, stream))
                records = self._logs.get(sid, [])
                snapshot = {
                    "type": "snapshot",
                    "header": {"id": sid},
                    "cursor": len(records) - 1,
                    "records": records,
                    "hasMore": False,
                    "projections": {},
                }
                await self._send(socket, stream, snapshot)
        self._sockets.pop(socket, None)
        return socket

    async def _result(self, request: web.Request) -> web.Response:
        body = await request.json()
        args = body["payload"]["args"]
        if args["clientId"] not in self._sockets.values():
            error = {"code": "gateway/bad-client", "message": "identifies no active event stream"}
            return web.json_response(
                {
                    "type": "server-response",
                    "rpcId": body["rpcId"],
                    "result": {"ok": False, "error": error},
                }
            )
        self.results.append(body)
        pending = self.pending.pop(args["eventId"], None)
        if pending is not None:  # the first result wins; later ones are taken and dropped
            outcome = args["outcome"]
            value = outcome.get("value")
            text = (
                json.dumps(value, separators=(",", ":")) if outcome["kind"] == "result" else "Error"
            )
            if pending["frame"]["event"] == "approval/request":
                asked = [
                    e
                    for e in self._logs[pending["session"]]
                    if e["event"]["type"] == "approval/asked"
                ]
                await self._log(
                    pending["session"],
                    "approval/decided",
                    {"id": asked[-1]["event"]["data"]["id"], "outcome": value},
                )
            message = {
                "toolCallId": pending["call"],
                "content": [{"type": "text", "text": text}],
                "isError": outcome["kind"] != "result",
            }
            await self._log(pending["session"], "tool/result", {"message": message})
        return web.json_response(
            {"type": "server-response", "rpcId": body["rpcId"], "result": {"ok": True}}
        )
