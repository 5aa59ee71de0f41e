"""100 agents long-poll over HTTP while 70 earlier questions still wait to be posted.

Each agent does what the README's HTTP example says: POST its question (201, or 202 while
its post waits its turn), then ``GET ?wait=`` again while the state is one the README says
to repeat on; a person answers every message as it appears. Every agent gets its answer:
a long-poll that ends while the question's post still waits says ``queued``, and an agent
that stopped there (the README said to repeat on ``pending`` only) never got it.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

import bot.api.gateway
from tests.api.test_gateway import DEPLOY, Bed, running

pytestmark = [pytest.mark.slow, pytest.mark.timeout(170)]

SCALE = 20.0
"""Slack's limits 20 times faster: a post to the channel every 51 ms, so the 170 posts
take about 9 s and the last agents' posts wait several seconds, longer than a poll."""
EARLIER, AGENTS = 70, 100
POLL = 2.0
README = Path(__file__).resolve().parents[2] / "README.md"


def repeat_on() -> frozenset[str]:
    """The states the README's HTTP example says to poll again on."""
    said = re.search(r'repeat while "state" is ([^)]*)\)', README.read_text("utf-8"))
    assert said, "the README's HTTP example says when to poll again"
    return frozenset(re.findall(r'"(\w+)"', said.group(1)))


async def _agent(bed: Bed, n: int, repeat: frozenset[str], posts: list[int]) -> dict[str, Any]:
    body = {**DEPLOY, "label": f"agent {n}"}
    status, posted = await bed.ask(body)
    assert status in (201, 202), posted
    posts.append(status)
    while True:
        status, polled = await bed.get(posted["id"], wait=POLL)
        if status == 429:  # over the token's long-poll cap: again after Retry-After
            await asyncio.sleep(polled["retryAfter"])
            continue
        assert status == 200, polled
        if polled["state"] not in repeat:
            return polled


async def _answer_everything(bed: Bed, clicked: set[str]) -> None:
    """A person answering each question as its message appears."""
    while True:
        for message in bed.messages():
            if message.ts not in clicked:
                clicked.add(message.ts)
                payload = bed.slack.click(message, user=bed.alice, text="Deploy")
                status, _ = await bed.slack.deliver(payload)
                assert status == 200
        await asyncio.sleep(0.02)


async def test_every_agent_long_polling_behind_a_backlog_gets_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A POST answers 202 after 1 s instead of 30 (the time scale cannot shorten it): most
    # agents begin to wait while their question is still queued, as behind a real backlog.
    monkeypatch.setattr(bot.api.gateway, "POST_DEADLINE", 1.0)
    async with running(slack_rate_scale=SCALE) as bed:
        earlier = [asyncio.ensure_future(bed.ask(DEPLOY)) for _ in range(EARLIER)]
        clicked: set[str] = set()
        person = asyncio.ensure_future(_answer_everything(bed, clicked))
        try:
            repeat = repeat_on()
            posts: list[int] = []
            agents = [asyncio.ensure_future(_agent(bed, n, repeat, posts)) for n in range(AGENTS)]
            results = await asyncio.wait_for(asyncio.gather(*agents), 120)
            await asyncio.gather(*earlier)
        finally:
            person.cancel()
            await asyncio.gather(person, return_exceptions=True)
        assert posts.count(202) > AGENTS // 2, posts  # most began to wait queued
        states = [r["state"] for r in results]
        assert states == ["answered"] * AGENTS, {s: states.count(s) for s in set(states)}
        assert all(r["answer"]["answers"][0]["selected"] == ["Deploy"] for r in results)
        assert len(clicked) == EARLIER + AGENTS
