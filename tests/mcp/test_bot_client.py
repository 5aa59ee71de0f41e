"""``BotClient``, the MCP server's client of the bot's HTTP API, as its users make it."""

from __future__ import annotations

import asyncio

import pytest

from bot.mcp import BotClient

pytestmark = pytest.mark.timeout(10)


def test_it_is_made_outside_a_running_loop_and_entered_in_one_later() -> None:
    client = BotClient("http://127.0.0.1:9", "token")

    async def use() -> None:
        async with client:
            pass

    asyncio.run(use())


async def test_each_async_with_opens_a_session_of_its_own() -> None:
    client = BotClient("http://127.0.0.1:9")
    async with client:
        pass
    async with client:
        assert client._session is not None and not client._session.closed


async def test_used_without_async_with_it_says_so() -> None:
    with pytest.raises(RuntimeError, match="async with"):
        await BotClient("http://127.0.0.1:9").ask({"questions": []}, key="k")
