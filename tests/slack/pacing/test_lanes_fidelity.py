"""The scheduler's lanes as Slack counts them, and the ``queued`` state as the docs mean it.

Slack limits ``chat.postMessage`` per conversation (about one a second, short bursts
allowed), not per name: a DM question is posted to the person's user id and its thread
parts and reminders to the ``D…`` id Slack answered, one conversation. The scheduler learns
that from the first post's answer and paces both names as one lane
(docs/operations/rate-limits.md). ``queued`` means the question's own message still waits
to be posted: work the post started afterwards (App Home republishing, message refreshes)
waiting its turn does not make a question in Slack read ``queued``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from adapters.slack.asks.synchroniser import BackgroundTasks
from adapters.slack.clicks.bolt_app import close_web_client, web_client
from adapters.slack.pacing.paced import PacedWebClient
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.pacing.scheduler import WebApiScheduler, tagged
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.webapi import SlackStandIn
from bot.questions.models import AskOptions
from tests.slack_harness import SlackHarness, until

pytestmark = pytest.mark.timeout(60)

SCALED = SlackLimits(time_scale=50.0)
"""Slack's real ratios 50 times faster: a post per conversation every 20 ms."""
QUESTION = {
    "questions": [
        {"id": "q", "question": "Deploy?", "options": [{"label": "Yes"}, {"label": "No"}]}
    ]
}


def plan_review(n: int) -> dict[str, Any]:
    """A plan review whose plan is long enough to continue in the message's thread."""
    steps = "\n\n".join(f"## Step {i}\n" + "lorem ipsum dolor sit amet " * 12 for i in range(110))
    return {
        "questions": [
            {
                "id": "plan-review",
                "header": f"Plan {n}",
                "question": f"Approve plan {n}?",
                "detail": "# Plan\n\n" + steps,
                "options": [{"label": "Approve"}, {"label": "Keep planning"}],
                "intent": {"kind": "plan-review", "approve": "Approve"},
            }
        ]
    }


# -- one DM, two names: one lane --------------------------------------------------------


@pytest.mark.slow
async def test_dm_plan_reviews_with_thread_parts_stay_within_the_conversation_limit() -> None:
    async with SlackHarness(limits=SCALED, enforce=True) as h:
        for n in range(6):
            h.ask(plan_review(n), options=AskOptions(channel=h.alice))
        dm = h.slack.workspace.open_dm(h.alice).id
        tops = await until(
            lambda: (lambda ms: ms if len(ms) >= 6 else None)(h.top_messages(dm)),
            within=20,
            what="6 plan reviews",
        )
        # Every review's plan continues in its thread: wait for all the parts.
        await until(
            lambda: all(h.current(m).replies for m in tops) and not h.client.scheduler.depths(),
            within=20,
            what="the thread parts",
        )
        await asyncio.sleep(0.2)
        parts = {len(h.current(m).replies) for m in tops}
        posts = h.slack.calls("chat.postMessage")
        refused = [c for c in posts if c.status == 429]
        named = {c.params["channel"] for c in posts}
    assert named == {h.alice, dm}  # posted under both names, as the bot does
    assert len(parts) == 1 and parts != {0}, parts
    assert refused == [], f"{len(refused)} of {len(posts)} posts refused 429"
    assert h.client.scheduler.ratelimited == 0


@pytest.mark.slow
async def test_posts_to_a_user_id_and_to_its_dm_id_are_paced_as_one_conversation() -> None:
    async with SlackStandIn(rate_limits=RateLimiter(SCALED)) as slack:
        alice = slack.workspace.add_user("alice").id
        dm = slack.workspace.open_dm(alice).id
        agents = slack.workspace.add_channel("agents").id
        client = web_client(slack.token, base_url=slack.url, timeout=5, limits=SCALED)
        assert isinstance(client, PacedWebClient)
        try:
            loop = asyncio.get_running_loop()
            # As the bot does for a DM question: the question to the user id, its thread
            # parts and reminders to the D… id Slack answered with.
            dm_posts = asyncio.gather(
                *(client.chat_postMessage(channel=alice, text=f"q{i}") for i in range(8)),
                *(
                    client.chat_postMessage(channel=dm, thread_ts="1.0", text=f"part{i}")
                    for i in range(8)
                ),
            )
            await until(lambda: slack.calls.count("chat.postMessage") >= 2, what="a DM post")
            started = loop.time()
            # The DM's backlog does not hold up another channel's question.
            await client.chat_postMessage(channel=agents, text="team question")
            other_waited = loop.time() - started
            answers = await dm_posts
        finally:
            await close_web_client(client)
        refused = [c for c in slack.calls if c.status == 429]
    assert {a["channel"] for a in answers} == {dm}
    assert refused == [], f"{len(refused)} posts refused 429 by Slack's per-channel limit"
    assert client.scheduler.conversation(alice) == dm
    assert other_waited < SCALED.real(SCALED.post_interval) * 5, other_waited


