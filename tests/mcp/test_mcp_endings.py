"""How an ``ask_user_question`` call ends, and what it makes of arguments it cannot take.

The MCP server runs in process behind the SDK's in-memory client session, asking either a
real bot (``tests.api.test_gateway.running``) or a small fake bot (an aiohttp server on
127.0.0.1) whose long-poll replies a test chooses: cut short, not UTF-8, the wrong shape,
a 5xx. Only ``answered``, ``cancelled``, ``aborted`` and ``failed`` end a question; on any
other way out the tool aborts it (``DELETE``), so nobody is left a question in Slack that
no agent waits for, and the agent still gets the seam's ``{name, code, message}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from mcp import Client
from mcp.types import CallToolResult, TextContent

import bot.api.gateway
from bot.api.body import QuestionPost
from bot.mcp import TOOL_NAME, BotClient, build_server
from tests.api.test_gateway import API_TOKEN, DEPLOY, running
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(90)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SECOND = {
    "questions": [
        {"id": "second", "question": "Second question?", "options": [{"label": "Yes"}]},
    ]
}


class FakeBot:
    """The bot's ``/v1/questions`` routes: a POST takes question ``q1``, ``get`` answers
    its long-polls, a DELETE answers ``delete_status``; every request is recorded."""

    def __init__(self, get: Handler, delete_status: int = 200) -> None:
        self.requests: list[tuple[str, str]] = []
        self._get = get
        self._delete_status = delete_status
        self.app = web.Application()
        self.app.router.add_post("/v1/questions", self.post)
        self.app.router.add_get("/v1/questions/{id}", self.get)
        self.app.router.add_delete("/v1/questions/{id}", self.delete)

    async def post(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("POST", request.path))
        return web.json_response({"id": "q1", "state": "pending"}, status=201)

    async def get(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("GET", request.path))
        return await self._get(request)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("DELETE", request.path))
        view = {"id": "q1", "state": "aborted"}
        return web.json_response(view, status=self._delete_status)

    def count(self, method: str) -> int:
        """How many ``method`` requests it saw."""
        return sum(1 for seen, _ in self.requests if seen == method)


@contextlib.asynccontextmanager
async def fake_bot(get: Handler, delete_status: int = 200) -> AsyncIterator[tuple[FakeBot, str]]:
    """A :class:`FakeBot` listening on a free port of 127.0.0.1, and its URL."""
    fake = FakeBot(get, delete_status)
    runner = web.AppRunner(fake.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield fake, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def session(url: str, token: str | None = None, **settings: Any) -> AsyncIterator[Client]:
    """The SDK's client on an in-memory session with ``build_server`` asking ``url``."""
    async with BotClient(url, token) as asking, Client(build_server(asking, **settings)) as client:
        yield client


def text_of(result: CallToolResult) -> str:
    """The one text block of a tool result."""
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The seam's error a failed call returned (as JSON text and as structured content)."""
    assert result.is_error, text_of(result)
    error: dict[str, Any] = json.loads(text_of(result))
    assert {"name", "code", "message"} <= error.keys(), error
    assert result.structured_content == error
    return error


# -- queued: still open ----------------------------------------------------------------------


@pytest.mark.slow
async def test_a_queued_question_is_waited_for_and_its_answer_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slowed limits: the POST answers 202 (``queued``) and the long-poll reads ``queued``;
    the call goes on waiting, the message is posted at its turn and its answer returned."""
    monkeypatch.setattr(bot.api.gateway, "POST_DEADLINE", 0.5)
    async with running(slack_rate_scale=0.2) as bed:  # the channel's next post in ~5 s
        status, _ = await bed.ask(DEPLOY)  # takes the channel's turn
        assert status == 201
        progress: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        async with session(bed.runtime.url, API_TOKEN, progress_every=0.5) as client:
            call = asyncio.ensure_future(
                client.call_tool(TOOL_NAME, SECOND, progress_callback=on_progress)
            )
            await until(lambda: len(bed.messages()) == 2 or call.done(), within=20, what="the post")
            assert not call.done(), text_of(call.result())
            queued = [m for m in progress if "rate limits" in m]
            assert len(queued) >= 2, progress  # the POST's 202 and at least one long-poll
            assert all("waiting for an answer" in m.lower() for m in progress), progress
            payload = bed.slack.click(bed.messages()[1], user=bed.alice, text="Yes")
            assert (await bed.slack.deliver(payload))[0] == 200
            result = await asyncio.wait_for(call, 10)
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == {"answers": [{"id": "second", "selected": ["Yes"]}]}


# -- other ways out: aborted, and the seam's error ------------------------------------------


async def cut_off(request: web.Request) -> web.StreamResponse:
    """A reply that stops half way through its body (the connection closes)."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = 200
    await response.prepare(request)
    await response.write(b'{"id": "q1", "sta')
    assert request.transport is not None
    request.transport.close()
    return response


