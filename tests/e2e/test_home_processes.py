"""App Home across real ``python -m bot`` processes: the viewers are shared and outlive them.

- Two processes on one Redis: alice opens her Home tab through A, bob through B; a question
  asked through B and answered through A appears on both tabs, then leaves them, each
  change published exactly once to each (the process that made it publishes).
- SQLite, restarted: alice opens her Home tab, the bot stops (SIGTERM) and starts again on
  the same file; a question asked afterwards appears on her tab and leaves it when answered,
  without her opening it again.

What each person's tab showed is read from the Slack stand-in's recorded ``views.publish``
calls, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from adapters.slack.sandbox.signing import send_interaction
from adapters.slack.sandbox.webapi import SlackStandIn
from tests.bot_process import BotProcess
from tests.e2e.test_multiprocess import (
    API_TOKEN,
    BOT_TOKEN,
    DEPLOY,
    SIGNING_SECRET,
    eventually,
    two_bots,
)

QUESTION = "Question deploy?"
EMPTY = "Nothing is waiting"


def homes(slack: SlackStandIn, user: str) -> list[str]:
    """What ``user``'s Home tab was set to, each ``views.publish`` in order."""
    return [
        str(call.params.get("view"))
        for call in slack.calls("views.publish")
        if call.params.get("user_id") == user and call.ok
    ]


def shown(slack: SlackStandIn, user: str) -> list[str]:
    """Each publish to ``user``, summed up: the question listed, or the empty list."""
    return [
        QUESTION if QUESTION in view else EMPTY if EMPTY in view else view
        for view in homes(slack, user)
    ]


async def open_home(slack: SlackStandIn, user: str, events_url: str) -> None:
    """``user`` opens the app's Home tab; Slack sends the event to ``events_url``."""
    slack.interactivity_url = events_url
    status, _ = await slack.open_home(user)
    assert status == 200
    await eventually(lambda: homes(slack, user), what=f"{user}'s home to be published")


@pytest.mark.slow
async def test_a_change_in_either_process_republishes_every_home_tab_once(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    async with asyncio.timeout(60), two_bots(tmp_path, redis_url, store_prefix) as s:
        await open_home(s.slack, s.alice, f"{s.a.url}/slack/events")
        await open_home(s.slack, s.bob, f"{s.b.url}/slack/events")
        viewers = (s.alice, s.bob)

        status, posted = await s.b.ask(DEPLOY)
        assert status == 201
        for user in viewers:
            await eventually(
                lambda u=user: shown(s.slack, u)[-1] == QUESTION, what=f"{user}'s home lists it"
            )

        assert await s.a.send(s.click(posted, s.carol, "Deploy")) == 200
        await eventually(lambda: s.final(posted), what="the answered message")
        for user in viewers:
            await eventually(
                lambda u=user: shown(s.slack, u)[-1] == EMPTY, what=f"{user}'s home emptied"
            )
        # Opened, asked, answered: one publish each, whichever process the change was made in.
        assert shown(s.slack, s.alice) == [EMPTY, QUESTION, EMPTY]
        assert shown(s.slack, s.bob) == [EMPTY, QUESTION, EMPTY]
        assert await s.redis.zcard(f"{store_prefix}:home:viewers") == 2


@contextlib.asynccontextmanager
async def sqlite_bot(
    slack: SlackStandIn, channel: str, store: Path, cwd: Path
) -> AsyncIterator[BotProcess]:
    """``python -m bot`` in HTTP mode on the SQLite store file ``store``."""
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "BOT_API_TOKEN": API_TOKEN,
        "STORE_PATH": str(store),
        "SHUTDOWN_GRACE": "2",
        "SLACK_RATE_SCALE": "1000",
    }
    async with BotProcess.start(env, cwd=cwd) as bot:
        yield bot


@pytest.mark.slow
async def test_after_a_restart_an_opened_home_tab_is_still_refreshed(tmp_path: Path) -> None:
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET)
    alice, carol = (slack.workspace.add_user(name).id for name in ("alice", "carol"))
    channel = slack.workspace.add_channel("agents").id
    store = tmp_path / "store" / "questions.db"
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    async with (
        asyncio.timeout(60),
        slack,
        aiohttp.ClientSession(headers=headers) as api,
    ):
        async with sqlite_bot(slack, channel, store, tmp_path / "first") as first:
            await open_home(slack, alice, f"{first.url}/slack/events")
            assert await first.stop(signal.SIGTERM) == 0
        assert shown(slack, alice) == [EMPTY]

        async with sqlite_bot(slack, channel, store, tmp_path / "second") as second:
            async with api.post(f"{second.url}/v1/questions", json=DEPLOY) as response:
                assert response.status == 201
                posted = await response.json()
            await eventually(lambda: shown(slack, alice)[-1] == QUESTION, what="alice's home")

            where = posted["message"]
            message = slack.workspace.message(where["channel"], where["ts"])
            payload = slack.click(message, user=carol, text="Deploy")
            async with aiohttp.ClientSession() as web:
                status, _ = await send_interaction(
                    web, f"{second.url}/slack/events", payload, SIGNING_SECRET
                )
            assert status == 200
            await eventually(lambda: shown(slack, alice)[-1] == EMPTY, what="alice's emptied")
        assert shown(slack, alice) == [EMPTY, QUESTION, EMPTY]
