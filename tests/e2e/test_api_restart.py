"""Questions asked over the HTTP API outlive the bot process (issue 14: ownership follows
the waiter).

Real ``python -m bot`` processes (HTTP mode) against the Slack stand-in, which lives in
this test process and so outlives every bot. An agent asks over the API; the bot is
stopped (SIGTERM) or killed (SIGKILL) and started again with the same settings, on the
default SQLite store and on Redis. The question is still ``pending``, its one Slack message
is still open (never marked "Interrupted", never posted again), a signed click delivered
to the new process answers it, and the agent's long-poll on the new process gets the
answer. Then a rolling restart of two processes sharing Redis with 100 questions pending,
and a reminder due before a restart that is not sent again after it.

Waits are bounded and on conditions; the one sleep lets an orphan sweep run after a kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.sandbox.webapi import SlackStandIn
from tests.bot_process import BotProcess
from tests.e2e.test_multiprocess import eventually, question
from tests.restarts import BOT_TOKEN, HOW, SIGNING_SECRET, slack, stop, top_level
from tests.slack_harness import all_text, interactive_elements

__all__ = ["Agent", "bot", "environment", "slack"]  # slack: the stand-in fixture

API_TOKEN = f"api-{secrets.token_hex(16)}"
PAST_A_SWEEP = 6.0 + 2 * 2.0
"""A killed process's heartbeat lapses (6 s) and the survivor sweeps (every 2 s)."""


class Agent:
    """An agent on the HTTP API of one bot process."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http = http
        self.url = url

    async def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/questions; the question as the bot shows it (201)."""
        async with self.http.post(f"{self.url}/v1/questions", json=body) as response:
            assert response.status == 201, await response.text()
            posted: dict[str, Any] = await response.json()
            return posted

    async def get(self, request_id: str, wait: float = 0) -> dict[str, Any]:
        """GET /v1/questions/{id}?wait=…"""
        url = f"{self.url}/v1/questions/{request_id}"
        async with self.http.get(url, params={"wait": f"{wait:g}"}) as response:
            assert response.status == 200, await response.text()
            seen: dict[str, Any] = await response.json()
            return seen

    async def health(self) -> dict[str, Any]:
        """GET /healthz."""
        async with self.http.get(f"{self.url}/healthz") as response:
            health: dict[str, Any] = await response.json()
            return health


def environment(
    slack: SlackStandIn, channel: str, store: str, tmp_path: Path, **more: str
) -> dict[str, str]:
    """The settings every bot process of a test shares."""
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "BOT_API_TOKEN": API_TOKEN,
        "SHUTDOWN_GRACE": "2",
        "SLACK_RATE_SCALE": "1000",
        **more,
    }
    if store == "sqlite":
        env["STORE_PATH"] = str(tmp_path / "questions.db")
    return env


@contextlib.asynccontextmanager
async def bot(env: dict[str, str], cwd: Path) -> AsyncIterator[tuple[BotProcess, Agent]]:
    """A bot process and an agent on its API."""
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    async with (
        BotProcess.start(env, cwd=cwd) as process,
        aiohttp.ClientSession(headers=headers, connector=aiohttp.TCPConnector(limit=0)) as http,
    ):
        yield process, Agent(http, process.url)


def interrupted_renders(slack: SlackStandIn) -> int:
    """How many ``chat.update`` calls ever showed "Interrupted"."""
    return sum(
        "Interrupted" in all_text(call.params.get("blocks") or [])
        for call in slack.calls("chat.update")
    )


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "redis"])
@HOW
async def test_an_api_question_outlives_a_restart(
    how: signal.Signals,
    store: str,
    slack: SlackStandIn,
    tmp_path: Path,
    redis_url: str,
    store_prefix: str,
) -> None:
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    env = environment(slack, channel, store, tmp_path)
    if store == "redis":
        env.update({"REDIS_URL": redis_url, "REDIS_PREFIX": store_prefix})
    async with asyncio.timeout(90):
        async with bot(env, tmp_path / "a") as (first, agent):
            posted = await agent.ask(question("deploy", "Deploy", "Wait"))
            (message,) = top_level(slack, channel)
            took = await stop(first, how)
        print(f"\n{store}: stopped by {how.name} in {took:.2f} s")
        assert interactive_elements(message.blocks)
        assert "Interrupted" not in all_text(message.blocks)

        began = time.monotonic()
        async with bot(env, tmp_path / "b") as (second, agent):
            print(f"{store}: started again in {time.monotonic() - began:.2f} s")
            slack.interactivity_url = f"{second.url}/slack/events"
            if how == signal.SIGKILL:
                await asyncio.sleep(PAST_A_SWEEP)  # the new bot's orphan sweep has run
            seen = await agent.get(posted["id"])
            assert seen["state"] == "pending"
            assert seen["message"] == posted["message"]
            health = await agent.health()
            assert [health[key] for key in ("pending", "owned", "unowned", "open")] == [1, 0, 1, 1]

            polling = asyncio.ensure_future(agent.get(posted["id"], wait=30))
            await eventually(lambda: second_waits(agent), what="the long-poll")
            status, body = await slack.deliver(slack.click(message, user=alice, text="Deploy"))
            assert status == 200, body
            answered = await asyncio.wait_for(polling, 10)
            assert answered["state"] == "answered"
            assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
            assert answered["answeredBy"] == alice
            await eventually(lambda: not interactive_elements(message.blocks), what="the answer")
            assert "Answered" in all_text(message.blocks)

        assert top_level(slack, channel) == [message]
        assert slack.calls.count("chat.postMessage") == 1
        assert interrupted_renders(slack) == 0
        assert not any("OWNER_LOST" in line for line in second.stderr)


