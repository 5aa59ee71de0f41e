"""How ``python -m bot.mcp`` stops: stdin closed, ``SIGTERM`` or ``SIGINT``.

The real process (``python -m bot.mcp``) speaks JSON-RPC lines over pipes to the test, as
an MCP host's would, and asks a fake bot (``tests.mcp.test_mcp_endings.FakeBot``) whose
long-polls wait. However it is stopped, it exits promptly, and a call in flight first
aborts its question (``DELETE``), so the host's going leaves nothing open in Slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.mcp import TOOL_NAME
from tests.bot_process import clean_environment
from tests.mcp.test_mcp_endings import SECOND, fake_bot
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)


async def waiting(request: web.Request) -> web.StreamResponse:
    """A long-poll that waits as long as it was asked to: the question stays open."""
    await asyncio.sleep(float(request.query.get("wait", "0")))
    return web.json_response({"id": "q1", "state": "pending"})


@contextlib.asynccontextmanager
async def mcp_process(url: str, cwd: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m bot.mcp`` asking ``url``, initialized (the handshake done) over pipes."""
    env = clean_environment({"BOT_URL": url, "MCP_PROGRESS_SECONDS": "2"})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.mcp",
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        send(
            process,
            "initialize",
            1,
            protocolVersion="2025-06-18",
            capabilities={},
            clientInfo={"name": "test", "version": "0"},
        )
        assert process.stdout is not None
        reply = json.loads(await asyncio.wait_for(process.stdout.readline(), 20))
        assert reply["id"] == 1 and "result" in reply, reply
        send(process, "notifications/initialized")
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def send(
    process: asyncio.subprocess.Process, method: str, id: int | None = None, **params: Any
) -> None:
    """Write one JSON-RPC message (a notification without ``id``) to the server's stdin."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params:
        message["params"] = params
    assert process.stdin is not None
    process.stdin.write((json.dumps(message) + "\n").encode())


async def exit_code(process: asyncio.subprocess.Process, within: float = 10.0) -> int:
    """The exit code, which must come within ``within`` seconds."""
    try:
        return await asyncio.wait_for(process.wait(), within)
    except TimeoutError:
        pytest.fail(f"python -m bot.mcp still runs {within} s after it was told to stop")


@pytest.mark.slow
@pytest.mark.parametrize(("how", "code"), [("SIGTERM", 143), ("SIGINT", 130), ("EOF", 0)])
async def test_a_stop_while_a_call_waits_aborts_its_question_and_exits(
    how: str, code: int, tmp_path: Path
) -> None:
    async with fake_bot(waiting) as (fake, url), mcp_process(url, tmp_path) as process:
        send(process, "tools/call", 2, name=TOOL_NAME, arguments=SECOND)
        await until(lambda: fake.count("GET"), within=20, what="the long-poll")
        if how == "EOF":
            assert process.stdin is not None
            process.stdin.close()
        else:
            process.send_signal(getattr(signal, how))
        assert await exit_code(process) == code
        assert ("DELETE", "/v1/questions/q1") in fake.requests


@pytest.mark.slow
@pytest.mark.parametrize(("how", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
async def test_an_idle_server_stops_at_once_on_a_signal(
    how: str, code: int, tmp_path: Path
) -> None:
    """Stdin stays open (the host is still there): the signal alone stops it."""
    async with fake_bot(waiting) as (fake, url), mcp_process(url, tmp_path) as process:
        process.send_signal(getattr(signal, how))
        assert await exit_code(process) == code
    assert fake.requests == []
