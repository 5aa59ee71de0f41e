"""What the restart tests share: real bot processes stopped or killed, one Slack stand-in.

``slack`` (a fixture: the stand-in, which outlives every bot process of a test),
``BOT_TOKEN``/``SIGNING_SECRET`` it and the bots agree on, ``HOW`` (the parametrisation
over SIGTERM and SIGKILL), ``stop`` (by either) and ``top_level`` (the bot's messages).
Import the fixture by name into a test module that uses it.
"""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import AsyncIterator

import pytest

from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.webapi import SlackStandIn
from tests.bot_process import BotProcess

__all__ = ["BOT_TOKEN", "HOW", "SIGNING_SECRET", "slack", "stop", "top_level"]

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
SIGNING_SECRET = secrets.token_hex(16)

HOW = pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
"""Run a test with the bot stopped (SIGTERM, a clean stop) and killed (SIGKILL)."""


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    """The Slack stand-in (it outlives every bot process of the test)."""
    stand_in = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET)
    await stand_in.start()
    try:
        yield stand_in
    finally:
        await stand_in.stop()


def top_level(slack: SlackStandIn, channel: str) -> list[Message]:
    """The bot's top-level messages in the channel."""
    return [m for m in slack.workspace.history(channel) if m.thread_ts is None]


async def stop(process: BotProcess, how: signal.Signals) -> float:
    """Stop ``process`` with ``how`` (SIGTERM: it must exit 0); seconds it took to exit."""
    began = time.monotonic()
    if how == signal.SIGKILL:
        await process.kill()
    else:
        assert await process.stop(how) == 0
    return time.monotonic() - began
