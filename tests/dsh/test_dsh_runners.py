"""How a host request ends when Slack cannot take it further, and a host that never answers.

- A question timed out in Slack (``QUESTION_TIMEOUT``) is dismissed in the host: the host
  has no timeout of its own (dsh-user-questions.md §6.1), so a question only the bot's
  deadline ended would stay pending there, the agent's turn blocked with nothing open.
- A host that takes the TCP connection and never answers the WebSocket upgrade is given
  up on after ``HANDSHAKE_TIMEOUT`` and tried again with backoff, as any failed connection.

Host stand-in (or a silent TCP server) + Slack stand-in + a real bolt app + signed clicks.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dsh import client as downlink
from adapters.dsh.client import DshHostClient
from adapters.slack.provider import SlackQuestionProvider
from bot.questions.errors import ASK_CANCELLED
from bot.questions.service import UserQuestionService
from tests.dsh import test_dsh_client as _rig_module
from tests.dsh.test_dsh_client import (
    SESSION_A,
    TARGET,
    TIMEOUT,
    Rig,
    cancelled,
    eventually,
    failure_of,
)
from tests.dsh_mux_host import MuxHost

make_rig = _rig_module.make_rig  # the fixtures of the client's end-to-end tests
rig = _rig_module.rig

BASH = {
    "command": "rm -rf /srv/cache",
    "sandbox_permissions": "danger-full-access",
    "justification": "Clear the build cache outside the workspace.",
}


# --------------------------------------------------------------------------- questions


@pytest.mark.slow
async def test_a_question_timed_out_in_slack_is_dismissed_in_the_host(rig: Rig) -> None:
    rig.provider.defaults.timeout = 1.0  # what QUESTION_TIMEOUT=1 configures
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        assert await failure_of(future) == ASK_CANCELLED
        assert rig.host.responses == [cancelled(rpc_id)]
        assert not rig.host.is_pending(rpc_id)
        text = await rig.final(message)
        assert "Timed out" in text
        assert rig.posts == 1
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")


# --------------------------------------------------------------------------- handshake


@pytest.mark.slow
async def test_a_silent_handshake_is_given_up_and_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(downlink, "HANDSHAKE_TIMEOUT", 0.3, raising=False)
    attempts: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        attempts.append(writer)  # takes the connection, never answers the upgrade

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = AsyncApp(
        client=AsyncWebClient(token="xoxb-test", base_url="http://127.0.0.1:9/"),
        signing_secret="dsh-runners-test-secret",
    )
    provider = SlackQuestionProvider(app, channel="C0QUESTIONS")
    client = DshHostClient(
        f"http://127.0.0.1:{port}",
        UserQuestionService(),
        provider=provider,
        backoff_initial=0.05,
        backoff_max=0.2,
        heartbeat=None,
    )
    host = MuxHost(token=None)
    try:
        with caplog.at_level(logging.WARNING, logger="adapters.dsh"):
            await client.start()
            await eventually(lambda: len(attempts) >= 2, "a second attempt", within=3.0)
        assert client.state == "disconnected"
        warned = [r for r in caplog.records if "cannot connect" in r.getMessage()]
        assert len(warned) == 1 and "did not answer" in str(getattr(warned[0], "reason", ""))

        # The host answers on the same port at last: the loop, not stuck, connects.
        server.close()
        for writer in attempts:
            writer.close()
        await server.wait_closed()
        await host.start(port)
        await host.wait_for_connections(1)
        await eventually(lambda: client.state == "connected", "the downlink to connect")
    finally:
        await client.stop()
        await host.stop()
        await provider.aclose(grace=1.0)
        server.close()


@pytest.mark.slow
async def test_the_handshake_bound_does_not_cut_an_open_downlink(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(downlink, "HANDSHAKE_TIMEOUT", 0.2, raising=False)
    async with MuxHost(token=None) as host:
        app = AsyncApp(
            client=AsyncWebClient(token="xoxb-test", base_url="http://127.0.0.1:9/"),
            signing_secret="dsh-runners-test-secret",
        )
        provider = SlackQuestionProvider(app, channel="C0QUESTIONS")
        client = DshHostClient(
            host.base_url,
            UserQuestionService(),
            provider=provider,
            backoff_initial=0.05,
            backoff_max=0.2,
            heartbeat=None,
        )
        await client.start()
        try:
            await host.wait_for_connections(1)
            await asyncio.sleep(1.0)  # five handshake bounds
            assert client.state == "connected"
            assert host.total_connections == 1
        finally:
            await client.stop()
            await provider.aclose(grace=1.0)