def replying(status: int, body: bytes, content_type: str = "application/json") -> Handler:
    """A handler answering ``status`` with ``body``."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type)

    return handler


def view(**fields: Any) -> Handler:
    """A handler answering 200 with the question ``q1`` as ``fields`` say."""
    return replying(200, json.dumps({"id": "q1", **fields}).encode())


STORE_DOWN = {"name": "UserQuestionError", "code": "STORE_UNAVAILABLE", "message": "no store"}
BROKEN = {
    "cut off": (cut_off, "BOT_UNREACHABLE"),
    "not UTF-8": (replying(200, b'{"id": "q1", "state": "\xff\xfe"}'), "BAD_RESPONSE"),
    "answered without an answer": (view(state="answered"), "BAD_RESPONSE"),
    "answered, answer not an object": (view(state="answered", answer=[1]), "BAD_RESPONSE"),
    "no state": (view(), "BAD_RESPONSE"),
    "an unknown state": (view(state="postponed"), "BAD_RESPONSE"),
    "502 from a proxy": (replying(502, b"Bad Gateway", "text/plain"), "HTTP_502"),
    # Retried as a bot out of reach is, for reconnect_for, before the call ends.
    "503 store unavailable for good": (
        replying(503, json.dumps(STORE_DOWN).encode()),
        STORE_DOWN["code"],
    ),
}
RETRIED = {"cut off", "503 store unavailable for good"}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
async def test_a_broken_long_poll_aborts_the_question_and_is_the_seams_error(case: str) -> None:
    handler, code = BROKEN[case]
    async with fake_bot(handler) as (fake, url):
        async with session(url, progress_every=0.2, reconnect_for=1.0) as client:
            result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 20)
        await until(lambda: fake.count("DELETE"), within=5, what="the DELETE")
    assert error_of(result)["code"] == code
    assert ("DELETE", "/v1/questions/q1") in fake.requests
    assert (fake.count("GET") > 1) == (case in RETRIED), fake.requests


async def test_a_question_that_ended_is_not_aborted() -> None:
    dismissed = {"name": "UserQuestionError", "code": "ASK_CANCELLED", "message": "dismissed"}
    async with fake_bot(view(state="cancelled", error=dismissed)) as (fake, url):
        async with session(url, progress_every=0.2) as client:
            result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 10)
        await asyncio.sleep(0.2)
    assert error_of(result) == dismissed
    assert fake.count("DELETE") == 0


async def test_an_abort_that_fails_is_logged_and_the_error_returned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.mcp")
    bad_gateway = replying(502, b"Bad Gateway", "text/plain")
    async with (
        fake_bot(bad_gateway, delete_status=500) as (fake, url),
        session(url, progress_every=0.2) as client,
    ):
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 10)
    assert error_of(result)["code"] == "HTTP_502"
    assert fake.count("DELETE") == 1
    logged = [r.getMessage() for r in caplog.records if r.name == "bot.mcp"]
    assert any("could not abort q1" in line and "HTTP_500" in line for line in logged), logged


# -- pacing ----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_long_poll_that_answers_at_once_is_paced() -> None:
    """A bot that answers ``pending`` without waiting (stopping, it releases its long-polls)
    is asked again once per progress interval, not in a tight loop."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with (
        fake_bot(view(state="pending")) as (fake, url),
        session(url, progress_every=0.5) as client,
    ):
        call = asyncio.ensure_future(
            client.call_tool(TOOL_NAME, SECOND, progress_callback=on_progress)
        )
        await asyncio.sleep(2.0)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
    assert 2 <= fake.count("GET") <= 6, fake.count("GET")
    assert len(progress) <= 7, progress


# -- malformed arguments ---------------------------------------------------------------------

MALFORMED: dict[str, dict[str, Any]] = {
    "no questions": {},
    "questions not a list": {"questions": "Deploy?"},
    "a question without its text": {"questions": [{"id": "a"}]},
    "multiSelect not a boolean": {"questions": [{"id": "a", "question": "q", "multiSelect": "y"}]},
    "an attribute name for a wire name": {
        "questions": [{"id": "a", "question": "q", "multi_select": True}]
    },
    "an option without a label": {"questions": [{"id": "a", "question": "q", "options": [{}]}]},
    "an unknown intent": {
        "questions": [{"id": "a", "question": "q", "intent": {"kind": "poll", "approve": "x"}}]
    },
    "a label of 121 characters": {"questions": [{"id": "a", "question": "q"}], "label": "x" * 121},
    "a label not a string": {"questions": [{"id": "a", "question": "q"}], "label": 7},
}


async def test_malformed_arguments_are_the_seams_error_where_the_bot_says_so() -> None:
    """Each malformed call is one JSON error, ``INVALID_REQUEST`` with ``errors[{loc,
    msg}]`` at the locations the bot's own 422 gives for the same body; nothing is asked."""
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        for case, arguments in MALFORMED.items():
            status, refused = await bed.ask(arguments)
            assert status == 422, (case, refused)
            result = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), 10)
            error = error_of(result)
            assert (error["name"], error["code"]) == ("ValidationError", "INVALID_REQUEST"), case
            assert all({"loc", "msg"} <= e.keys() for e in error["errors"]), (case, error)
            where = [e["loc"] for e in error["errors"]]
            assert where == [e["loc"] for e in refused["errors"]], (case, error, refused)
            assert error["errors"][0]["msg"] in error["message"], (case, error)
        assert bed.slack.calls.count("chat.postMessage") == 0
        assert bed.runtime.gateway.running == 0


async def test_the_advertised_input_schema_is_the_http_apis_body() -> None:
    """Agents see the schema of the body ``POST /v1/questions`` takes (``QuestionPost``,
    one model for both), every option described, unknown arguments refused."""
    async with session("http://127.0.0.1:9") as client:
        (tool, _) = (await client.list_tools()).tools
    posted = QuestionPost.model_json_schema(by_alias=True)
    assert tool.input_schema["properties"] == posted["properties"]
    assert tool.input_schema["additionalProperties"] is False
    assert tool.input_schema["title"] == "ask_user_questionArguments"
    assert all(p.get("description") for p in posted["properties"].values())
