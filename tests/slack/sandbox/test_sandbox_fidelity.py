"""Where the Slack stand-in was more lenient than Slack, so tests passed that Slack would fail.

Each test drives the stand-in as the bot does (slack_sdk's ``AsyncWebClient``, a real bolt
app answering signed interactions, the page's own HTTP calls) and checks Slack's answer:

- the 3-second ack deadline of interactions (slack-platform.md §2.1);
- a rich_text emoji's ``unicode`` is code points, never markup, on the page;
- posting into a conversation the bot is not in (§6: ``chat:write.public`` reaches public
  channels only, for ``chat.postMessage`` only);
- ``chat.postMessage``'s per-channel limit counts the conversation, however it is named (§4);
- the page served on another loopback address accepts its own origin.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.sandbox import RateLimiter
from adapters.slack.sandbox.site import SandboxServer
from bot.app.scopes import BOT_SCOPES

Json = dict[str, Any]
SECRET = "sandbox-fidelity-secret"
SLACKS_TIMEOUT_TEXT = "We had some trouble connecting. Try again?"


def plain(text: str) -> Json:
    return {"type": "plain_text", "text": text}


def modal(delay: float) -> Json:
    """A modal whose submission the app below acks after ``delay`` seconds."""
    return {
        "type": "modal",
        "callback_id": "slow",
        "private_metadata": str(delay),
        "title": plain("Slow"),
        "submit": plain("Send"),
        "blocks": [
            {
                "type": "input",
                "block_id": "answer",
                "label": plain("Answer"),
                "element": {"type": "plain_text_input", "action_id": "text"},
            }
        ],
    }


async def refusal(call: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        await call
    return str(info.value.response["error"])


@pytest.fixture
async def sandbox() -> AsyncIterator[SandboxServer]:
    server = SandboxServer(signing_secret=SECRET)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def client(sandbox: SandboxServer) -> AsyncWebClient:
    return AsyncWebClient(token=sandbox.standin.token, base_url=sandbox.api_url, retry_handlers=[])


# --- the 3-second ack deadline ---------------------------------------------------------


@pytest.fixture
async def slow_app(sandbox: SandboxServer) -> AsyncIterator[list[str]]:
    """A bolt app that acks each submission after the modal's delay with an error answer;
    yields the views it has acked (after the ack was sent)."""
    client = AsyncWebClient(token=sandbox.standin.token, base_url=sandbox.api_url)
    app = AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)
    acked: list[str] = []

    @app.view("slow")
    async def slow(ack: AsyncAck, view: Json) -> None:
        await asyncio.sleep(float(view["private_metadata"]))
        await ack(response_action="errors", errors={"answer": "Too short"})
        acked.append(view["id"])

    async def events(request: web.Request) -> web.StreamResponse:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    server = web.Application()
    server.router.add_post("/slack/events", events)
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    await sandbox.connect_bot(f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events")
    try:
        yield acked
    finally:
        await runner.cleanup()


def open_modal(sandbox: SandboxServer, user: str, delay: float) -> str:
    trigger = sandbox.standin.new_trigger_id(user)
    opened = sandbox.standin.api.call("views.open", {"trigger_id": trigger, "view": modal(delay)})
    assert opened["ok"], opened
    return str(opened["view"]["id"])


@pytest.mark.slow
async def test_an_ack_after_three_seconds_is_a_timeout_and_its_answer_is_ignored(
    sandbox: SandboxServer, slow_app: list[str]
) -> None:
    alice, bob = (p.id for p in sandbox.people[:2])
    late = open_modal(sandbox, alice, 4.0)
    in_time = open_modal(sandbox, bob, 2.0)
    standin = sandbox.standin
    page = sandbox.page_url.rstrip("/")

    async def submit_on_the_page() -> tuple[int, Json, float]:
        started = time.monotonic()
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{page}/sandbox/submit",
                json={"user": alice, "view_id": late, "values": [["answer", "text", "hi"]]},
                headers={"Origin": page},
            ) as response,
        ):
            return response.status, await response.json(), time.monotonic() - started

    (status, body, took), answered = await asyncio.gather(
        submit_on_the_page(),
        standin.deliver(standin.submission(in_time, values={"text": "hi"})),
    )
    # Slack gave up after 3 s: the person sees Slack's error and the view is left as it was.
    assert took < 3.9, took
    assert status == 502 and body["error"] == "ack_timeout", body
    assert body["detail"] == SLACKS_TIMEOUT_TEXT
    assert answered[0] == 200 and json.loads(answered[1])["response_action"] == "errors"
    assert standin.workspace.views[in_time].errors == {"answer": "Too short"}
    for _ in range(100):  # the late ack does arrive, and changes nothing
        if late in slow_app:
            break
        await asyncio.sleep(0.05)
    assert late in slow_app
    assert late in standin.workspace.views and standin.workspace.views[late].errors == {}


@pytest.mark.slow
async def test_deliver_returns_the_ack_timeout_result(
    sandbox: SandboxServer, slow_app: list[str]
) -> None:
    alice = sandbox.people[0].id
    late = open_modal(sandbox, alice, 3.5)
    standin = sandbox.standin
    started = time.monotonic()
    status, body = await standin.deliver(standin.submission(late, values={"text": "x"}))
    assert (status, body) == (None, "ack_timeout")
    assert 2.9 < time.monotonic() - started < 3.4
    assert standin.workspace.views[late].errors == {}


# --- rich_text emoji ---------------------------------------------------------------------


def emoji_message(*emoji: Json) -> list[Json]:
    return [
        {
            "type": "rich_text",
            "elements": [{"type": "rich_text_section", "elements": list(emoji)}],
        }
    ]


def hexed(text: str) -> str:
    return "-".join(f"{ord(c):x}" for c in text)


async def posted_html(sandbox: SandboxServer, client: AsyncWebClient, blocks: list[Json]) -> str:
    await client.chat_postMessage(channel=sandbox.channel, text="emoji", blocks=blocks)
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{sandbox.page_url}sandbox/state", params={"user": sandbox.people[0].name}
        ) as response,
    ):
        state = await response.json()
    return str(state["messages"][-1]["blocks"][0]["html"])


@pytest.mark.parametrize(
    "unicode",
    [
        hexed("<img src=x onerror=alert(1)>"),
        hexed("<script>alert(1)</script>"),
        "3c-1f600",  # one bad code point spoils the lot
        "22-3e-3c-62-3e",
        "d800",  # a surrogate
        "110000",  # past Unicode
        "1f600-zz",
        "202e-1f600",  # a bidi override
        "",
    ],
)
async def test_an_emoji_unicode_that_is_not_emoji_code_points_renders_as_its_name(
    sandbox: SandboxServer, client: AsyncWebClient, unicode: str
) -> None:
    blocks = emoji_message({"type": "emoji", "name": "smile", "unicode": unicode})
    html = await posted_html(sandbox, client, blocks)
    assert "<img" not in html and "<script" not in html and "<b>" not in html
    assert ":smile:" in html


async def test_emoji_code_points_render_as_characters_and_names_are_escaped(
    sandbox: SandboxServer, client: AsyncWebClient
) -> None:
    blocks = emoji_message(
        {"type": "emoji", "name": "thumbsup", "unicode": "1f44d"},
        {"type": "emoji", "name": "technologist", "unicode": "1f469-200d-1f4bb"},
        {"type": "emoji", "name": "one", "unicode": "0031-fe0f-20e3"},
        {"type": "emoji", "name": "<img src=x onerror=alert(1)>"},
    )
    html = await posted_html(sandbox, client, blocks)
    assert "\U0001f44d" in html and "\U0001f469\u200d\U0001f4bb" in html
    assert "1\ufe0f\u20e3" in html
    assert "<img" not in html and ":&lt;img src=x onerror=alert(1)&gt;:" in html


# --- posting where the bot is not a member ------------------------------------------------


async def test_the_bot_posts_only_where_it_may(
    sandbox: SandboxServer, client: AsyncWebClient
) -> None:
    ws = sandbox.workspace
    alice = sandbox.people[0].id
    public = ws.add_channel("ops", members=[alice])
    # Ephemeral messages need the bot in the channel (chat:write.public is for posts).
    refused = await refusal(client.chat_postEphemeral(channel=public.id, user=alice, text="x"))
    assert refused == "not_in_channel"
    assert ws.ephemerals_for(alice) == []
    # The app holds chat:write.public (manifest.yml), so a public channel takes its posts.
    assert ws.chat_write_public == ("chat:write.public" in BOT_SCOPES)
    assert (await client.chat_postMessage(channel=public.id, text="hi"))["ok"]
    ws.chat_write_public = False
    assert await refusal(client.chat_postMessage(channel="#ops", text="x")) == "not_in_channel"
    assert len(ws.history(public.id)) == 1
    # A private channel the bot is not in does not exist for it.
    private = ws.add_channel("secret", members=[alice], private=True)
    ws.chat_write_public = True
    for call in (
        client.chat_postMessage(channel=private.id, text="x"),
        client.chat_postEphemeral(channel=private.id, user=alice, text="x"),
    ):
        assert await refusal(call) == "channel_not_found"
    assert ws.history(private.id) == []
    # Invited, the bot posts in both; DMs and the everyone-channel are unchanged.
    joined = ws.add_channel("team", members=[alice, ws.bot_user.id], private=True)
    assert (await client.chat_postMessage(channel=joined.id, text="hi"))["ok"]
    assert (await client.chat_postEphemeral(channel=joined.id, user=alice, text="hi"))["ok"]
    assert (await client.chat_postMessage(channel=alice, text="dm"))["ok"]
    assert (await client.chat_postMessage(channel=sandbox.channel, text="all"))["ok"]


# --- chat.postMessage's per-channel limit ---------------------------------------------------


async def test_the_per_channel_post_limit_counts_the_conversation_not_its_name(
    sandbox: SandboxServer, client: AsyncWebClient
) -> None:
    now = [1000.0]
    limits = SlackLimits()
    sandbox.standin.rate_limits = RateLimiter(limits, clock=lambda: now[0])
    ws = sandbox.workspace
    channel = ws.add_channel("agents")
    alice = sandbox.people[0].id
    dm = ws.open_dm(alice)

    async def burst(names: list[str]) -> list[str | None]:
        """Post once per name, all at one instant; the Retry-After of each refusal."""

        async def one(name: str) -> str | None:
            try:
                await client.chat_postMessage(channel=name, text="x")
            except SlackApiError as refused:
                assert refused.response.status_code == 429
                assert refused.response["error"] == "ratelimited"
                return str(refused.response.headers["Retry-After"])
            return None

        return list(await asyncio.gather(*(one(name) for name in names)))

    answers = await burst([channel.id, "#agents", "agents"] * 4)
    assert answers.count(None) == limits.post_burst
    assert all(a is not None and int(a) >= 1 for a in answers if a is not None)
    assert len(ws.history(channel.id)) == limits.post_burst
    answers = await burst([alice, dm.id] * 3)  # a user id posts into its DM
    assert answers.count(None) == limits.post_burst
    assert len(ws.history(dm.id)) == limits.post_burst


# --- the page's origin on another loopback address ------------------------------------------


async def test_the_page_on_another_loopback_address_accepts_its_own_origin() -> None:
    sandbox = SandboxServer(signing_secret=SECRET)
    await sandbox.start(host="127.0.0.2")
    try:
        page = sandbox.page_url.rstrip("/")
        port = page.rsplit(":", 1)[1]
        body = {"user": "alice", "channel": sandbox.channel, "text": "hi"}
        async with aiohttp.ClientSession() as session:
            for origin, expected in (
                (page, 200),
                (f"http://127.0.0.1:{port}", 200),
                (f"http://127.0.0.3:{port}", 403),
                (f"http://127.0.0.2:{int(port) + 1}", 403),
                ("https://evil.example", 403),
            ):
                async with session.post(
                    f"{page}/sandbox/post", json=body, headers={"Origin": origin}
                ) as response:
                    answer = await response.json()
                    assert response.status == expected, (origin, answer)
                    if expected == 403:
                        assert answer["error"] == "cross_origin"
    finally:
        await sandbox.stop()
