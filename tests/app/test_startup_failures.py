"""What ``python -m bot`` says when it cannot start, and how it takes a signal while starting.

Each failure names the setting to change and never echoes a secret: Slack's Web API
answered by something that is not Slack (a ``SLACK_API_URL`` without ``/api/``, a proxy's
error page), a Socket Mode WebSocket that never opens, a ``HOST`` that does not resolve, a
``REDIS_URL`` redis-py cannot use. SIGTERM or SIGINT while the bot starts cancels the start
cleanly (exit 0, as a stop), and stdout closing under the bot still stops it in order.
The sandbox takes ``SLACK_CHANNEL`` as its channel's id and says it ignores
``SLACK_API_URL``.

Everything runs for real: ``python -m bot`` as a subprocess, the project's Slack stand-in,
and small aiohttp or asyncio servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import bot.app.socket_mode
from adapters.slack.sandbox.webapi import SlackStandIn
from bot.app.runtime import start
from bot.settings.config import Settings
from tests.bot_process import BotProcess, clean_environment, run_bot_command
from tests.redis_server import free_port

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
APP_TOKEN = f"xapp-1-A0SANDBOX-{secrets.token_hex(8)}"
SECRETS = (BOT_TOKEN, APP_TOKEN)

DEPLOY = {
    "questions": [
        {"id": "deploy", "question": "Deploy?", "options": [{"label": "Yes"}, {"label": "No"}]}
    ]
}


@contextlib.asynccontextmanager
async def answering(status: int, content_type: str, body: str) -> AsyncIterator[str]:
    """A server that answers every request with ``body``; yields its ``/api/`` URL."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body, content_type=content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/api/"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def hole() -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A TCP server that accepts and never answers (a WebSocket handshake that never ends);
    yields its port and an event set once something connected."""
    held: list[asyncio.StreamWriter] = []
    connected = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        connected.set()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], connected
    finally:
        for writer in held:
            writer.close()
        server.close()


@contextlib.asynccontextmanager
async def slack_handing_out(ws_url: str | None, *, refuse_with: int = 0) -> AsyncIterator[Any]:
    """The Slack stand-in whose ``apps.connections.open`` hands out ``ws_url`` (or answers
    HTTP ``refuse_with`` with a plain-text page); yields (stand-in, channel id)."""
    slack = SlackStandIn(token=BOT_TOKEN)
    channel = slack.workspace.add_channel("agents").id

    @web.middleware
    async def connections_open(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.rstrip("/") != "/api/apps.connections.open":
            response: web.StreamResponse = await handler(request)
            return response
        if refuse_with:
            return web.Response(status=refuse_with, text="Bad Gateway")
        return web.json_response({"ok": True, "url": ws_url})

    slack.app.middlewares.append(connections_open)
    await slack.start()
    try:
        yield slack, channel
    finally:
        await slack.stop()


def socket_env(api_url: str, channel: str = "C0123ABCD") -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": api_url,
        "PORT": "0",
        "STORE": "memory",
    }


def assert_no_secret(*texts: str) -> None:
    for secret in SECRETS:
        for text in texts:
            assert secret not in text


# --- Slack's Web API answered by something else ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (502, "text/html", "<html><body>Bad Gateway</body></html>"),  # a proxy's page
        (404, "text/plain", "404: Not Found"),  # SLACK_API_URL without /api/
        (200, "application/json", "{not json"),  # says JSON, is not
    ],
    ids=["html-502", "text-404", "broken-json"],
)
async def test_auth_test_answered_by_something_not_slack_names_slack_api_url(
    tmp_path: Path, status: int, content_type: str, body: str
) -> None:
    async with answering(status, content_type, body) as api_url:
        code, out, err = await run_bot_command([], socket_env(api_url), cwd=tmp_path, within=30)
    assert code == 1, err
    expected = f"auth.test at SLACK_API_URL={api_url} answered HTTP {status}, not Slack's JSON"
    assert expected in err, err
    assert "check SLACK_API_URL" in err
    assert "refused SLACK_BOT_TOKEN" not in err and "has no attribute" not in err
    assert "Traceback" not in err
    assert_no_secret(out, err)


@pytest.mark.slow
async def test_apps_connections_open_answered_by_a_proxy_page_names_slack_api_url(
    tmp_path: Path,
) -> None:
    async with slack_handing_out(None, refuse_with=502) as (slack, channel):
        env = socket_env(slack.url, channel)
        code, out, err = await run_bot_command([], env, cwd=tmp_path, within=30)
    assert code == 1, err
    expected = (
        f"Socket Mode: apps.connections.open at SLACK_API_URL={slack.url} answered HTTP 502, "
        "not Slack's JSON; check SLACK_API_URL"
    )
    assert expected in err, err
    assert "has no attribute" not in err and "Traceback" not in err
    assert_no_secret(out, err)


# --- a Socket Mode WebSocket that never opens ------------------------------------------------


@pytest.mark.slow
async def test_a_socket_that_never_opens_names_slack_app_token_and_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 30 s in production; the same code path with a 1 s limit.
    monkeypatch.setattr(bot.app.socket_mode, "SOCKET_CONNECT_TIMEOUT", 1.0)
    async with (
        hole() as (port, connected),
        slack_handing_out(f"ws://127.0.0.1:{port}/link") as (
            slack,
            channel,
        ),
    ):
        settings = Settings(
            mode="socket",
            slack_bot_token=BOT_TOKEN,
            slack_app_token=APP_TOKEN,
            slack_channel=channel,
            slack_api_url=slack.url,
            port=0,
            store="memory",
            shutdown_grace=1,
        )
        with pytest.raises(RuntimeError) as raised:
            await asyncio.wait_for(start(settings), 20)
        assert connected.is_set()
    message = str(raised.value)
    assert message.startswith("Socket Mode: the WebSocket")
    assert "SLACK_APP_TOKEN" in message and "did not open within 1 s" in message
    assert_no_secret(message)


# --- HOST and REDIS_URL ----------------------------------------------------------------------


@pytest.mark.slow
async def test_a_host_that_does_not_resolve_names_host(tmp_path: Path) -> None:
    env = {
        "HOST": "no-such-host.invalid",
        "BOT_API_TOKEN": secrets.token_hex(20),
        "PORT": "0",
        "SANDBOX_PORT": "0",
    }
    code, out, err = await run_bot_command([], env, cwd=tmp_path, within=60)
    assert code == 1, err
    assert "HOST: 'no-such-host.invalid' does not resolve to an address" in err, err
    assert "Set HOST to" in err
    assert "Errno" not in err and "Traceback" not in err
    assert "Sandbox ready" not in out


@pytest.mark.slow
async def test_a_secret_pasted_into_host_is_not_echoed_when_it_does_not_resolve(
    tmp_path: Path,
) -> None:
    """The API token pasted into HOST (a 32-hex value passes HOST's checks): the "does not
    resolve" line names HOST without showing it."""
    secret = secrets.token_hex(16)
    env = {"HOST": secret, "BOT_API_TOKEN": secret, "PORT": "0", "SANDBOX_PORT": "0"}
    code, _, err = await run_bot_command([], env, cwd=tmp_path, within=60)
    assert code == 1, err
    assert "HOST:" in err and "does not resolve" in err, err
    assert secret not in err


@pytest.mark.slow
async def test_a_redis_url_option_redis_cannot_use_names_redis_url_not_its_password(
    tmp_path: Path,
) -> None:
    password = f"pw-{secrets.token_hex(8)}"
    port = free_port()
    env = {
        "REDIS_URL": f"redis://:{password}@127.0.0.1:{port}/0?socket_timeout=abc",
        "MODE": "sandbox",
        "PORT": "0",
        "SANDBOX_PORT": "0",
    }
    code, out, err = await run_bot_command([], env, cwd=tmp_path, within=30)
    assert code == 1, err
    # (the password masked, then the whole userinfo redacted by the exit message)
    assert f"@127.0.0.1:{port}/0?… is not a usable Redis URL" in err, err
    assert "python -m bot: REDIS_URL=redis://" in err
    assert "socket_timeout" in err
    assert password not in out + err
    assert "Traceback" not in err


# --- signals while starting ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_while_the_socket_connects_cancels_the_start_cleanly(
    tmp_path: Path, signum: signal.Signals
) -> None:
    async with (
        hole() as (port, connected),
        slack_handing_out(f"ws://127.0.0.1:{port}/link") as (
            slack,
            channel,
        ),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            env=clean_environment({**socket_env(slack.url, channel), "SHUTDOWN_GRACE": "2"}),
            cwd=tmp_path,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            # The bot waits for the WebSocket handshake (up to 30 s): the signal comes now.
            await asyncio.wait_for(connected.wait(), 20)
            proc.send_signal(signum)
            out, err = await asyncio.wait_for(proc.communicate(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text
    assert f"{signum.name} during startup: stopping" in text
    assert "stopped during startup" in text
    assert "bot listening on" not in out.decode()
    assert "Traceback" not in text
    assert_no_secret(text)


@pytest.mark.slow
async def test_stdout_closing_under_the_bot_still_stops_it_in_order(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `python -m bot | true`: nobody reads what it prints
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            env=clean_environment({"PORT": "0", "SANDBOX_PORT": "0"}),
            cwd=tmp_path,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = err.decode(errors="replace")
    assert "Broken pipe" in text
    lines = text.splitlines()
    assert any(line.endswith(" shutting down pending=0") for line in lines), text
    assert any(line.endswith(" INFO bot stopped") for line in lines), text
    assert proc.returncode == 1, text  # not 120: the exit's flush of stdout is not an error
    assert "Exception ignored" not in text


# --- the sandbox and the Slack settings ------------------------------------------------------


@pytest.mark.slow
async def test_the_sandbox_uses_slack_channel_and_says_it_ignores_slack_api_url(
    tmp_path: Path,
) -> None:
    channel = "C0123ABCD"
    ignored = f"http://127.0.0.1:{free_port()}/api/"
    env = {"SLACK_CHANNEL": channel, "SLACK_API_URL": ignored, "PORT": "0", "SANDBOX_PORT": "0"}
    async with BotProcess.start(env, cwd=tmp_path) as bot_process:
        page = next(
            line.split("open ", 1)[1].strip()
            for line in bot_process.stdout
            if "Sandbox ready: open " in line
        )
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{bot_process.url}/v1/questions", json=DEPLOY) as response:
                body = await response.text()
                assert response.status == 201, body
                posted = await response.json()
            assert posted["message"]["channel"] == channel
            async with http.get(f"{page}sandbox/state", params={"user": "alice"}) as response:
                state = await response.json()
        assert state["default_channel"] == channel
        assert any(m["channel"] == channel for m in state["messages"])
        assert await bot_process.stop(signal.SIGTERM) == 0
    output = bot_process.output
    assert f"channel: {channel}" in output
    assert f"slack api: SLACK_API_URL={ignored} is ignored in sandbox mode" in output
    assert f"slack api: {ignored}\n" not in output + "\n"
    assert "channel_not_found" not in output
