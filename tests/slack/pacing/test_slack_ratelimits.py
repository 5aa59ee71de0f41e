"""Slack's rate limits: the stand-in's enforcement (a switch) and the budgets the bot paces by."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.pacing.budget import Bucket, LocalBudget, RedisBudget
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.webapi import SlackStandIn


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(**limits: Any) -> tuple[RateLimiter, FakeClock]:
    clock = FakeClock()
    return RateLimiter(SlackLimits(**limits), clock=clock), clock


# -- the table ----------------------------------------------------------------------------


def test_the_published_tiers_of_the_methods_the_bot_calls() -> None:
    limits = SlackLimits()
    assert limits.per_window("chat.update") == 50
    assert limits.per_window("chat.delete") == 50
    assert limits.per_window("conversations.open") == 50
    assert limits.per_window("chat.postEphemeral") == 100
    assert limits.per_window("views.open") == 100
    assert limits.per_window("users.info") == 100
    assert limits.per_window("usergroups.users.list") == 20
    assert limits.per_window("auth.test") is None
    assert limits.limited("chat.postMessage") and not limits.limited("auth.test")
    assert set(limits.methods.values()) <= {1, 2, 3, 4}


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="time_scale"):
        SlackLimits(time_scale=0)
    with pytest.raises(ValueError, match="post_burst"):
        SlackLimits(post_burst=0)
    with pytest.raises(ValueError, match="tier 9"):
        SlackLimits(methods={"chat.update": 9})


# -- the stand-in's limiter ---------------------------------------------------------------


def test_a_tier_allows_its_calls_per_minute_then_answers_retry_after() -> None:
    rl, clock = limiter()
    for _ in range(50):
        assert rl.check("chat.update", {}) is None
        clock.now += 0.1
    # 50 calls in the last 5 s: the first leaves the window 55 s from now.
    assert rl.check("chat.update", {}) == 55
    assert rl.check("chat.postEphemeral", {}) is None  # another method, its own budget
    clock.now += 54.5
    assert rl.check("chat.update", {}) == 1  # refused calls are not counted; half a second
    clock.now += 0.5
    assert rl.check("chat.update", {}) is None
    assert rl.check("chat.update", {}) == 1
    assert rl.refused == 3


def test_posts_one_per_second_per_channel_with_a_burst() -> None:
    rl, clock = limiter(post_burst=3)
    assert [rl.check("chat.postMessage", {"channel": "C1"}) for _ in range(4)] == [
        None,
        None,
        None,
        1,
    ]
    assert rl.check("chat.postMessage", {"channel": "C2"}) is None  # per channel
    clock.now += 1.0
    assert rl.check("chat.postMessage", {"channel": "C1"}) is None
    assert rl.check("chat.postMessage", {"channel": "C1"}) == 1
    clock.now += 10.0  # the bucket refills to the burst, no further
    assert [rl.check("chat.postMessage", {"channel": "C1"}) for _ in range(4)][-1] == 1


def test_posts_have_a_workspace_ceiling_across_channels() -> None:
    rl, clock = limiter(workspace_posts=10, post_burst=1)
    for i in range(10):
        assert rl.check("chat.postMessage", {"channel": f"C{i}"}) is None
    assert rl.check("chat.postMessage", {"channel": "C99"}) == 60
    clock.now += 60.0
    assert rl.check("chat.postMessage", {"channel": "C99"}) is None


def test_a_time_scale_runs_the_same_ratios_faster_with_retry_after_in_slack_seconds() -> None:
    rl, clock = limiter(time_scale=60.0)
    for _ in range(50):
        assert rl.check("chat.update", {}) is None
    assert rl.check("chat.update", {}) == 60  # a Slack minute...
    clock.now += 1.0  # ...is one real second
    assert rl.check("chat.update", {}) is None
    for _ in range(3):
        assert rl.check("chat.postMessage", {"channel": "C1"}) is None
    assert rl.check("chat.postMessage", {"channel": "C1"}) == 1
    clock.now += 1 / 60
    assert rl.check("chat.postMessage", {"channel": "C1"}) is None


def test_special_methods_are_not_limited() -> None:
    rl, _ = limiter(tiers={1: 1, 2: 1, 3: 1, 4: 1})
    assert all(rl.check("auth.test", {}) is None for _ in range(100))


# -- the stand-in over HTTP ---------------------------------------------------------------


async def test_the_standin_answers_429_with_retry_after_when_the_switch_is_on() -> None:
    limits = SlackLimits(tiers={1: 1, 2: 2, 3: 2, 4: 2}, post_burst=2)
    async with SlackStandIn(rate_limits=RateLimiter(limits)) as slack:
        channel = slack.workspace.add_channel("agents").id
        async with aiohttp.ClientSession() as session:
            client = AsyncWebClient(token=slack.token, base_url=slack.url, session=session)
            first = await client.chat_postMessage(channel=channel, text="one")
            await client.chat_postMessage(channel=channel, text="two")
            with pytest.raises(SlackApiError) as refused:
                await client.chat_postMessage(channel=channel, text="three")
            assert refused.value.response.status_code == 429
            assert refused.value.response["error"] == "ratelimited"
            assert refused.value.response.headers["Retry-After"] == "1"
            for text in ("a", "b"):
                await client.chat_update(channel=channel, ts=first["ts"], text=text)
            with pytest.raises(SlackApiError) as refused:
                await client.chat_update(channel=channel, ts=first["ts"], text="c")
            assert int(refused.value.response.headers["Retry-After"]) in (59, 60)
            assert await client.auth_test()  # special: never limited
    limited = [c for c in slack.calls if c.status == 429]
    assert [(c.method, c.fault) for c in limited] == [
        ("chat.postMessage", "limit"),
        ("chat.update", "limit"),
    ]
    assert slack.workspace.message(channel, first["ts"]).text == "b"  # refused: not applied


@pytest.mark.slow
async def test_the_standin_enforces_nothing_when_the_switch_is_off() -> None:
    async with SlackStandIn() as slack:
        channel = slack.workspace.add_channel("agents").id
        async with aiohttp.ClientSession() as session:
            client = AsyncWebClient(token=slack.token, base_url=slack.url, session=session)
            posted = await asyncio.gather(
                *(client.chat_postMessage(channel=channel, text=str(i)) for i in range(80))
            )
    assert all(p["ok"] for p in posted)
    assert slack.rate_limits is None and not [c for c in slack.calls if c.status == 429]


# -- budgets ------------------------------------------------------------------------------


async def test_local_budget_is_a_sliding_window_and_a_hold_closes_it() -> None:
    clock = FakeClock()
    budget = LocalBudget(clock)
    two = Bucket("m", 2, 10.0)
    assert await budget.take([two]) == (0.0, 0)
    clock.now += 4
    assert await budget.take([two]) == (0.0, 0)
    assert await budget.take([two]) == (6.0, 0)  # nothing counted when refused
    clock.now += 6
    assert await budget.take([two]) == (0.0, 0)
    other = Bucket("n", 5, 10.0)
    assert await budget.take([other, two]) == (4.0, 1)  # the full one is named
    assert await budget.take([other]) == (0.0, 0)  # nothing was counted in ``other``
    await budget.hold(other, 3.0)
    assert await budget.take([other]) == (3.0, 0)
    await budget.hold(other, 0)  # no-op
    clock.now += 3
    assert await budget.take([other]) == (0.0, 0)


async def test_redis_budget_is_shared_by_two_processes(
    redis_url: str, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    a = RedisBudget(redis_url, prefix=store_prefix)
    b = RedisBudget(redis_url, prefix=store_prefix)
    try:
        five = Bucket("chat.update", 5, 30.0)
        grants = [await (a if i % 2 else b).take([five]) for i in range(8)]
        assert [w for w, _ in grants].count(0.0) == 5
        wait, full = grants[-1]
        assert 29.0 < wait <= 30.0 and full == 0
        posts = [Bucket("chat.postMessage", 100, 30.0), Bucket("chat.postMessage:C1", 1, 2.0)]
        assert await a.take(posts) == (0.0, 0)
        wait, full = await b.take(posts)
        assert full == 1 and 1.5 < wait <= 2.0  # the channel's bucket is full, not the method's
        await a.hold(Bucket("views.open", 10, 60.0), 5.0)
        wait, full = await b.take([Bucket("views.open", 10, 60.0)])
        assert 4.0 < wait <= 5.0 and full == 0
        keys = await redis_admin.keys(f"{store_prefix}:ratelimit:*")
        ttls = [await redis_admin.pttl(k) for k in keys]
        assert keys and all(ttl > 0 for ttl in ttls)  # nothing lingers
    finally:
        await a.close()
        await b.close()


async def test_redis_budget_paces_alone_while_redis_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = RedisBudget("redis://127.0.0.1:1/0", prefix="unreachable")
    try:
        with caplog.at_level(logging.WARNING, logger="adapters.slack"):
            one = Bucket("chat.update", 1, 60.0)
            assert await budget.take([one]) == (0.0, 0)
            wait, _ = await budget.take([one])
        assert wait > 59
        assert "Redis unreachable" in caplog.text
        assert caplog.text.count("Redis unreachable") == 1  # said once, not per call
    finally:
        await budget.close()
