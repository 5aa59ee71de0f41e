"""``bot.app.runtime``: every part the bot starts is released once, in reverse order, on every path.

The bot runs in sandbox mode in-process (the path ``python -m bot`` takes with no tokens);
the parts' own ``close``/``stop`` methods are wrapped to record when they run.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import bot.app.runtime
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.sandbox.site import SandboxServer
from adapters.slack.stores import PendingStore
from bot.app.runtime import start
from bot.settings.config import Settings


@pytest.fixture
def released(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The parts closed so far, in the order they were closed."""
    order: list[str] = []

    def recorded(name: str, close: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def recording(*args: Any, **kwargs: Any) -> Any:
            order.append(name)
            return await close(*args, **kwargs)

        return recording

    real_store = bot.app.runtime.open_store

    async def store(settings: Settings) -> PendingStore:
        made = await real_store(settings)
        monkeypatch.setattr(made, "close", recorded("store", made.close))
        return made

    monkeypatch.setattr(bot.app.runtime, "open_store", store)
    web_client = recorded("web client", bot.app.runtime.close_web_client)
    monkeypatch.setattr(bot.app.runtime, "close_web_client", web_client)
    monkeypatch.setattr(SandboxServer, "stop", recorded("sandbox", SandboxServer.stop))
    cleanup = web.AppRunner.cleanup

    async def cleanup_runner(runner: web.AppRunner) -> None:
        paths = {resource.canonical for resource in runner.app.router.resources()}
        if "/healthz" in paths:  # the bot's server, not the sandbox's
            order.append("http server")
        await cleanup(runner)

    monkeypatch.setattr(web.AppRunner, "cleanup", cleanup_runner)
    monkeypatch.setattr(
        SlackQuestionProvider, "aclose", recorded("questions", SlackQuestionProvider.aclose)
    )
    return order


async def test_stop_releases_every_part_once_in_reverse_order(released: list[str]) -> None:
    runtime = await start(Settings(mode="sandbox", port=0, sandbox_port=0, shutdown_grace=1))
    assert released == []
    async with aiohttp.ClientSession() as session, session.get(f"{runtime.url}/healthz") as r:
        assert (await r.json())["pending"] == 0
    session_of_slack = runtime.app.client.session
    await runtime.stop()
    await runtime.stop()  # a second stop does nothing
    assert released == ["questions", "http server", "store", "web client", "sandbox"]
    assert session_of_slack is not None and session_of_slack.closed
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"{runtime.url}/healthz")


async def test_a_start_that_fails_releases_what_it_opened_in_reverse_order(
    released: list[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            await start(Settings(mode="sandbox", port=port, sandbox_port=0))
    # The server never served; nothing was pending, so no question was interrupted.
    assert released == ["http server", "store", "web client", "sandbox"]


async def test_a_start_that_fails_at_auth_test_releases_the_store_session_and_sandbox(
    released: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise aiohttp.ClientConnectionError("connection refused")

    monkeypatch.setattr(bot.app.runtime, "build_app", refused)
    with pytest.raises(RuntimeError, match=r"cannot reach Slack's Web API \(auth.test\)"):
        await start(Settings(mode="sandbox", port=0, sandbox_port=0))
    assert released == ["store", "web client", "sandbox"]
