"""A post whose reply is lost, a call cancelled before its post arrived, a store outage.

The MCP server runs in process (``tests.mcp.test_mcp_endings.session``) asking a fake bot whose
``POST`` a test breaks, or the real bot behind a proxy that loses the first connection.
A lost reply may have asked the question all the same: the post is retried with its
Idempotency-Key, and given up only by aborting what the key asked, found without asking it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from bot.mcp import TOOL_NAME
from tests.api.test_gateway import API_TOKEN, DEPLOY, running
from tests.mcp.test_mcp_endings import SECOND, error_of, session, text_of
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)

ANSWER = {"answers": [{"id": "second", "selected": ["Yes"]}]}
STORE_DOWN = {"name": "UserQuestionError", "code": "STORE_UNAVAILABLE", "message": "retry"}


class PostingBot:
    """The bot's routes: the first ``lost`` POSTs ask ``q1`` but their replies are
    ``lose``'s (cut off, or a 503); a conditional POST (``If-Match: *``) finds ``q1`` once
    asked; a long-poll answers it. Each request is recorded with its Idempotency-Key."""

    def __init__(self, lost: int, lose: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        self.lost, self.lose = lost, lose
        self.asked = False
        self.bodies: list[Any] = []
        self.poll: Callable[[web.Request], Awaitable[web.StreamResponse]] = answered
        self.requests: list[tuple[str, str | None]] = []

    async def post(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(json.loads(await request.read()))
        key = request.headers.get("Idempotency-Key")
        if request.headers.get("If-Match") == "*":
            self.requests.append(("LOOKUP", key))
            if not self.asked:
                body = {"name": "RequestError", "code": "NOT_ASKED", "message": "none"}
                return web.json_response(body, status=412)
            return web.json_response({"id": "q1", "state": "pending"})
        self.requests.append(("POST", key))
        self.asked = True
        if self.lost > 0:
            self.lost -= 1
            return await self.lose(request)
        return web.json_response({"id": "q1", "state": "pending"}, status=201)

    async def get(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("GET", None))
        return await self.poll(request)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("DELETE", None))
        return web.json_response({"id": "q1", "state": "aborted"})

    def seen(self, kind: str) -> list[str | None]:
        return [key for seen, key in self.requests if seen == kind]


async def answered(request: web.Request) -> web.StreamResponse:
    return web.json_response({"id": "q1", "state": "answered", "answer": ANSWER})


async def cut(request: web.Request) -> web.StreamResponse:
    """The connection closes before any reply (the bot has the question)."""
    assert request.transport is not None
    request.transport.close()
    return web.Response()


async def store_down(request: web.Request) -> web.StreamResponse:
    return web.json_response(STORE_DOWN, status=503)


@contextlib.asynccontextmanager
async def posting_bot(lost: int, lose: Any) -> AsyncIterator[tuple[PostingBot, str]]:
    fake = PostingBot(lost, lose)
    app = web.Application()
    app.router.add_post("/v1/questions", fake.post)
    app.router.add_get("/v1/questions/{id}", fake.get)
    app.router.add_delete("/v1/questions/{id}", fake.delete)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield fake, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.mark.slow
@pytest.mark.parametrize("lose", [cut, store_down], ids=["cut off", "503 store unavailable"])
async def test_a_post_whose_reply_is_lost_is_posted_again_with_its_key(lose: Any) -> None:
    async with (
        posting_bot(2, lose) as (fake, url),
        session(url, progress_every=0.2, reconnect_for=10.0) as client,
    ):
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 30)
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == ANSWER
    keys = fake.seen("POST")
    assert len(keys) == 3 and len(set(keys)) == 1 and keys[0], fake.requests
    assert not fake.seen("DELETE")


@pytest.mark.slow
@pytest.mark.parametrize("lose", [cut, store_down], ids=["cut off", "503 store unavailable"])
async def test_a_post_lost_for_good_aborts_what_its_key_asked(lose: Any) -> None:
    async with (
        posting_bot(1000, lose) as (fake, url),
        session(url, progress_every=0.2, reconnect_for=1.0) as client,
    ):
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 30)
    code = "BOT_UNREACHABLE" if lose is cut else "STORE_UNAVAILABLE"
    assert error_of(result)["code"] == code
    assert len(fake.seen("POST")) >= 2, fake.requests
    assert fake.seen("LOOKUP") == fake.seen("POST")[:1], fake.requests  # the same key
    assert fake.requests[-1] == ("DELETE", None)


async def test_a_refused_post_is_not_retried_nor_aborted() -> None:
    async def refused(request: web.Request) -> web.StreamResponse:
        body = {"name": "UserQuestionError", "code": "EMPTY_QUESTIONS", "message": "none"}
        return web.json_response(body, status=422)

    async with (
        posting_bot(1000, refused) as (fake, url),
        session(url, progress_every=0.2, reconnect_for=5.0) as client,
    ):
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 30)
    assert error_of(result)["code"] == "EMPTY_QUESTIONS"
    assert [kind for kind, _ in fake.requests] == ["POST"]


@pytest.mark.slow
async def test_a_brief_store_outage_while_waiting_is_waited_out() -> None:
    polls = 0

    async def get(request: web.Request) -> web.StreamResponse:
        nonlocal polls
        polls += 1
        if polls <= 2:
            return web.json_response(STORE_DOWN, status=503)
        return await answered(request)

    async with posting_bot(0, cut) as (fake, url):
        fake.poll = get
        async with session(url, progress_every=0.2, reconnect_for=10.0) as client:
            result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 30)
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == ANSWER
    assert polls == 3 and not fake.seen("DELETE")


# -- cancelled before the post reached the bot ----------------------------------------------


class LossyProxy:
    """Forwards to ``target``; the first connection's bytes are lost (never reach it).
    ``answered`` counts the bot's replies it relayed."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.first = True
        self.answered = 0

    async def pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, back: bool) -> None:
        try:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
                self.answered += back
        finally:
            w.close()

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if self.first:
            self.first = False
            await r.read()  # swallowed until the client gives up
            w.close()
            return
        ur, uw = await asyncio.open_connection(self.target.hostname, self.target.port)
        await asyncio.gather(
            self.pipe(r, uw, False), self.pipe(ur, w, True), return_exceptions=True
        )


async def test_a_call_cancelled_before_its_post_arrived_asks_nothing() -> None:
    async with running() as bed:
        proxy = LossyProxy(bed.runtime.url)
        server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server, session(url, API_TOKEN) as client:
            call = asyncio.ensure_future(client.call_tool(TOOL_NAME, DEPLOY))
            await until(lambda: not proxy.first, within=10, what="the lost post")
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # The cancelled call looks its key up: the bot's answer to that is relayed.
            await until(lambda: proxy.answered, within=20, what="the key's lookup")
        assert bed.slack.calls.count("chat.postMessage") == 0
        assert bed.runtime.gateway.running == 0
        assert not bed.messages()