async def second_waits(agent: Agent) -> bool:
    """Whether the bot holds a long-poll now."""
    return bool((await agent.health())["longPolls"] == 1)


@pytest.mark.slow
async def test_a_rolling_restart_of_two_processes_loses_no_question(
    slack: SlackStandIn, tmp_path: Path, redis_url: str, store_prefix: str
) -> None:
    people = [slack.workspace.add_user(f"person{i}").id for i in range(4)]
    channel = slack.workspace.add_channel("agents").id
    env = environment(
        slack, channel, "redis", tmp_path, REDIS_URL=redis_url, REDIS_PREFIX=store_prefix
    )
    count = 100
    async with asyncio.timeout(150), contextlib.AsyncExitStack() as stack:
        a, agent_a = await stack.enter_async_context(bot(env, tmp_path / "a"))
        b, agent_b = await stack.enter_async_context(bot(env, tmp_path / "b"))
        agents = [agent_a, agent_b]
        asked = await asyncio.gather(
            *(agents[i % 2].ask(question(f"q{i}", f"Yes {i}", f"No {i}")) for i in range(count))
        )
        messages = {m.ts: m for m in top_level(slack, channel)}
        assert len(messages) == count

        # A rolling deploy: A is replaced, then B, each while the other serves.
        timings: list[str] = []
        slack.interactivity_url = f"{b.url}/slack/events"
        took = await stop(a, signal.SIGTERM)
        began = time.monotonic()
        a2, agent_a2 = await stack.enter_async_context(bot(env, tmp_path / "a2"))
        timings.append(f"A stopped in {took:.2f} s, A' started in {time.monotonic() - began:.2f} s")
        slack.interactivity_url = f"{a2.url}/slack/events"
        took = await stop(b, signal.SIGTERM)
        began = time.monotonic()
        b2, agent_b2 = await stack.enter_async_context(bot(env, tmp_path / "b2"))
        timings.append(f"B stopped in {took:.2f} s, B' started in {time.monotonic() - began:.2f} s")
        print("\nrolling restart with", count, "pending:", "; ".join(timings))

        new = [agent_a2, agent_b2]
        urls = [f"{a2.url}/slack/events", f"{b2.url}/slack/events"]
        polls = [
            asyncio.ensure_future(new[i % 2].get(posted["id"], wait=60))
            for i, posted in enumerate(asked)
        ]
        began = time.monotonic()
        for i, posted in enumerate(asked):  # each click to the other new process
            slack.interactivity_url = urls[(i + 1) % 2]
            message = messages[posted["message"]["ts"]]
            click = slack.click(message, user=people[i % len(people)], text=f"No {i}")
            status, body = await slack.deliver(click)
            assert status == 200, body
        results = await asyncio.gather(*polls)
        print(f"{count} answered through the new processes in {time.monotonic() - began:.2f} s")
        answered = [r for r in results if r["state"] == "answered"]
        lost = [r for r in results if r["state"] != "answered"]
        assert (len(answered), len(lost)) == (count, 0)
        for i, result in enumerate(results):
            assert result["answer"] == {"answers": [{"id": f"q{i}", "selected": [f"No {i}"]}]}
        posts = slack.calls.count("chat.postMessage")
        assert posts == count, f"{posts - count} posted twice"
        assert interrupted_renders(slack) == 0
        for process in (a, b, a2, b2):
            assert not any("OWNER_LOST" in line for line in process.stderr)


def thread_replies(slack: SlackStandIn, channel: str, ts: str, word: str) -> Callable[[], int]:
    """How many replies in the question's thread contain ``word``, as a check."""

    def count() -> int:
        replies = [m for m in slack.workspace.history(channel) if m.thread_ts == ts]
        return sum(word in m.text for m in replies)

    return count


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_a_reminder_sent_before_a_restart_is_not_sent_again(
    store: str, slack: SlackStandIn, tmp_path: Path, redis_url: str, store_prefix: str
) -> None:
    channel = slack.workspace.add_channel("agents").id
    env = environment(slack, channel, store, tmp_path)
    if store == "redis":
        env.update({"REDIS_URL": redis_url, "REDIS_PREFIX": store_prefix})
    # Reminders 1 s and about 6 s after asking; no answer within 12 s.
    body = {**question("deploy", "Deploy", "Wait"), "timeout": 12, "reminders": [11, 6]}
    body["remind"] = ["U0LEAD01"]  # thread replies (naming nobody, they go top-level)
    async with asyncio.timeout(90):
        async with bot(env, tmp_path / "a") as (first, agent):
            posted = await agent.ask(body)
            reminders = thread_replies(slack, channel, posted["message"]["ts"], "Reminder")
            await eventually(reminders, within=10, what="the first reminder")
            assert await first.stop(signal.SIGTERM) == 0
        assert reminders() == 1

        async with bot(env, tmp_path / "b") as (_, agent):
            seen = await agent.get(posted["id"], wait=30)  # the new bot keeps the deadline
            assert seen["state"] == "failed"
            assert seen["error"]["code"] == "ASK_TIMEOUT"
            assert reminders() == 2  # the second one, and the first not again
    assert slack.calls.count("chat.postMessage") == 3
