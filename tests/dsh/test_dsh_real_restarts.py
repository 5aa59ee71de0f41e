"""``python -m bot`` processes restarted beside the real dsh host (0.2), with SQLite and Redis.

Bot A posts a question and an approval of the real host; A is stopped (SIGTERM) or killed
(SIGKILL); bot B starts with the same settings (``DSH_HOST_URL`` = the URL the host printed).
The host replays both (same ``eventId``): B attaches to the same two messages, no second
post, and a person's clicks, delivered to B, reach the host's session log. A message deleted
while no bot ran is posted again by B, so the agent is not left waiting.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.webapi import SlackStandIn
from tests.bot_process import BotProcess
from tests.dsh.test_dsh_client import eventually
from tests.dsh_driver import HostDriver
from tests.dsh_model import Step, ask, bash, call_id
from tests.dsh_real import RealHost, live_host, real_host
from tests.restarts import BOT_TOKEN, HOW, SIGNING_SECRET, slack, stop, top_level
from tests.slack_harness import all_text, interactive_elements

__all__ = ["live_host", "real_host", "slack"]  # the fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

TARGET = {
    "id": "target",
    "question": "Which one ships first?",
    "options": [{"label": "Code"}, {"label": "Docs"}],
}
COMMAND = "echo cleaned-build-42"


@dataclass
class Setup:
    """Alice, the channel, and the settings both bots run with (``a`` and ``b``: their cwd)."""

    alice: str
    channel: str
    env: dict[str, str]
    a: Path
    b: Path


@pytest.fixture(params=["sqlite", "redis"])
def setup(
    request: pytest.FixtureRequest,
    slack: SlackStandIn,
    live_host: RealHost,
    tmp_path: Path,
    redis_url: str,
    store_prefix: str,
) -> Setup:
    """The bot's settings: the Slack stand-in, the real host's launch URL, SQLite or Redis."""
    stores = {"REDIS_URL": redis_url, "REDIS_PREFIX": store_prefix}
    if request.param == "sqlite":
        stores = {"STORE": "sqlite", "STORE_PATH": str(tmp_path / "questions.db")}
    channel = slack.workspace.add_channel("agents").id
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "DSH_HOST_URL": live_host.launch_url,
        "SHUTDOWN_GRACE": "2",
        **stores,
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    alice = slack.workspace.add_user("alice").id
    return Setup(alice, channel, env, tmp_path / "a", tmp_path / "b")


async def start_turn(driver: HostDriver, host: RealHost, *steps: Step) -> tuple[str, str]:
    """A new session whose turn runs ``steps``: its id and its first tool call's id."""
    sid = await driver.create_session()
    await driver.follow(sid)
    tag = host.model.script(*steps)
    await driver.prompt(sid, f"go {tag}")
    return sid, call_id(tag)


async def click_when_open(slack: SlackStandIn, message: Message, user: str, text: str) -> None:
    """``user`` clicks ``text`` once the message takes clicks (the new bot adopted it)."""
    await eventually(lambda: interactive_elements(message.blocks), "the message to open", 30)
    status, body = await slack.deliver(slack.click(message, user=user, text=text))
    assert status == 200, body


@HOW
async def test_a_restarted_bot_takes_up_the_pending_question_and_approval(
    how: signal.Signals, setup: Setup, slack: SlackStandIn, live_host: RealHost
) -> None:
    alice, channel, env = setup.alice, setup.channel, setup.env
    async with HostDriver(live_host) as driver:
        async with BotProcess.start(env, cwd=setup.a) as first:
            slack.interactivity_url = f"{first.url}/slack/events"
            asked, question_call = await start_turn(driver, live_host, ask(TARGET))
            gated, bash_call = await start_turn(driver, live_host, bash(COMMAND))
            await eventually(lambda: len(top_level(slack, channel)) == 2, "two messages", 30)
            await stop(first, how)

        async with BotProcess.start(env, cwd=setup.b) as second:
            slack.interactivity_url = f"{second.url}/slack/events"
            question, approval = sorted(
                top_level(slack, channel), key=lambda m: "Allow once" in all_text(m.blocks)
            )
            assert COMMAND in all_text(approval.blocks)
            for message, text in ((question, "Docs"), (approval, "Allow once")):
                await click_when_open(slack, message, alice, text)
            answered = await driver.tool_result(asked, question_call, within=30)
            assert json.loads(answered["text"]) == {
                "answers": [{"id": "target", "selected": ["Docs"]}]
            }
            ran = await driver.tool_result(gated, bash_call, within=30)
            assert ran["text"] == "cleaned-build-42\n"
            await eventually(lambda: not interactive_elements(approval.blocks), "closed", 20)
            await eventually(lambda: not interactive_elements(question.blocks), "closed", 20)
            assert "not used" not in all_text(question.blocks + approval.blocks)
            assert len(slack.calls("chat.postMessage")) == 2


@pytest.mark.parametrize(
    ("setup", "how"),
    [
        ("sqlite", signal.SIGTERM),
        ("sqlite", signal.SIGKILL),
        ("redis", signal.SIGTERM),
        ("redis", signal.SIGKILL),
    ],
    ids=["sqlite-sigterm", "sqlite-sigkill", "redis-sigterm", "redis-sigkill"],
    indirect=["setup"],
)
async def test_a_message_deleted_while_the_bot_was_down_is_posted_again(
    how: signal.Signals, setup: Setup, slack: SlackStandIn, live_host: RealHost
) -> None:
    alice, channel, env = setup.alice, setup.channel, setup.env
    async with HostDriver(live_host) as driver:
        async with BotProcess.start(env, cwd=setup.a) as first:
            asked, call = await start_turn(driver, live_host, ask(TARGET))
            await eventually(lambda: len(top_level(slack, channel)) == 1, "the question", 30)
            await stop(first, how)
        (gone,) = top_level(slack, channel)
        slack.workspace.delete(gone)

        async with BotProcess.start(env, cwd=setup.b) as second:
            slack.interactivity_url = f"{second.url}/slack/events"
            (again,) = await eventually(
                lambda: (
                    [m for m in top_level(slack, channel) if interactive_elements(m.blocks)] or None
                ),
                "the question posted again",
                30,
            )
            await click_when_open(slack, again, alice, "Code")
            answered = await driver.tool_result(asked, call, within=30)
            assert json.loads(answered["text"]) == {
                "answers": [{"id": "target", "selected": ["Code"]}]
            }
