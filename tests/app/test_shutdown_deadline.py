"""A stop keeps to SHUTDOWN_GRACE when what it closes does not answer.

``python -m bot`` runs as a subprocess with ``SHUTDOWN_GRACE=2``; between it and the part
under test sits ``FreezingProxy``, a TCP proxy on 127.0.0.1 that, once frozen, forwards
nothing either way and keeps every connection open: a Socket Mode link or a Redis that
went silent. SIGTERM then stops the bot: the step that waits on the silent part is
abandoned at the deadline and the log says so ("shutdown: gave up on ..."); the API's
pending question stays pending in the store for the next start.

Before the deadline, closing the Socket Mode link waited aiohttp's 10 s WebSocket close
(11.5 s in all) and an unanswering Redis 5 s per operation (10 s in all).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from adapters.slack.sandbox.webapi import SlackStandIn
from adapters.slack.stores import SqlitePendingStore
from tests.bot_process import BotProcess
from tests.conftest import RedisStoreFactory
from tests.slack_harness import all_text, interactive_elements
from tests.socket_mode_standin import SocketModeStandIn

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
APP_TOKEN = f"xapp-1-A0SANDBOX-{secrets.token_hex(8)}"
GRACE = 2.0
OUTER_BOUND = GRACE + 3  # the old code took 10 s and more; the new one GRACE + 1.5 at most

DEPLOY = {
    "questions": [
        {"id": "deploy", "question": "Deploy?", "options": [{"label": "Yes"}, {"label": "No"}]}
    ]
}


class FreezingProxy:
    """A TCP proxy on 127.0.0.1 to ``host:port``; ``freeze()`` stops it forwarding anything
    (it reads no more, answers nothing, closes nothing)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.connections = 0
        self._thawed = asyncio.Event()
        self._thawed.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    @contextlib.asynccontextmanager
    async def serving(cls, host: str, port: int) -> AsyncIterator[FreezingProxy]:
        proxy = cls(host, port)
        proxy._server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
        try:
            yield proxy
        finally:
            proxy._server.close()
            for task in list(proxy._tasks):
                task.cancel()
            for writer in list(proxy._writers):
                writer.close()

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def freeze(self) -> None:
        self._thawed.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            upstream_r, upstream_w = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return
        self._writers.add(upstream_w)
        for task in (
            asyncio.ensure_future(self._pump(reader, upstream_w)),
            asyncio.ensure_future(self._pump(upstream_r, writer)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._thawed.wait()
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            if self._thawed.is_set():
                writer.close()


async def stop_timed(bot: BotProcess) -> tuple[int, float]:
    """SIGTERM the bot; (exit code, seconds until it exited)."""
    began = time.monotonic()
    code = await bot.stop(signal.SIGTERM, within=30)
    return code, time.monotonic() - began


@pytest.mark.slow
async def test_a_silent_socket_mode_link_is_abandoned_at_the_deadline(tmp_path: Path) -> None:
    slack = SlackStandIn(token=BOT_TOKEN)
    socket = SocketModeStandIn(app_token=APP_TOKEN)
    channel = slack.workspace.add_channel("agents").id
    link = urlsplit(await socket.start())
    assert link.hostname is not None and link.port is not None
    try:
        async with FreezingProxy.serving(link.hostname, link.port) as proxy:

            @web.middleware
            async def connections_open(request: web.Request, handler: Any) -> web.StreamResponse:
                if request.path.rstrip("/") != "/api/apps.connections.open":
                    response: web.StreamResponse = await handler(request)
                    return response
                assert request.headers.get("Authorization") == f"Bearer {APP_TOKEN}"
                return web.json_response({"ok": True, "url": f"ws://{proxy.address}/link"})

            slack.app.middlewares.append(connections_open)
            await slack.start()
            store_path = tmp_path / "store.db"
            env = {
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_APP_TOKEN": APP_TOKEN,
                "SLACK_CHANNEL": channel,
                "SLACK_API_URL": slack.url,
                "PORT": "0",
                "STORE": "sqlite",
                "STORE_PATH": str(store_path),
                "SHUTDOWN_GRACE": str(GRACE),
            }
            async with BotProcess.start(env, cwd=tmp_path) as bot:
                await socket.connected()
                async with (
                    aiohttp.ClientSession(bot.url) as http,
                    http.post("/v1/questions", json=DEPLOY) as response,
                ):
                    assert response.status == 201, await response.text()
                    posted = await response.json()
                proxy.freeze()  # the link goes silent: no close frame comes back
                code, took = await stop_timed(bot)
            output = bot.output
            assert code == 0, output
            assert "shutdown: gave up on closing the Socket Mode connection after" in output
            assert "INFO bot stopped" in output
            assert took < OUTER_BOUND, (took, output)
            # The API's question stays pending, its message as it was.
            where = posted["message"]
            message = slack.workspace.message(where["channel"], where["ts"])
            assert "Interrupted" not in all_text(message.blocks)
            assert interactive_elements(message.blocks)
            store = SqlitePendingStore(store_path)
            await store.start()
            try:
                record = await store.get(posted["id"])
            finally:
                await store.close()
            assert record is not None and record.state == "pending"
    finally:
        await socket.stop()
        await slack.stop()


@pytest.mark.slow
async def test_a_silent_redis_is_abandoned_at_the_deadline(
    tmp_path: Path, redis_url: str, store_prefix: str, redis_store_factory: RedisStoreFactory
) -> None:
    real = urlsplit(redis_url)
    async with FreezingProxy.serving(real.hostname or "127.0.0.1", real.port or 6379) as proxy:
        env = {
            "REDIS_URL": real._replace(netloc=proxy.address).geturl(),
            "REDIS_PREFIX": store_prefix,
            "MODE": "sandbox",
            "PORT": "0",
            "SANDBOX_PORT": "0",
            "SHUTDOWN_GRACE": str(GRACE),
        }
        async with BotProcess.start(env, cwd=tmp_path) as bot:
            async with (
                aiohttp.ClientSession(bot.url) as http,
                http.post("/v1/questions", json=DEPLOY) as response,
            ):
                assert response.status == 201, await response.text()
                posted = await response.json()
            proxy.freeze()  # Redis goes silent for this bot
            code, took = await stop_timed(bot)
        output = bot.output
        assert code == 0, output
        assert "store: redis" in output
        assert "shutdown: gave up on ending this process's pending questions after" in output
        assert "shutdown: gave up on closing the pending store after" in output
        assert "INFO bot stopped" in output
        assert took < OUTER_BOUND, (took, output)
    # The API's question is still pending in Redis, for the next start.
    store = await redis_store_factory()
    record = await store.get(posted["id"])
    assert record is not None and record.state == "pending"
