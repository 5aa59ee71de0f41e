"""The bot's dsh client against the real dsh 0.2 host (``dsh web`` from its wheel).

Through the real parts of ``test_dsh_client`` (the Slack stand-in, a bolt app, the provider),
with the host the real one: a question, a plan review, an approval allowed and rejected, a
dismissal, a turn aborted, answered in another client, a dropped socket replayed. Each checks
the session log (what the model got) and what the Slack message says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dsh.asks import (
    ANSWERED_ELSEWHERE,
    APPROVAL_GONE_NOTE,
    CANCELLED_IN_HARNESS,
    DELIVERED_NOTE,
    RETRYING_NOTE,
    SETTLED_ELSEWHERE,
    session_label,
)
from adapters.dsh.client import DshHostClient
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.sandbox import SlackStandIn
from bot.questions.service import UserQuestionService
from tests.dsh.test_dsh_client import BOT_TOKEN, SECRET, Rig, eventually, interactive, shown
from tests.dsh_driver import HostDriver
from tests.dsh_model import ask, bash, exit_plan
from tests.dsh_model import call_id as first_call
from tests.dsh_real import RealHost, live_host, real_host

__all__ = ["live_host", "real_host"]  # the fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

COLOR = {
    "id": "color",
    "question": "Which color do you prefer?",
    "options": [{"label": "Blue"}, {"label": "Green"}],
}
TIMEOUT = 40.0


async def posted(rig: Rig, sid: str) -> Any:
    """The message of session ``sid``'s request, once posted (the host is shared)."""
    label = session_label(sid)

    def find() -> Any:
        mine = [m for m in rig.questions() if label in shown(m.blocks)]
        return mine[0] if mine else None

    return await eventually(find, f"the message of {label}", within=20)


async def build_rig(
    url: str, closers: list[Callable[[], Awaitable[None]]], host: object, **options: Any
) -> Rig:
    """The bot's parts (Slack stand-in, bolt app, provider, client) around the host at
    ``url``, connected; ``closers`` gets what stops them."""
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SECRET)
    await slack.start()
    closers.append(slack.stop)
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agent-questions").id
    app = AsyncApp(
        client=AsyncWebClient(token=BOT_TOKEN, base_url=slack.url),
        signing_secret=SECRET,
        process_before_response=True,
    )
    provider = SlackQuestionProvider(app, channel=channel)
    service = UserQuestionService()
    dispose = service.register_provider(provider)

    async def events(request: web.Request) -> web.StreamResponse:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", events)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    closers.append(runner.cleanup)
    slack.interactivity_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"

    async def close_provider() -> None:
        await provider.aclose(grace=2.0)
        dispose()

    closers.append(close_provider)
    client = DshHostClient(url, service, provider=provider, **options)
    await client.start()
    closers.append(client.stop)
    await eventually(lambda: client.state == "connected", "the client to connect", 20)
    return Rig(host, slack, service, provider, client, channel, alice, closers)  # type: ignore[arg-type]


@pytest.fixture
async def bot(live_host: RealHost) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    """Builds the bot's parts around the real host (given the URL the host prints)."""
    closers: list[Callable[[], Awaitable[None]]] = []

    async def build(**options: Any) -> Rig:
        return await build_rig(live_host.launch_url, closers, live_host, **options)

    yield build
    for close in reversed(closers):
        await close()


