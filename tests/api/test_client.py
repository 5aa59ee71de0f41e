"""The Python client for agents (``bot.client``) against a real ``python -m bot``.

The bot runs as a process on a fixed port (so ``BOT_URL`` stays the same across a restart)
against the Slack stand-in in this process; ``BOT_URL`` and ``BOT_API_TOKEN`` come from the
environment as an agent's would. A restart in the middle of a wait (SIGTERM and SIGKILL)
is waited out and the answer given after it is returned.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import pytest

from adapters.slack.sandbox.webapi import SlackStandIn
from bot.client import INVALID_REQUEST, ask, ask_sync
from bot.questions import AskUserQuestionAnswer, AskUserQuestionItem, UserQuestionError
from tests.api.test_gateway import API_TOKEN as BED_TOKEN
from tests.api.test_gateway import running
from tests.e2e.test_api_restart import API_TOKEN, bot, environment
from tests.restarts import HOW, slack, stop, top_level
from tests.slack_harness import until

__all__ = ["slack"]

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

DEPLOY = [
    {
        "id": "deploy",
        "question": "Deploy 2.3.1 to production?",
        "options": [{"label": "Deploy"}, {"label": "Wait"}],
    }
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch) -> int:
    """A fixed port for the bot, and BOT_URL / BOT_API_TOKEN pointing the client at it."""
    port = free_port()
    monkeypatch.setenv("BOT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("BOT_API_TOKEN", API_TOKEN)
    return port


@HOW
async def test_ask_waits_out_a_restart_and_returns_the_answer(
    how: signal.Signals, slack: SlackStandIn, tmp_path: Path, agent_env: int
) -> None:
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    env = environment(slack, channel, "sqlite", tmp_path, PORT=str(agent_env))
    async with bot(env, tmp_path / "a") as (first, _):
        asking = asyncio.ensure_future(ask(DEPLOY, label="release bot", poll=5))
        await until(lambda: top_level(slack, channel), within=20, what="the question")
        await stop(first, how)
    assert not asking.done()
    async with bot(env, tmp_path / "b") as (second, _):
        slack.interactivity_url = f"{second.url}/slack/events"
        (message,) = top_level(slack, channel)
        status, _ = await slack.deliver(slack.click(message, user=alice, text="Deploy"))
        assert status == 200
        answer = await asyncio.wait_for(asking, 30)
    assert isinstance(answer, AskUserQuestionAnswer)
    assert answer.to_wire() == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
    assert slack.calls.count("chat.postMessage") == 1


async def test_an_ended_question_raises_the_seams_error_and_ask_sync_works(
    slack: SlackStandIn, tmp_path: Path, agent_env: int
) -> None:
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    env = environment(slack, channel, "sqlite", tmp_path, PORT=str(agent_env))
    async with bot(env, tmp_path / "a") as (process, _):
        slack.interactivity_url = f"{process.url}/slack/events"
        item = AskUserQuestionItem.model_validate(DEPLOY[0])
        asking = asyncio.ensure_future(asyncio.to_thread(ask_sync, [item], timeout=1))
        with pytest.raises(UserQuestionError) as ended:
            await asyncio.wait_for(asking, 30)
        assert ended.value.code == "ASK_TIMEOUT"

        asking = asyncio.ensure_future(ask(DEPLOY, key="deploy-2.3.1"))
        await until(lambda: len(top_level(slack, channel)) == 2, within=20, what="the post")
        again = asyncio.ensure_future(ask(DEPLOY, key="deploy-2.3.1"))  # the same question
        await asyncio.sleep(0.5)
        status, _ = await slack.deliver(
            slack.click(top_level(slack, channel)[1], user=alice, text="Wait")
        )
        assert status == 200
        first, second = await asyncio.wait_for(asyncio.gather(asking, again), 20)
        assert first == second and first.answers[0].selected == ["Wait"]
        assert len(top_level(slack, channel)) == 2


async def test_a_request_the_bot_would_refuse_is_refused_before_it_is_sent() -> None:
    with pytest.raises(UserQuestionError) as refused:
        await ask([{**DEPLOY[0], "multi_select": True}], url="http://127.0.0.1:9")
    assert refused.value.code == INVALID_REQUEST and "multi_select" in refused.value.message
    with pytest.raises(UserQuestionError) as unreachable:
        await ask(DEPLOY, url="http://127.0.0.1:9", reconnect_for=0.5)
    assert unreachable.value.code == "BOT_UNREACHABLE"


async def test_a_long_poll_over_the_tokens_cap_is_asked_again_when_it_says() -> None:
    """With one long-poll per token, the second ``ask`` gets 429 TOO_MANY_WAITS and waits
    its ``retryAfter`` instead of failing; both answers come back."""
    async with running(max_polls_per_token=1) as bed:
        url = bed.runtime.url
        first = asyncio.ensure_future(ask(DEPLOY, url=url, token=BED_TOKEN, key="one"))
        second = asyncio.ensure_future(ask(DEPLOY, url=url, token=BED_TOKEN, key="two"))
        await until(lambda: len(bed.messages()) == 2, within=20, what="both questions")
        refusals = bed.runtime.gateway.refusals.counts
        # Click only once a long-poll was refused: a click before the second long-poll began
        # would end its question first, and a poll of an ended question is never refused.
        await until(lambda: refusals.get("too_many_waits", 0) >= 1, within=20, what="a 429")
        for message in bed.messages():
            await bed.click({"message": {"channel": message.channel, "ts": message.ts}}, "Wait")
        answers = await asyncio.wait_for(asyncio.gather(first, second), 30)
    assert [a.answers[0].selected for a in answers] == [["Wait"], ["Wait"]]


async def test_cancelling_ask_aborts_its_question() -> None:
    """A cancelled ``ask`` aborts its question (nobody waits for its answer) before the
    cancellation goes on."""
    async with running() as bed:
        url = bed.runtime.url
        asking = asyncio.ensure_future(ask(DEPLOY, url=url, token=BED_TOKEN, key="gone"))
        await until(lambda: bed.runtime.gateway.polls.count == 1, within=20, what="a long-poll")
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
        provider = bed.runtime.provider
        question = await provider.status(provider.request_id_for("api:gone"))
    assert question is not None and question.state == "aborted"


async def test_a_url_with_credentials_and_a_token_is_refused_before_any_request() -> None:
    """Both would be the request's Authorization (aiohttp would refuse each request)."""
    with pytest.raises(ValueError, match="user:password@ cannot be used with an API token"):
        await ask(DEPLOY, url="http://user:secret@127.0.0.1:9", token="t", reconnect_for=0.5)
