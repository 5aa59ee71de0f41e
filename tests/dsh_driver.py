"""A test-side client of the real dsh host: the agent's user and "another client".

It logs in with the launch token (``/?token=``, the browser cookie: several sockets), calls
the RPCs (``session/create``, ``session/prompt``, ``commands/execute``, ``session/cancel``,
``session/page``), and holds one ``remote.mux`` socket whose streams it records: ``$events``
(waterfalls and cancels, answered with ``answer``) and ``session/follow`` (the session log)::

    async with HostDriver(host) as driver:
        sid = await driver.create_session()
        await driver.prompt(sid, f"ask me {tag}")
        frame = await driver.waterfall(sid)                     # needs driver.listen() first
        await driver.answer(frame["eventId"], {"kind": "result", "value": {...}})
        result = await driver.tool_result(sid, call_id)         # the log's tool/result data
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import aiohttp

from tests.dsh_model import Step, call_id
from tests.dsh_real import RealHost

__all__ = ["HostDriver", "RpcError", "Stream"]

Json = dict[str, Any]


class RpcError(Exception):
    """The host answered an RPC with ``ok: false`` (or not with a server-response)."""


class Stream:
    """The items one mux stream received, in order, and a way to wait for one."""

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self.items: list[Json] = []
        self.received: list[float] = []
        """When each item came (``time.time()``), for benchmarks."""
        self.ended = False
        self._changed = asyncio.Condition()

    async def add(self, item: Json | None) -> None:
        async with self._changed:
            if item is None:
                self.ended = True
            else:
                self.items.append(item)
                self.received.append(time.time())
            self._changed.notify_all()

    async def wait_for(self, match: Callable[[Json], bool], within: float = 20.0) -> Json:
        """The first item (already received or coming) that ``match`` accepts."""
        async with asyncio.timeout(within), self._changed:
            seen = 0
            while True:
                for item in self.items[seen:]:
                    if match(item):
                        return item
                seen = len(self.items)
                await self._changed.wait()


class HostDriver:
    """One logged-in client of a ``RealHost``: RPCs plus one ``remote.mux`` socket."""

    def __init__(self, host: RealHost) -> None:
        self.host = host
        self.client_id = ""
        self.streams: dict[str, Stream] = {}
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        self._socket: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> HostDriver:
        await self.login()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def login(self) -> None:
        """Take the browser cookie with the launch token (a 303 to ``./``)."""
        async with self._http.get(self.host.launch_url, allow_redirects=False) as response:
            if response.status != 303:
                raise RpcError(f"login answered {response.status}")

    async def connect_as_operator(self, token: str) -> int:
        """The status of ``/connect?token=…&interactions=answer`` (302: an API operator)."""
        url = f"{self.host.url}/connect?token={token}&interactions=answer"
        async with aiohttp.ClientSession() as fresh, fresh.get(url, allow_redirects=False) as reply:
            return reply.status

    async def close(self) -> None:
        await self.disconnect()
        await self._http.close()

    async def rpc(self, method: str, args: Mapping[str, Any]) -> Any:
        """``POST /api/<method>``; the ``value`` of an ``ok`` result."""
        rpc_id = str(uuid.uuid4())
        body = {"type": "client-request", "rpcId": rpc_id, "method": method, "payload": {}}
        body["payload"] = {"args": dict(args)}
        async with self._http.post(f"{self.host.url}/api/{method}", json=body) as response:
            if response.status != 200:
                raise RpcError(f"{method}: HTTP {response.status}: {await response.text()}")
            reply = await response.json()
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, dict) or result.get("ok") is not True:
            raise RpcError(f"{method}: {reply}")
        return result.get("value")

    async def create_session(self, cwd: str | None = None) -> str:
        request = {"cwd": cwd or str(self.host.workspace)}
        value = await self.rpc("session/create", {"request": request})
        return str(value["sessionId"])

    async def prompt(self, sid: str, text: str) -> None:
        content = [{"type": "text", "text": text}]
        request = {"requestId": str(uuid.uuid4()), "sessionId": sid, "mode": "queue"}
        await self.rpc("session/prompt", {"request": {**request, "content": content}})

    async def plan(self, sid: str, text: str) -> None:
        """``/plan <text>``: plan mode on, and a turn whose prompt is ``text``."""
        args = {"agentId": sid, "line": f"/plan {text}", "submittedAttachments": []}
        await self.rpc("commands/execute", args)

    async def cancel(self, sid: str) -> None:
        """``session/cancel``: abort the running turn (its pending requests are cancelled)."""
        await self.rpc("session/cancel", {"request": {"sessionId": sid}})

    async def page(self, sid: str, through_seq: int | None = None) -> list[Json]:
        """The session log's events up to ``through_seq`` (default: the latest one followed)."""
        if through_seq is None:
            stream = self.streams.get(f"log-{sid}") or await self.follow(sid)
            seqs = [int(i["event"]["seq"]) for i in stream.items if i.get("type") == "event"]
            through_seq = max([int(stream.items[0]["cursor"]), *seqs])
        request = {"address": {"kind": "session", "sessionId": sid}, "throughSeq": through_seq}
        value = await self.rpc("session/page", {"request": request})
        return [r["event"] for r in value.get("records", []) if r.get("type") == "event"]

    # --- the mux socket -----------------------------------------------------------------

    async def connect(self) -> None:
        """Open the ``remote.mux`` socket (once; again after ``disconnect`` or a drop)."""
        if self._socket is not None and self._socket.closed:
            await self.disconnect()
        if self._socket is None:
            ws_url = self.host.url.replace("http://", "ws://", 1) + "/api/remote.mux"
            self._socket = await self._http.ws_connect(ws_url, heartbeat=None)
            self._reader = asyncio.create_task(self._read(self._socket))

    async def disconnect(self) -> None:
        """Close the socket (its streams end; a reconnect gets a new ``clientId``)."""
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None

    async def open(self, stream_id: str, endpoint: str, args: Mapping[str, Any]) -> Stream:
        await self.connect()
        assert self._socket is not None
        stream = self.streams[stream_id] = Stream(stream_id)
        frame = {"type": "open", "streamId": stream_id, "endpoint": endpoint}
        await self._socket.send_json({**frame, "payload": {"args": dict(args)}})
        return stream

    async def listen(self) -> Stream:
        """Open ``$events`` as an answering client; sets ``client_id`` from ``ready``."""
        stream = await self.open(f"ev-{uuid.uuid4().hex[:6]}", "$events", {})
        ready = await stream.wait_for(lambda item: item.get("type") == "ready")
        self.client_id = str(ready["clientId"])
        self.streams["$events"] = stream
        return stream

    async def follow(self, sid: str) -> Stream:
        """Follow ``sid``'s log (``session/follow``): a snapshot, then its events."""
        address = {"kind": "session", "sessionId": sid}
        stream = await self.open(f"log-{sid}", "session/follow", {"request": {"address": address}})
        await stream.wait_for(lambda item: item.get("type") == "snapshot")
        return stream

    async def _read(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        async for message in socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            frame = message.json()
            stream = self.streams.get(str(frame.get("streamId")))
            if stream is not None:
                await stream.add(frame.get("value") if frame.get("type") == "item" else None)
        for stream in self.streams.values():
            await stream.add(None)

    # --- questions, approvals and their outcomes ------------------------------------------

    async def waterfall(self, sid: str, nth: int = 1, within: float = 20.0) -> Json:
        """The ``nth`` waterfall frame (question or approval) of ``sid`` on ``$events``."""
        seen: list[Json] = []

        def match(item: Json) -> bool:
            if item.get("type") == "waterfall" and item.get("agentId") == sid:
                seen.append(item)
            return len(seen) >= nth

        return await self.streams["$events"].wait_for(match, within)

    async def ask_turn(self, *steps: Step, plan: bool = False) -> tuple[str, str, Json]:
        """A new session whose turn runs ``steps``: its id, the first call's id, the frame."""
        if "$events" not in self.streams:
            await self.listen()
        sid = await self.create_session()
        tag = self.host.model.script(*steps)
        await (self.plan if plan else self.prompt)(sid, f"go {tag}")
        return sid, call_id(tag), await self.waterfall(sid)

    async def answer(self, event_id: str, outcome: Mapping[str, Any]) -> Any:
        """``$events/result`` for ``event_id`` with this client's ``clientId``."""
        args = {"clientId": self.client_id, "eventId": event_id, "outcome": dict(outcome)}
        return await self.rpc("$events/result", args)

    async def log_event(
        self,
        sid: str,
        kind: str,
        match: Callable[[Json], bool] = lambda _: True,
        within: float = 20.0,
    ) -> Json:
        """The first ``kind`` event in ``sid``'s log that ``match`` accepts (its ``data``)."""
        stream = self.streams.get(f"log-{sid}") or await self.follow(sid)

        def fits(item: Json) -> bool:
            event = item.get("event")
            if item.get("type") != "event" or not isinstance(event, dict):
                return False
            return event.get("type") == kind and match(event.get("data") or {})

        snapshot = next(i for i in stream.items if i.get("type") == "snapshot")
        for record in snapshot.get("records", []):
            if fits(record):
                return dict(record["event"]["data"])
        found = await stream.wait_for(fits, within)
        return dict(found["event"]["data"])

    async def tool_result(self, sid: str, call_id: str, within: float = 20.0) -> Json:
        """The ``tool/result`` of ``call_id``: ``text``, ``isError`` and ``error`` (if any)."""
        data = await self.log_event(
            sid, "tool/result", lambda d: d.get("message", {}).get("toolCallId") == call_id, within
        )
        message = data["message"]
        text = "".join(b.get("text", "") for b in message.get("content", []))
        return {"text": text, "isError": message.get("isError"), "error": data.get("error")}
