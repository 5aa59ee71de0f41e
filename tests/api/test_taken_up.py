"""API questions a starting bot takes up count toward its open-question caps (issue 14).

Two bots in this test process, one after the other, on the same SQLite file and the same
Slack stand-in: the first is asked questions over the API with two tokens and stopped (as
SIGTERM does); the second takes them up at start, so they hold its caps per process and per
token, and a slot comes back when one of them ends (answered on the second bot).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from adapters.slack.sandbox.webapi import SlackStandIn
from bot.app.runtime import Runtime, start
from bot.settings.config import Settings
from tests.api.test_gateway import DEPLOY
from tests.bot_process import fresh_store_path
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
SIGNING_SECRET = secrets.token_hex(16)
ALPHA = f"alpha-{secrets.token_hex(16)}"
BETA = f"beta-{secrets.token_hex(16)}"


@contextlib.asynccontextmanager
async def bot(slack: SlackStandIn, channel: str, store: str) -> AsyncIterator[Runtime]:
    """A bot in HTTP mode on ``store``: two tokens, at most 4 open, 2 per token."""
    settings = Settings(
        mode="http",
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_channel=channel,
        slack_api_url=slack.url,
        port=0,
        bot_api_token=None,
        bot_api_tokens=(("alpha", ALPHA), ("beta", BETA)),
        max_open_questions=4,
        max_open_per_token=2,
        shutdown_grace=2.0,
        store_path=store,
    )
    runtime = await start(settings)
    slack.interactivity_url = f"{runtime.url}/slack/events"
    try:
        yield runtime
    finally:
        await runtime.stop()


async def ask(runtime: Runtime, token: str) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(runtime.url, headers=headers) as http,
        http.post("/v1/questions", json=DEPLOY) as response,
    ):
        return response.status, await response.json()


@pytest.mark.slow
async def test_questions_taken_up_at_start_hold_the_caps_until_they_end() -> None:
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET)
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    store = fresh_store_path()
    await slack.start()
    try:
        async with bot(slack, channel, store) as first:
            asked = [await ask(first, token) for token in (ALPHA, ALPHA, BETA)]
            assert [status for status, _ in asked] == [201, 201, 201]
        async with bot(slack, channel, store) as second:
            assert second.gateway.held.take(await second.provider.resume()) == 0  # held already
            status, refused = await ask(second, ALPHA)
            assert status == 429 and "alpha" in refused["message"]  # alpha has its 2
            assert (await ask(second, BETA))[0] == 201
            status, refused = await ask(second, BETA)
            assert status == 429 and "this bot" in refused["message"]  # 4 open here
            _, first_alpha = asked[0]
            where = first_alpha["message"]
            message = slack.workspace.message(where["channel"], where["ts"])
            answered, _ = await slack.deliver(slack.click(message, user=alice, text="Deploy"))
            assert answered == 200
            await until(
                lambda: list(second.gateway.held.asked.values()).count(False) == 2,
                what="the slot to come back",
            )
            assert (await ask(second, ALPHA))[0] == 201
            assert (await ask(second, BETA))[0] == 429  # 4 open again
    finally:
        await slack.stop()