# -- ``queued``: the question's own post, nothing it started ------------------------------

HOME_SLOWED = SlackLimits(time_scale=1.0, tiers={1: 1, 2: 20, 3: 50, 4: 1})
"""Real time; Tier 4 (``views.publish``) one call a minute: a second publish waits."""


@pytest.mark.slow
async def test_a_posted_question_reads_pending_while_home_tab_publishes_wait() -> None:
    async with SlackHarness(limits=HOME_SLOWED) as h:
        status, _ = await h.slack.open_home(h.alice)  # alice keeps her Home tab current
        assert status == 200
        await until(lambda: h.alice in h.slack.workspace.home_views, what="alice's Home tab")
        h.ask(QUESTION, options=AskOptions(key="x"))
        request_id = h.provider.request_id_for("x")
        await h.posted()
        # The question's post republishes alice's tab; that publish waits for Tier 4.
        await until(
            lambda: h.client.scheduler.depths().get("views.publish"),
            what="the republish of alice's tab to wait its turn",
        )
        for _ in range(100):
            current = await h.provider.status(request_id)
            if current is not None and current.message is not None:
                break
            await asyncio.sleep(0.02)
        assert current is not None and current.message is not None  # in Slack, open
        assert not current.queued, f"a posted question reads queued: {h.client.scheduler.depths()}"


@pytest.mark.slow
async def test_a_question_whose_own_post_waits_reads_queued_until_posted() -> None:
    slow_posts = SlackLimits(time_scale=1.0)  # one post per channel a second
    async with SlackHarness(limits=slow_posts) as h:
        h.ask(QUESTION, options=AskOptions(key="first"))
        await h.posted()
        h.ask(QUESTION, options=AskOptions(key="second"))
        request_id = h.provider.request_id_for("second")

        async def reads_queued() -> bool:
            current = await h.provider.status(request_id)
            return current is not None and current.queued

        for _ in range(50):
            if await reads_queued():
                break
            await asyncio.sleep(0.01)
        assert await reads_queued(), "a question whose post waits its turn reads queued"
        await h.posted(2)
        for _ in range(100):
            current = await h.provider.status(request_id)
            if current is not None and current.message is not None:
                break
            await asyncio.sleep(0.02)
        assert current is not None and current.message is not None
        assert not current.queued


async def test_background_tasks_do_not_carry_the_tag_of_the_context_that_started_them() -> None:
    limits = SlackLimits(time_scale=1.0, tiers={1: 1, 2: 20, 3: 50, 4: 1})
    scheduler = WebApiScheduler(limits)
    tasks = BackgroundTasks(logging.getLogger("test"))
    sent: list[str] = []

    async def publish(what: str) -> str:
        sent.append(what)
        return what

    try:
        await scheduler.call("views.publish", lambda: publish("first"))  # spends the minute
        with tagged("question"):
            tasks.spawn(scheduler.call("views.publish", lambda: publish("later")), "publish")
        await until(lambda: scheduler.depths().get("views.publish"), what="the publish to wait")
        assert not scheduler.is_queued("question")
        with tagged("question"):  # a call made in the tagged context itself is the tag's
            own = asyncio.ensure_future(scheduler.call("views.publish", lambda: publish("own")))
        await until(lambda: scheduler.is_queued("question"), what="the tagged call to wait")
        own.cancel()
    finally:
        await scheduler.close()
        await tasks.drain(1.0)
    assert sent == ["first"]


@pytest.mark.slow
async def test_the_dm_conversations_remembered_are_bounded_latest_kept() -> None:
    from adapters.slack.pacing.rate_limits import SlackLimits
    from adapters.slack.pacing.scheduler import KNOWN_CONVERSATIONS, WebApiScheduler

    scheduler = WebApiScheduler(SlackLimits(time_scale=1e6))
    try:
        for i in range(KNOWN_CONVERSATIONS + 500):
            await scheduler.learn(f"U{i:08d}", f"D{i:08d}")
        newest = KNOWN_CONVERSATIONS + 499
        assert scheduler.conversation(f"U{newest:08d}") == f"D{newest:08d}"
        assert scheduler.conversation("U00000000") == "U00000000"  # the oldest forgotten
        assert len(scheduler._conversations) == KNOWN_CONVERSATIONS
    finally:
        await scheduler.close()
