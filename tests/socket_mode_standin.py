"""A local stand-in for Slack's Socket Mode endpoint, after bolt-python's own mock server.

Slack's side of Socket Mode is two things (slack-platform.md §3.2):

1. ``apps.connections.open``, called with the app-level token (``xapp-…``) in the
   ``Authorization`` header, answers ``{"ok": true, "url": "wss://…"}``;
2. a WebSocket at that URL, which says ``hello`` and then sends envelopes
   (``{"envelope_id", "type": "interactive", "payload", "accepts_response_payload"}``) that the
   app must ack by sending ``{"envelope_id": …}`` back.

``SocketModeStandIn`` serves (2) on 127.0.0.1 and can answer (1) for a ``SlackStandIn``
(``install``), so one base URL serves both the Web API and ``apps.connections.open``::

    socket = SocketModeStandIn(app_token="xapp-1-test")
    await socket.start()
    socket.install(slack)                  # before slack.start()
    ...
    envelope_id = await socket.send_interactive(payload)
    ack = await socket.ack(envelope_id)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import WSMsgType, web

from adapters.slack.sandbox.webapi import SlackStandIn

__all__ = ["SocketModeStandIn"]

CONNECTIONS_OPEN = "apps.connections.open"


class SocketModeStandIn:
    """Slack's Socket Mode WebSocket: says hello, sends envelopes, collects the acks."""

    def __init__(self, *, app_token: str, app_id: str = "A0SANDBOX", hello: bool = True) -> None:
        self.app_token = app_token
        self.app_id = app_id
        self.hello = hello
        """Send ``hello`` as soon as a client connects (as Slack does)."""
        self.opened = 0
        """How many times ``apps.connections.open`` handed out a URL."""
        self.refused = 0
        """How many ``apps.connections.open`` calls had a wrong or missing app token."""
        self.sockets: list[web.WebSocketResponse] = []
        self.connections = 0
        """How many WebSockets were opened, in all."""
        self._transports: dict[web.WebSocketResponse, Any] = {}
        self.received: list[dict[str, Any]] = []
        """Every JSON message a client sent (acks, in order)."""
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._connected = asyncio.Event()
        self._app = web.Application()
        self._app.router.add_get("/link", self._link)
        self._runner: web.AppRunner | None = None
        self._url: str | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> str:
        """Serve on a free port of 127.0.0.1; returns the ``ws://`` URL to hand out."""
        runner = web.AppRunner(self._app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._url = f"ws://127.0.0.1:{runner.addresses[0][1]}/link"
        return self._url

    async def stop(self) -> None:
        """Close every socket and stop serving."""
        for ws in list(self.sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for future in self._acks.values():
            future.cancel()

    @property
    def url(self) -> str:
        """The WebSocket URL ``apps.connections.open`` answers with."""
        if self._url is None:
            raise RuntimeError("the Socket Mode stand-in is not started")
        return self._url

    def install(self, slack: SlackStandIn) -> None:
        """Make ``slack`` answer ``apps.connections.open`` with this socket's URL.

        Call before ``slack.start()`` (it adds a middleware to the stand-in's app).
        """

        @web.middleware
        async def connections_open(
            request: web.Request,
            handler: Any,
        ) -> web.StreamResponse:
            if request.path.rstrip("/") != f"/api/{CONNECTIONS_OPEN}":
                response: web.StreamResponse = await handler(request)
                return response
            header = request.headers.get("Authorization", "")
            if header != f"Bearer {self.app_token}":
                self.refused += 1
                return web.json_response({"ok": False, "error": "invalid_auth"})
            self.opened += 1
            return web.json_response({"ok": True, "url": self.url})

        slack.app.middlewares.append(connections_open)

    # -- the WebSocket --------------------------------------------------------------------

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.sockets.append(ws)
        self.connections += 1
        self._transports[ws] = request.transport
        if self.hello:
            await ws.send_json(
                {
                    "type": "hello",
                    "num_connections": len(self.sockets),
                    "debug_info": {
                        "host": "applink-standin",
                        "build_number": 1,
                        "approximate_connection_time": 3600,
                    },
                    "connection_info": {"app_id": self.app_id},
                }
            )
        self._connected.set()
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                data = json.loads(message.data)
                self.received.append(data)
                envelope_id = data.get("envelope_id") if isinstance(data, dict) else None
                if isinstance(envelope_id, str):
                    future = self._acks.get(envelope_id)
                    if future is not None and not future.done():
                        future.set_result(data)
        finally:
            self.sockets.remove(ws)
            self._transports.pop(ws, None)
        return ws

    async def connected(self, within: float = 10.0) -> None:
        """Wait until a client has connected."""
        await asyncio.wait_for(self._connected.wait(), within)

    async def refresh(self) -> None:
        """Ask the newest connection to reconnect, as Slack does every few hours."""
        await self.send(
            {"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "x"}}
        )

    def drop(self) -> None:
        """Close the newest connection's TCP socket abruptly: no close frame."""
        self._transports[self.sockets[-1]].abort()

    def stall(self) -> None:
        """Stop reading the newest connection: its pings go unanswered, nothing arrives."""
        self._transports[self.sockets[-1]].pause_reading()

    async def send(self, envelope: Mapping[str, Any]) -> None:
        """Send one message to the newest connection."""
        if not self.sockets:
            raise RuntimeError("no Socket Mode client is connected")
        await self.sockets[-1].send_json(dict(envelope))

    async def send_interactive(
        self, payload: Mapping[str, Any], *, envelope_id: str | None = None
    ) -> str:
        """Send an ``interactive`` envelope carrying ``payload``; returns its envelope id."""
        envelope_id = envelope_id or str(uuid.uuid4())
        self._acks[envelope_id] = asyncio.get_running_loop().create_future()
        await self.send(
            {
                "envelope_id": envelope_id,
                "type": "interactive",
                "payload": dict(payload),
                "accepts_response_payload": payload.get("type") == "view_submission",
            }
        )
        return envelope_id

    async def ack(self, envelope_id: str, within: float = 5.0) -> dict[str, Any]:
        """Wait for the client's ack of ``envelope_id``; returns the ack message."""
        return await asyncio.wait_for(asyncio.shield(self._acks[envelope_id]), within)
