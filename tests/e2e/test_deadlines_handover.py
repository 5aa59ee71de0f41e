"""An API question's deadlines outlive the process that asked it, with no restart.

Two bots share one store (one SQLite file, or one Redis prefix). Both run before the
question is asked; bot A gets ``POST /v1/questions`` with a short timeout, a reminder and an
escalation, and then stops (SIGTERM: a scale-down, nothing replaces it). The question is
owned by no process, so bot B, which was already running, keeps its deadlines: the
reminder and the escalation go out once each, and at the deadline the question fails
``ASK_TIMEOUT`` and its message says "Timed out". The same when A is killed (SIGKILL: a
real ``python -m bot``). With both bots running, both keep them, and still each reply goes
out once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.asks import deadlines
from adapters.slack.sandbox.records import Message
from bot.app.runtime import Runtime
from tests.api.test_gateway import (
    API_TOKEN,
    BOT_TOKEN,
    DEPLOY,
    SIGNING_SECRET,
    Bed,
    another_bot,
    running,
)
from tests.bot_process import BotProcess
from tests.e2e.test_multiprocess import eventually
from tests.slack_harness import all_text, interactive_elements

pytestmark = pytest.mark.timeout(90)

TIMEOUT = 6.0
"""The question's timeout (seconds): its reminder 2 s before, its escalation 4.5 s after."""
GRACE = 1.0
"""How long past the deadline bot B waits for the asking process to end the question
(``deadlines.FOLLOW_GRACE``, 30 s in a bot): shortened so a test takes seconds."""


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadlines, "FOLLOW_GRACE", GRACE)


@pytest.fixture(params=["sqlite", "redis"])
def shared(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings that make two bots share one store (SQLite: ``running``'s fresh file)."""
    if request.param == "sqlite":
        return {}
    return {
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_prefix": request.getfixturevalue("store_prefix"),
    }


@asynccontextmanager
async def two_bots(shared: dict[str, Any]) -> AsyncIterator[tuple[Bed, Runtime, Any]]:
    """Bot A (its bed) and bot B (and an agent's session with B), both running."""
    async with running(**shared) as first, another_bot(first) as (second, agent):
        yield first, second, agent


def with_deadlines(bed: Bed) -> dict[str, Any]:
    """A question with a timeout, a reminder and an escalation (to Alice)."""
    return {
        **DEPLOY,
        "timeout": TIMEOUT,
        "reminders": [2.0],
        "remind": [bed.alice],  # a thread reply (with nobody named it is a top-level message)
        "escalateAfter": 4.5,
        "escalateTo": bed.alice,
    }


async def ask_with_deadlines(bed: Bed) -> dict[str, Any]:
    """Ask A a question ``with_deadlines``; the question once it is in Slack."""
    status, posted = await bed.ask(with_deadlines(bed))
    assert status == 201, posted
    return await in_slack(bed, posted["id"])


async def in_slack(bed: Bed, request_id: str) -> dict[str, Any]:
    """The question (as ``bed``'s bot shows it) once its message is in Slack."""
    return dict(
        await eventually(lambda: _placed(bed, request_id), within=10, what="the question in Slack")
    )


async def _placed(bed: Bed, request_id: str) -> dict[str, Any] | None:
    _, got = await bed.get(request_id)
    return got if got.get("message") else None


def replies(bed: Bed, question: dict[str, Any]) -> list[Message]:
    """The thread replies under the question's message."""
    where = question["message"]
    found = bed.slack.workspace.messages.get(where["channel"], [])
    return [m for m in found if m.thread_ts == where["ts"] and m.ts != where["ts"]]


async def timed_out_at(agent: aiohttp.ClientSession, request_id: str) -> dict[str, Any]:
    """Long-poll the question on bot B until it ends; what B answers then."""
    while True:
        async with agent.get(f"/v1/questions/{request_id}", params={"wait": "30"}) as response:
            assert response.status == 200
            got: dict[str, Any] = await response.json()
        if got["state"] != "pending":
            return got


async def check_kept(bed: Bed, agent: aiohttp.ClientSession, question: dict[str, Any]) -> None:
    """The question timed out within its timeout and a few seconds, its message closed,
    its reminder and escalation sent once each."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    ended = await asyncio.wait_for(timed_out_at(agent, question["id"]), TIMEOUT + GRACE + 10)
    assert (ended["state"], ended["error"]["code"]) == ("failed", "ASK_TIMEOUT")
    assert loop.time() - began < TIMEOUT + GRACE + 6
    await eventually(
        lambda: not interactive_elements(bed.message(question).blocks), what="message closed"
    )
    assert "Timed out" in all_text(bed.message(question).blocks)
    await asyncio.sleep(1)  # a second keeper's late reply would show by now
    texts = [m.text for m in replies(bed, question)]
    assert sum("Reminder" in text for text in texts) == 1, texts
    assert sum("can you help" in text for text in texts) == 1, texts


@pytest.mark.slow
async def test_a_running_bot_keeps_the_deadlines_of_a_question_a_stopped_bot_asked(
    shared: dict[str, Any],
) -> None:
    async with two_bots(shared) as (first, _, agent):
        question = await ask_with_deadlines(first)
        await first.stop()  # graceful, and not replaced
        await check_kept(first, agent, question)


@pytest.mark.slow
async def test_two_running_bots_keeping_one_question_send_each_reply_once(
    shared: dict[str, Any],
) -> None:
    async with two_bots(shared) as (first, _, agent):
        question = await ask_with_deadlines(first)
        await check_kept(first, agent, question)


@pytest.mark.slow
async def test_a_running_bot_keeps_the_deadlines_of_a_question_a_killed_bot_asked(
    shared: dict[str, Any], tmp_path: Path
) -> None:
    """Bot A is a real ``python -m bot`` on B's store and Slack, killed (SIGKILL) once its
    question is in Slack: B keeps the deadlines all the same."""
    async with running(**shared) as second:
        settings = second.runtime.settings
        env = {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_CHANNEL": second.channel,
            "SLACK_API_URL": second.slack.url,
            "PORT": "0",
            "BOT_API_TOKEN": API_TOKEN,
            **(
                {"REDIS_URL": shared["redis_url"], "REDIS_PREFIX": shared["redis_prefix"]}
                if shared
                else {"STORE_PATH": str(settings.store_path)}
            ),
        }
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        async with (
            BotProcess.start(env, cwd=tmp_path) as first,
            aiohttp.ClientSession(first.url, headers=headers) as asker,
        ):
            async with asker.post("/v1/questions", json=with_deadlines(second)) as response:
                assert response.status == 201, await response.text()
                posted = await response.json()
            question = await in_slack(second, posted["id"])
            await first.kill()
        await check_kept(second, second.http, question)
