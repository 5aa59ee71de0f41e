"""A restarted bot takes up the dsh host's pending question and approval (issue 13).

Real ``python -m bot`` processes (HTTP mode) against the host stand-in and the Slack
stand-in, both in this test process. Bot A posts a question and an approval; A is stopped
(SIGTERM) or killed (SIGKILL); bot B starts with the same settings. The host replays both
with their original eventIds: B attaches to the same records (Redis) or finds the same two
messages by their metadata (the memory store, whose records died with A): no second post,
never failed with OWNER_LOST, and a person's clicks, delivered to B, reach the host.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from adapters.dsh.asks import RESTARTING_NOTE
from adapters.slack.sandbox.webapi import SlackStandIn
from bot.questions.models import AskUserQuestionItem
from tests.bot_process import BotProcess
from tests.dsh.test_dsh_client import eventually
from tests.dsh_mux_host import MuxHost, new_session_id
from tests.restarts import BOT_TOKEN, HOW, SIGNING_SECRET, slack, stop, top_level
from tests.slack_harness import all_text, interactive_elements

__all__ = ["slack"]  # the stand-in fixture

COMMAND = "rm -rf /srv/cache/build-42"
QUESTION = AskUserQuestionItem.model_validate(
    {
        "id": "target",
        "question": "Which one ships first?",
        "options": [{"label": "Code"}, {"label": "Docs"}],
    }
)


@pytest.fixture
async def host() -> AsyncIterator[MuxHost]:
    """The dsh host stand-in."""
    async with MuxHost() as stand_in:
        yield stand_in


@pytest.mark.slow
@pytest.mark.parametrize("store", ["redis", "sqlite", "memory"])
@HOW
async def test_a_restarted_bot_takes_up_the_pending_question_and_approval(
    how: signal.Signals,
    store: str,
    slack: SlackStandIn,
    host: MuxHost,
    tmp_path: Path,
    redis_url: str,
    store_prefix: str,
) -> None:
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "DSH_HOST_URL": host.launch_url,
        "SHUTDOWN_GRACE": "2",
    }
    if store == "redis":
        env.update({"REDIS_URL": redis_url, "REDIS_PREFIX": store_prefix})
    else:
        env.update({"STORE": store, "STORE_PATH": str(tmp_path / "questions.db")})
    async with asyncio.timeout(90):
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        sid = new_session_id()
        async with BotProcess.start(env, cwd=tmp_path / "a") as first:
            await host.wait_for_connections(1, within=20)
            rpc_q, answered = host.ask(sid, [QUESTION])
            rpc_a, _, decided = host.request_approval(
                sid, "bash", {"command": COMMAND, "justification": "clean the build cache"}
            )
            await eventually(lambda: len(top_level(slack, channel)) == 2, "two messages", within=20)
            await stop(first, how)
            if how == signal.SIGTERM:
                for message in top_level(slack, channel):  # left open, saying why
                    assert interactive_elements(message.blocks)
                    assert RESTARTING_NOTE in all_text(message.blocks)
        assert host.is_pending(rpc_q) and host.is_pending(rpc_a)

        async with BotProcess.start(env, cwd=tmp_path / "b") as second:
            slack.interactivity_url = f"{second.url}/slack/events"
            await host.wait_for_total_connections(2, within=20)
            question, approval = sorted(
                top_level(slack, channel), key=lambda m: "Allow once" in all_text(m.blocks)
            )
            await eventually(
                lambda: RESTARTING_NOTE not in all_text(question.blocks + approval.blocks),
                "the restart note to go (the new bot adopted both)",
                within=20,
            )
            await asyncio.sleep(1.0)  # past a heartbeat and an orphan sweep of the new bot
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"{second.url}/healthz") as response,
            ):
                health = await response.json()
            assert (health["dsh"], health["dshQuestions"], health["dshApprovals"]) == (
                "connected",
                1,
                1,
            )
            assert len(top_level(slack, channel)) == 2
            assert len(slack.calls("chat.postMessage")) == 2
            assert interactive_elements(question.blocks) and interactive_elements(approval.blocks)
            assert COMMAND in all_text(approval.blocks)

            status, body = await slack.deliver(slack.click(question, user=alice, text="Docs"))
            assert status == 200, body
            assert (await asyncio.wait_for(answered, 10)).to_wire() == {
                "answers": [{"id": "target", "selected": ["Docs"]}]
            }
            status, body = await slack.deliver(slack.click(approval, user=alice, text="Allow once"))
            assert status == 200, body
            assert await asyncio.wait_for(decided, 10) == "allowed-once"
            assert [r["eventId"] for r in host.responses] == [rpc_q, rpc_a]
            assert host.responses[1]["outcome"] == {"kind": "result", "value": "allowed-once"}
            await eventually(
                lambda: not interactive_elements(approval.blocks), "the record", within=20
            )
            await eventually(
                lambda: not interactive_elements(question.blocks), "the answer", within=20
            )
            assert "Answered" in all_text(question.blocks)
            assert "Allowed once by" in all_text(approval.blocks)
            assert not any(
                "OWNER_LOST" in line or ("owner" in line.lower() and "lost" in line)
                for line in second.stderr
            )
