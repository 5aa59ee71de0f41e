"""Reaching the host: reconnect soon after it is back, and keep saying why it cannot be reached.

A host that is down (or a ``DSH_HOST_URL`` that is not a dsh host) is tried again with
backoff capped at ``backoff_max`` (1.5 s by default: the bot is back within ~2 s of the
host), and the reason is logged again every ``REPEAT_WARNING`` seconds and shown in
``status()`` (``/healthz``), not said once and then kept quiet.
"""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest
from aiohttp import web

from adapters.dsh import client as downlink
from adapters.dsh.client import DshHostClient
from adapters.dsh.link import NO_CONNECT
from bot.questions.service import UserQuestionService
from tests.dsh.test_dsh_client import eventually

pytestmark = pytest.mark.timeout(60)


async def _server(status: int, seen: list[float]) -> web.AppRunner:
    """A web server answering every request with ``status``, noting when each came."""

    async def answer(request: web.Request) -> web.Response:
        seen.append(asyncio.get_running_loop().time())
        return web.Response(status=status, text="no")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.mark.slow
async def test_attempts_are_never_more_than_the_capped_backoff_apart() -> None:
    seen: list[float] = []
    runner = await _server(503, seen)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    client = DshHostClient(url, UserQuestionService(), provider=None, heartbeat=None)  # type: ignore[arg-type]
    await client.start()
    try:
        await asyncio.sleep(8)
    finally:
        await client.stop()
        await runner.cleanup()
    gaps = [later - earlier for earlier, later in itertools.pairwise(seen)]
    print(f"{len(seen)} attempts in 8 s; longest gap {max(gaps):.2f} s")
    # Defaults: backoff capped at 1.5 s (it doubled to 30 s: the bot came back 32 s late).
    assert len(seen) >= 6 and max(gaps) < 2.0


@pytest.mark.slow
async def test_a_wrong_url_keeps_saying_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(downlink, "REPEAT_WARNING", 0.3, raising=False)
    seen: list[float] = []
    runner = await _server(405, seen)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    client = DshHostClient(
        url,
        UserQuestionService(),
        provider=None,  # type: ignore[arg-type]
        heartbeat=None,
        backoff_initial=0.05,
        backoff_max=0.1,
    )
    caplog.set_level(logging.WARNING, logger="adapters.dsh")
    await client.start()
    try:
        await asyncio.sleep(1.5)
        status = client.status()
    finally:
        await client.stop()
        await runner.cleanup()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    reasons = [getattr(r, "reason", "") for r in warnings]
    assert len(warnings) >= 3 and all("HTTP 405" in reason for reason in reasons)
    assert status["dsh"] == "disconnected" and "HTTP 405" in status["dshProblem"]


async def test_a_host_without_connect_is_named_unsupported() -> None:
    """A dsh 0.1.1-rc.2 host (its downlink is ``/api/events.mux``; ``/connect`` is a 404)."""

    async def downlink_only(request: web.Request) -> web.Response:
        return web.Response(status=426, text="events.mux is served as a WebSocket only")

    app = web.Application()
    app.router.add_get("/api/events.mux", downlink_only)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    client = DshHostClient(url, UserQuestionService(), provider=None, heartbeat=None)  # type: ignore[arg-type]
    await client.start()
    try:
        status = await eventually(
            lambda: client.status().get("dshProblem") and client.status(), "why"
        )
    finally:
        await client.stop()
        await runner.cleanup()
    assert status["dsh"] == "disconnected"
    assert status["dshProblem"] == NO_CONNECT.format(status=404)
    assert "0.1.1-rc.2 is no longer supported" in status["dshProblem"]