@pytest.mark.slow
async def test_a_question_answered_in_slack_reaches_the_model(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    assert rig.client.status()["dshProtocol"] == "0.2"
    async with asyncio.timeout(TIMEOUT), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        assert "Which color do you prefer?" in shown(message.blocks)
        await rig.click(message, "Green")
        result = await driver.tool_result(sid, first_call(tag))
        assert json.loads(result["text"]) == {"answers": [{"id": "color", "selected": ["Green"]}]}
        final = await rig.final(message)
        assert "Green" in final and "not used" not in final
        assert rig.posts == 1


@pytest.mark.slow
async def test_an_approval_shows_its_command_and_the_decision_reaches_the_tool(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(bash("cat /etc/hostname"))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        assert "cat /etc/hostname" in shown(message.blocks)
        await rig.click(message, "Reject")
        result = await driver.tool_result(sid, first_call(tag))
        assert result["isError"] and "rejected" in result["text"]
        final = await rig.final(message)
        assert "Rejected" in final and "not used" not in final


@pytest.mark.slow
async def test_a_turn_aborted_closes_the_question(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        await driver.cancel(sid)
        final = await rig.final(message)
        assert CANCELLED_IN_HARNESS in final and ANSWERED_ELSEWHERE not in final


async def test_a_plan_review_approved_in_slack(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(exit_plan("# Plan\n\n- Add a flag."))
        await driver.plan(sid, f"go {tag}")
        message = await posted(rig, sid)
        assert "Add a flag." in shown(message.blocks)
        await rig.click(message, "Approve")
        result = await driver.tool_result(sid, first_call(tag))
        assert "Plan approved" in result["text"]
        assert not interactive(await eventually(lambda: message, "the message"))


@pytest.mark.slow
async def test_a_host_restart_closes_what_it_lost_and_the_bot_comes_back_without_a_new_token(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT * 2), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(bash("cat /etc/hostname"))
        await driver.prompt(sid, f"go {tag}")
        approval = await posted(rig, sid)
        await asyncio.to_thread(live_host.restart)  # a new launch token; the bot keeps the old
        back = asyncio.get_running_loop().time()
        await eventually(lambda: rig.client.state == "connected", "the bot to reconnect", 20)
        print(f"reconnected {asyncio.get_running_loop().time() - back:.2f} s after the host was up")
        gone = await rig.final(approval)
        assert APPROVAL_GONE_NOTE in gone and "question" not in gone.lower()
        # The host asks again after its restart: the bot, still on the old token, shows it.
        sid = await driver.create_session()
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        await rig.click(message, "Blue")
        result = await driver.tool_result(sid, first_call(tag))
        assert json.loads(result["text"]) == {"answers": [{"id": "color", "selected": ["Blue"]}]}


@pytest.mark.slow
async def test_an_answer_given_while_the_host_is_frozen_is_shown_undelivered_then_delivered(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT * 2), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        live_host.freeze()  # SIGSTOP: the host holds its sockets and answers nothing
        try:
            await rig.click(message, "Green")
            # Not a bare "Answered": the message says the harness has not taken it.
            await eventually(lambda: RETRYING_NOTE in shown(message.blocks), "the note", 5)
            await asyncio.sleep(3)
        finally:
            live_host.thaw()
        result = await driver.tool_result(sid, first_call(tag))
        assert json.loads(result["text"]) == {"answers": [{"id": "color", "selected": ["Green"]}]}
        await eventually(lambda: DELIVERED_NOTE in shown(message.blocks), "the delivered note", 15)
        assert "not used" not in shown(message.blocks)


async def test_an_answer_given_as_the_socket_drops_is_sent_again_under_the_new_client_id(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT * 2), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        link = rig.client._link
        old = link.client_id
        assert link._ws is not None
        await link._ws.close()  # the socket drops: its clientId and cookie die with it
        await rig.click(message, "Blue")
        result = await driver.tool_result(sid, first_call(tag))
        assert json.loads(result["text"]) == {"answers": [{"id": "color", "selected": ["Blue"]}]}
        assert link.client_id not in (None, old) and rig.posts == 1
        final = await rig.final(message)
        assert "Blue" in final and "not used" not in final


async def test_an_answer_the_host_lost_in_a_restart_is_not_shown_as_delivered(
    live_host: RealHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot()
    async with asyncio.timeout(TIMEOUT * 2), HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        message = await posted(rig, sid)
        await asyncio.to_thread(live_host.stop)
        await rig.click(message, "Blue")
        await eventually(lambda: RETRYING_NOTE in shown(message.blocks), "the note", 5)
        await asyncio.to_thread(live_host.start)  # the restarted host lost the question
        await eventually(lambda: SETTLED_ELSEWHERE in shown(message.blocks), "the end", 20)
        assert DELIVERED_NOTE not in shown(message.blocks) and rig.client.in_flight == 0
