"""Socket Mode end to end: the bot connects to a local stand-in of Slack's WebSocket endpoint.

The Web API stand-in also answers ``apps.connections.open`` (with the app token) with the
``ws://`` URL of ``SocketModeStandIn``, which says ``hello`` and then sends an
``interactive`` envelope carrying the ``block_actions`` payload of a person's click, as
Slack does; the bot must ack the envelope with its ``envelope_id`` and resolve the question.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.sandbox.webapi import SlackStandIn
from bot.app.runtime import Runtime, start
from bot.settings.config import Settings
from tests.bot_process import BotProcess, fresh_store_path, run_bot_command
from tests.slack_harness import all_text, interactive_elements, until
from tests.socket_mode_standin import SocketModeStandIn

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
APP_TOKEN = f"xapp-1-A0SANDBOX-{secrets.token_hex(8)}"
API_TOKEN = f"api-{secrets.token_hex(16)}"

DEPLOY = {
    "questions": [
        {
            "id": "deploy",
            "question": "Deploy 2.3.1 to production?",
            "options": [{"label": "Deploy"}, {"label": "Wait"}],
        }
    ]
}


@dataclass
class Slack:
    """The Web API stand-in (answering apps.connections.open) and the Socket Mode stand-in."""

    web: SlackStandIn
    socket: SocketModeStandIn
    channel: str
    alice: str


@contextlib.asynccontextmanager
async def slack_with_socket_mode(app_token: str = APP_TOKEN) -> AsyncIterator[Slack]:
    """Both stand-ins, started; ``app_token`` is the one Slack accepts."""
    web = SlackStandIn(token=BOT_TOKEN)
    socket = SocketModeStandIn(app_token=app_token)
    alice = web.workspace.add_user("alice").id
    channel = web.workspace.add_channel("agents").id
    await socket.start()
    socket.install(web)
    await web.start()
    try:
        yield Slack(web, socket, channel, alice)
    finally:
        await socket.stop()
        await web.stop()


def socket_settings(slack: Slack, **overrides: Any) -> Settings:
    """Socket Mode settings pointing at the stand-ins."""
    fields: dict[str, Any] = {
        "mode": "socket",
        "slack_bot_token": BOT_TOKEN,
        "slack_app_token": APP_TOKEN,
        "slack_channel": slack.channel,
        "slack_api_url": slack.web.url,
        "port": 0,
        "bot_api_token": API_TOKEN,
        "shutdown_grace": 2.0,
        "store_path": fresh_store_path(),
        **overrides,
    }
    return Settings(**fields)


@contextlib.asynccontextmanager
async def socket_bot(slack: Slack) -> AsyncIterator[tuple[Runtime, aiohttp.ClientSession]]:
    """The bot in Socket Mode, in process, and a client session on its HTTP API."""
    runtime = await start(socket_settings(slack))
    http = aiohttp.ClientSession(runtime.url, headers={"Authorization": f"Bearer {API_TOKEN}"})
    try:
        yield runtime, http
    finally:
        await http.close()
        await runtime.stop()


@pytest.mark.slow
async def test_an_interaction_arriving_over_the_socket_resolves_the_question() -> None:
    async with slack_with_socket_mode() as slack, socket_bot(slack) as (runtime, http):
        await slack.socket.connected()
        assert slack.socket.opened == 1
        async with http.post("/v1/questions", json=DEPLOY) as response:
            assert response.status == 201
            posted = await response.json()
        message = slack.web.workspace.message(posted["message"]["channel"], posted["message"]["ts"])

        payload = slack.web.click(message, user=slack.alice, text="Deploy")
        envelope_id = await slack.socket.send_interactive(payload)
        ack = await slack.socket.ack(envelope_id)
        assert ack["envelope_id"] == envelope_id

        async with http.get(f"/v1/questions/{posted['id']}", params={"wait": "5"}) as response:
            answered = await response.json()
        assert answered["state"] == "answered"
        assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
        assert answered["answeredBy"] == slack.alice
        current = slack.web.workspace.message
        await until(lambda: not interactive_elements(current(message.channel, message.ts).blocks))
        assert "Answered" in all_text(current(message.channel, message.ts).blocks)
        await until(lambda: runtime.provider.pending_count == 0, what="the ask to end")


@pytest.mark.slow
async def test_a_question_asked_in_process_is_answered_over_the_socket() -> None:
    from bot.questions.models import AskUserQuestionRequest

    async with slack_with_socket_mode() as slack, socket_bot(slack) as (runtime, _):
        await slack.socket.connected()
        request = AskUserQuestionRequest.model_validate(DEPLOY)
        asking = asyncio.ensure_future(runtime.service.ask(request))
        message = await until(
            lambda: next(iter(slack.web.workspace.messages[slack.channel]), None),
            what="the question in Slack",
        )
        payload = slack.web.click(message, user=slack.alice, text="Wait")
        await slack.socket.ack(await slack.socket.send_interactive(payload))
        answer = await asyncio.wait_for(asking, 5)
        assert answer.to_wire() == {"answers": [{"id": "deploy", "selected": ["Wait"]}]}


@pytest.mark.slow
async def test_a_late_click_on_an_answered_question_is_acked_and_changes_nothing() -> None:
    async with slack_with_socket_mode() as slack, socket_bot(slack) as (_, http):
        await slack.socket.connected()
        async with http.post("/v1/questions", json=DEPLOY) as response:
            posted = await response.json()
        where = posted["message"]
        message = slack.web.workspace.message(where["channel"], where["ts"])
        first = slack.web.click(message, user=slack.alice, text="Deploy")
        late = slack.web.click(message, user=slack.alice, text="Wait")  # the same old message
        await slack.socket.ack(await slack.socket.send_interactive(first))
        envelope_id = await slack.socket.send_interactive(late)
        assert (await slack.socket.ack(envelope_id))["envelope_id"] == envelope_id
        async with http.get(f"/v1/questions/{posted['id']}") as response:
            answered = await response.json()
        assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}


async def test_healthz_answers_in_socket_mode_and_slack_events_is_not_served() -> None:
    async with slack_with_socket_mode() as slack, socket_bot(slack) as (_, http):
        await slack.socket.connected()
        async with http.get("/healthz") as response:
            assert response.status == 200
            health = await response.json()
        assert health == {
            "ok": True,
            "mode": "socket",
            "store": "ok",
            "pending": 0,
            "owned": 0,
            "unowned": 0,
            "open": 0,
            "waiters": 0,
            "longPolls": 0,
            "webApiQueue": {},
            "socket": "connected",
        }
        async with http.post("/slack/events", data="payload={}") as response:
            assert response.status in (404, 405)


async def test_stopping_leaves_api_questions_open_and_closes_the_socket() -> None:
    async with slack_with_socket_mode() as slack:
        runtime = await start(socket_settings(slack))
        try:
            await slack.socket.connected()
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with aiohttp.ClientSession(runtime.url, headers=headers) as http:
                async with http.post("/v1/questions", json=DEPLOY) as response:
                    posted = await response.json()
                poll = asyncio.ensure_future(
                    http.get(f"/v1/questions/{posted['id']}", params={"wait": "30"})
                )
                await until(lambda: runtime.provider.pending_count == 2, what="the long-poll")
                await runtime.stop()
                response = await poll
                polled = await response.json()
                response.release()
        finally:
            await runtime.stop()
        # An API question is owned by no process: it stays open for the next start.
        assert polled["state"] == "pending"
        message = slack.web.workspace.message(posted["message"]["channel"], posted["message"]["ts"])
        assert "Interrupted" not in all_text(message.blocks)
        assert interactive_elements(message.blocks)
        await until(lambda: not slack.socket.sockets, what="the socket to close")


async def test_a_refused_app_token_fails_startup_with_slacks_reason() -> None:
    async with slack_with_socket_mode(app_token="xapp-1-the-real-one") as slack:
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(RuntimeError, match=r"SLACK_APP_TOKEN.*invalid_auth"):
            await start(socket_settings(slack))
        assert loop.time() - began < 5
        assert slack.socket.refused == 1 and slack.socket.opened == 0


@pytest.mark.slow
async def test_python_m_bot_in_socket_mode(tmp_path: Path) -> None:
    async with slack_with_socket_mode() as slack:
        env = {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_APP_TOKEN": APP_TOKEN,
            "SLACK_CHANNEL": slack.channel,
            "SLACK_API_URL": slack.web.url,
            "PORT": "0",
            "BOT_API_TOKEN": API_TOKEN,
        }
        async with BotProcess.start(env, cwd=tmp_path) as bot:
            await slack.socket.connected()
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with aiohttp.ClientSession(bot.url, headers=headers) as http:
                async with http.get("/healthz") as response:
                    assert (await response.json())["socket"] == "connected"
                async with http.post("/v1/questions", json=DEPLOY) as response:
                    assert response.status == 201
                    posted = await response.json()
                where = posted["message"]
                message = slack.web.workspace.message(where["channel"], where["ts"])
                payload = slack.web.click(message, user=slack.alice, text="Deploy")
                envelope_id = await slack.socket.send_interactive(payload)
                assert (await slack.socket.ack(envelope_id))["envelope_id"] == envelope_id
                async with http.get(f"/v1/questions/{posted['id']}", params={"wait": "5"}) as r:
                    answered = await r.json()
                assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
            assert await bot.stop(signal.SIGTERM) == 0
        output = bot.output
        assert "mode: socket" in output
        for secret in (BOT_TOKEN, APP_TOKEN, API_TOKEN):
            assert secret not in output


@pytest.mark.slow
async def test_python_m_bot_exits_1_when_slack_refuses_the_app_token(tmp_path: Path) -> None:
    async with slack_with_socket_mode(app_token="xapp-1-the-real-one") as slack:
        env = {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_APP_TOKEN": APP_TOKEN,
            "SLACK_CHANNEL": slack.channel,
            "SLACK_API_URL": slack.web.url,
            "PORT": "0",
        }
        code, out, err = await run_bot_command([], env, cwd=tmp_path, within=15)
    assert code == 1
    assert "Slack refused SLACK_APP_TOKEN" in err and "invalid_auth" in err
    assert "Traceback" not in err
    for secret in (BOT_TOKEN, APP_TOKEN):
        assert secret not in out + err
