"""An API question whose process stopped or died before its message was posted is posted
once by a live process (issue 14).

Real ``python -m bot`` processes against the Slack stand-in (in this test process, so it
outlives every bot). The bot posts within a slowed-down rate limit (``SLACK_RATE_SCALE``:
a post every half second in the channel), so when eight questions are asked at once most
of their posts wait in the scheduler's queue; the bot is stopped (SIGTERM) or killed
(SIGKILL) with posts still queued. With SIGKILL the first post is also stored by Slack
at once but answered only much later (``slow_stored``), so the killed bot never learns its
message. A new bot on the same store takes the unposted questions up: it finds the stored
one by its metadata and adopts it, and posts the others. Every question then has exactly
one message, a click answers it, and the agent's long-poll on the new bot returns.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.sandbox.webapi import SlackStandIn
from tests.e2e.test_api_restart import Agent, bot, environment
from tests.e2e.test_multiprocess import eventually, question
from tests.restarts import HOW, slack, stop, top_level
from tests.slack_harness import interactive_elements

__all__ = ["slack"]  # the stand-in fixture

pytestmark = pytest.mark.timeout(120)

COUNT = 8


async def post_keyed(agent: Agent, i: int) -> tuple[int, dict[str, Any]]:
    """POST question ``i`` with its Idempotency-Key; (status, body), or (0, {}) if the bot
    went away before answering."""
    headers = {"Idempotency-Key": f"repost-{i}"}
    try:
        async with agent.http.post(
            f"{agent.url}/v1/questions", json=question(f"q{i}", f"Yes {i}"), headers=headers
        ) as response:
            return response.status, await response.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError):
        return 0, {}


def request_of(message: Any) -> str:
    """The request id a question message's metadata names."""
    request_id: str = message.metadata["event_payload"]["request_id"]
    return request_id


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "redis"])
@HOW
async def test_questions_not_posted_when_the_bot_stopped_are_posted_once_after(
    how: signal.Signals,
    store: str,
    slack: SlackStandIn,
    tmp_path: Path,
    redis_url: str,
    store_prefix: str,
) -> None:
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    env = environment(slack, channel, store, tmp_path, SLACK_RATE_SCALE="2")
    if store == "redis":
        env.update({"REDIS_URL": redis_url, "REDIS_PREFIX": store_prefix})
    if how == signal.SIGKILL:  # stored by Slack, but the bot never hears back
        slack.faults.add(method="chat.postMessage", kind="slow_stored", delay=60)
    async with asyncio.timeout(100):
        async with bot(env, tmp_path / "a") as (first, agent):
            posting = [asyncio.ensure_future(post_keyed(agent, i)) for i in range(COUNT)]
            await eventually(lambda: len(top_level(slack, channel)) >= 2, what="2 posts")
            await stop(first, how)
            answered = await asyncio.gather(*posting)
        if how == signal.SIGTERM:  # each POST answered: posted (201), or to be posted (202)
            assert {status for status, _ in answered} <= {201, 202}, answered
            assert 202 in {status for status, _ in answered}
        before = len(top_level(slack, channel))
        print(f"\n{store}, {how.name}: {before} of {COUNT} posted before the stop")
        assert before < COUNT  # posts were still waiting their turn

        async with bot(env, tmp_path / "b") as (second, agent):
            slack.interactivity_url = f"{second.url}/slack/events"
            asked = [await post_keyed(agent, i) for i in range(COUNT)]  # the agent retries
            assert all(status == 200 for status, _ in asked), asked
            ids = [body["id"] for _, body in asked]
            if how == signal.SIGTERM:
                assert [body["id"] for _, body in answered] == ids
            await eventually(
                lambda: len(top_level(slack, channel)) == COUNT, within=40, what="every post"
            )
            messages = {request_of(m): m for m in top_level(slack, channel)}
            assert sorted(messages) == sorted(ids)  # one message each, none twice
            polls = [asyncio.ensure_future(agent.get(rid, wait=60)) for rid in ids]
            for i, rid in enumerate(ids):
                await eventually(
                    lambda rid=rid: interactive_elements(messages[rid].blocks), what="buttons"
                )
                click = slack.click(messages[rid], user=alice, text=f"Yes {i}")
                status, body = await slack.deliver(click)
                assert status == 200, body
            results = await asyncio.gather(*polls)
            assert [r["state"] for r in results] == ["answered"] * COUNT
            for i, result in enumerate(results):
                assert result["answer"] == {"answers": [{"id": f"q{i}", "selected": [f"Yes {i}"]}]}
                assert result["message"]["ts"] == messages[ids[i]].ts

        assert len(top_level(slack, channel)) == COUNT
        # None posted twice (the call the killed bot never heard back from is not logged).
        unheard = 1 if how == signal.SIGKILL else 0
        assert slack.calls.count("chat.postMessage") == COUNT - unheard  # the stored one
        # was adopted (found by its metadata), not posted again
        for process in (first, second):
            assert not any("OWNER_LOST" in line for line in process.stderr)
