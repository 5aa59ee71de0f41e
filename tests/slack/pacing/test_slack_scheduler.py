"""The Web API scheduler: paced within Slack's limits against a stand-in that enforces them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.slack.clicks.bolt_app import close_web_client, web_client
from adapters.slack.pacing import scheduler as scheduler_module
from adapters.slack.pacing.budget import RedisBudget
from adapters.slack.pacing.paced import PacedWebClient
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.pacing.scheduler import WebApiScheduler
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.webapi import SlackStandIn

# Slack's real ratios, 50 times faster: a post per channel every 20 ms, Tier 3 50 per 1.2 s.
SCALED = SlackLimits(time_scale=50.0)


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    """The stand-in, enforcing ``SCALED``."""
    async with SlackStandIn(rate_limits=RateLimiter(SCALED)) as standin:
        standin.workspace.add_channel("agents")
        standin.workspace.add_channel("ops")
        yield standin


def paced(slack: SlackStandIn, limits: SlackLimits = SCALED, **kwargs: Any) -> PacedWebClient:
    client = web_client(slack.token, base_url=slack.url, timeout=5, limits=limits, **kwargs)
    assert isinstance(client, PacedWebClient)
    return client


def channel_id(slack: SlackStandIn, name: str) -> str:
    return next(c.id for c in slack.workspace.channels.values() if c.name == name)


def limited(slack: SlackStandIn) -> list[Any]:
    return [c for c in slack.calls if c.status == 429]


@pytest.mark.slow
async def test_sixty_posts_at_once_are_paced_not_refused(slack: SlackStandIn) -> None:
    client = paced(slack)
    agents = channel_id(slack, "agents")
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        posted = await asyncio.gather(
            *(client.chat_postMessage(channel=agents, text=f"q{i}") for i in range(60))
        )
        elapsed = loop.time() - started
    finally:
        await close_web_client(client)
    assert all(p["ok"] for p in posted)
    assert limited(slack) == []
    # In order, one lane per channel: the messages appear as they were asked.
    assert [m.text for m in slack.workspace.history(agents)] == [f"q{i}" for i in range(60)]
    # Slack's minimum for 60 posts with a burst of 3 is 57 intervals (1.14 s at this scale).
    assert elapsed >= 57 * SCALED.real(SCALED.post_interval) * 0.95


@pytest.mark.slow
async def test_updates_of_one_message_coalesce_and_the_last_version_lands(
    slack: SlackStandIn,
) -> None:
    limits = SlackLimits(time_scale=50.0, tiers={1: 1, 2: 20, 3: 2, 4: 100})
    client = paced(slack, limits)
    agents = channel_id(slack, "agents")
    try:
        first = await client.chat_postMessage(channel=agents, text="v0")
        ts = first["ts"]
        # Spend the Tier 3 budget (2 per 1.2 s) so the next updates must wait.
        await client.chat_update(channel=agents, ts=ts, text="warm-1")
        await client.chat_update(channel=agents, ts=ts, text="warm-2")
        slack.calls.clear()
        results = await asyncio.gather(
            *(client.chat_update(channel=agents, ts=ts, text=f"v{i}") for i in range(1, 21))
        )
    finally:
        await close_web_client(client)
    assert all(r["ok"] for r in results)
    sent = [c.params["text"] for c in slack.calls("chat.update")]
    assert sent == ["v20"]  # twenty waiting versions, one call: the newest
    assert slack.workspace.message(agents, ts).text == "v20"
    assert limited(slack) == []


async def test_an_update_in_flight_is_followed_by_the_newest_waiting_one(
    slack: SlackStandIn,
) -> None:
    slack.faults.add(method="chat.update", kind="delay", delay=0.2, count=1)
    client = paced(slack)
    agents = channel_id(slack, "agents")
    try:
        ts = (await client.chat_postMessage(channel=agents, text="v0"))["ts"]
        first = asyncio.ensure_future(client.chat_update(channel=agents, ts=ts, text="v1"))
        await asyncio.sleep(0.05)  # v1 is on its way (delayed by Slack)
        later = [client.chat_update(channel=agents, ts=ts, text=f"v{i}") for i in (2, 3, 4)]
        await asyncio.gather(first, *later)
    finally:
        await close_web_client(client)
    assert [c.params["text"] for c in slack.calls("chat.update")] == ["v1", "v4"]
    assert slack.workspace.message(agents, ts).text == "v4"


async def test_a_429_anyway_is_waited_out_and_retried_never_failed(slack: SlackStandIn) -> None:
    slack.faults.add(method="chat.postMessage", kind="ratelimit", retry_after=5, count=2)
    client = paced(slack)
    agents = channel_id(slack, "agents")
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        posted = await client.chat_postMessage(channel=agents, text="hello")
        elapsed = loop.time() - started
    finally:
        await close_web_client(client)
    assert posted["ok"]
    assert [c.status for c in slack.calls("chat.postMessage")] == [429, 429, 200]
    assert client.scheduler.ratelimited == 2
    assert elapsed >= 2 * SCALED.real(5) * 0.95  # Retry-After (Slack seconds) honoured


async def test_a_real_slack_error_still_fails_the_call(slack: SlackStandIn) -> None:
    client = paced(slack)
    try:
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(channel="C404", text="x")
    finally:
        await close_web_client(client)
    assert refused.value.response["error"] == "channel_not_found"


@pytest.mark.slow
async def test_channels_take_turns_under_the_workspace_ceiling(slack: SlackStandIn) -> None:
    limits = SlackLimits(time_scale=50.0, workspace_posts=5)
    client = paced(slack, limits)
    agents, ops = channel_id(slack, "agents"), channel_id(slack, "ops")
    try:
        backlog = [client.chat_postMessage(channel=agents, text=f"a{i}") for i in range(8)]
        await asyncio.sleep(0)  # the busy channel queues first
        other = [client.chat_postMessage(channel=ops, text=f"o{i}") for i in range(2)]
        await asyncio.gather(*backlog, *other)
    finally:
        await close_web_client(client)
    order = [c.params["text"] for c in slack.calls("chat.postMessage")]
    # ops' posts go within the first window, not after agents' whole backlog.
    assert {"o0", "o1"} <= set(order[:5]), order
    assert limited(slack) == []


@pytest.mark.slow
async def test_a_caller_that_stops_waiting_takes_its_call_off_the_queue(
    slack: SlackStandIn,
) -> None:
    limits = SlackLimits(time_scale=1.0)  # real time: the fourth post waits a second
    client = paced(slack, limits)
    agents = channel_id(slack, "agents")
    try:
        for i in range(2):
            await client.chat_postMessage(channel=agents, text=f"p{i}")
        waiting = asyncio.ensure_future(client.chat_postMessage(channel=agents, text="never"))
        await asyncio.sleep(0.05)
        assert client.scheduler.depths() == {"chat.postMessage": 1}
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert client.scheduler.depths() == {}
    finally:
        await close_web_client(client)
    assert [c.params["text"] for c in slack.calls("chat.postMessage")] == ["p0", "p1"]


@pytest.mark.slow
async def test_a_long_wait_is_logged_and_close_fails_what_still_waits(
    slack: SlackStandIn, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = web_client(slack.token, base_url=slack.url, limits=SlackLimits(time_scale=1.0))
    assert isinstance(client, PacedWebClient)
    monkeypatch.setattr(scheduler_module, "_SLOW_AFTER", 0.05)
    agents = channel_id(slack, "agents")
    with caplog.at_level(logging.WARNING, logger="adapters.slack"):
        for i in range(3):  # the third waits two seconds (two posts per 2.1 s)
            await client.chat_postMessage(channel=agents, text=f"p{i}")
    assert "waited" in caplog.text and "rate limit" in caplog.text
    await client.chat_postMessage(channel=agents, text="p3")  # the window has room for one
    stuck = asyncio.ensure_future(client.chat_postMessage(channel=agents, text="late"))
    await asyncio.sleep(0.05)
    await close_web_client(client)
    with pytest.raises(SlackClientError):
        await stuck
    with pytest.raises(SlackClientError):
        await client.chat_postMessage(channel=agents, text="after close")


async def test_unpaced_methods_go_at_once(slack: SlackStandIn) -> None:
    client = paced(slack)
    try:
        answers = await asyncio.gather(*(client.auth_test() for _ in range(20)))
    finally:
        await close_web_client(client)
    assert all(a["ok"] for a in answers) and client.scheduler.depths() == {}


async def test_socket_modes_connections_open_is_never_held_by_its_tier() -> None:
    """Tier 1 (one a minute) would hold a reconnect a minute: it goes at once instead, and
    Slack's own 429 is waited out for its Retry-After, then sent again."""
    scheduler = WebApiScheduler(SlackLimits(time_scale=50.0))
    refusals = [_Refusal(retry_after="5")]
    sent: list[float] = []
    loop = asyncio.get_running_loop()

    async def send() -> str:
        sent.append(loop.time())
        if refusals:
            raise SlackApiError("ratelimited", refusals.pop())
        return "wss://…"

    try:
        began = loop.time()
        assert await scheduler.call("apps.connections.open", send) == "wss://…"
        assert sent[1] - sent[0] >= 5 / 50.0 * 0.95  # Retry-After, Slack seconds at 50x
        for _ in range(5):  # five reconnects in a (scaled) minute, none waits its turn
            await scheduler.call("apps.connections.open", send)
        assert loop.time() - began < 60 / 50.0
    finally:
        await scheduler.close()
    assert len(sent) == 7 and scheduler.ratelimited == 1


class _Refusal:
    """Just enough of a 429 answer for ``retry_after_of``."""

    def __init__(self, retry_after: str) -> None:
        self.status_code = 429
        self.headers = {"Retry-After": retry_after}
        self.data = {"ok": False, "error": "ratelimited"}

    def __getitem__(self, key: str) -> object:
        return self.data[key]


async def test_two_processes_sharing_redis_stay_within_one_apps_budget(
    slack: SlackStandIn, redis_url: str, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    agents = channel_id(slack, "agents")
    clients = [paced(slack, budget=RedisBudget(redis_url, prefix=store_prefix)) for _ in range(2)]
    try:
        ts = [
            (await clients[0].chat_postMessage(channel=agents, text=f"m{i}"))["ts"]
            for i in range(2)
        ]
        slack.calls.clear()
        loop = asyncio.get_running_loop()
        started = loop.time()
        # 120 updates of 60 messages from two "processes": 2.4 of Tier 3's windows.
        await asyncio.gather(
            *(
                clients[i % 2].chat_update(channel=agents, ts=ts[i % 2], text=f"{i}-{n}")
                for n in range(60)
                for i in range(2)
            )
        )
        elapsed = loop.time() - started
    finally:
        for client in clients:
            await close_web_client(client)
    assert limited(slack) == []
    updates = slack.calls("chat.update")
    window = SCALED.real(SCALED.window)
    for call in updates:  # never more than Tier 3's 50 in any window
        assert sum(1 for c in updates if call.at <= c.at < call.at + window) <= 50
    assert elapsed < 3 * window  # paced, not stalled


def test_the_buckets_each_call_spends() -> None:
    from adapters.slack.pacing.budget import Bucket
    from adapters.slack.pacing.scheduler import WebApiScheduler

    scheduler = WebApiScheduler(SlackLimits(time_scale=2.0))
    window = 30.0 * 1.1  # a Slack minute at twice the speed, stretched by the margin
    assert scheduler.limits.buckets("chat.update", "C1/1.2") == [
        Bucket("chat.update", 50, window),
        Bucket("chat.update:pace", 5, window / 10),  # spent evenly, five at a time
    ]
    # A modal's trigger expires three seconds after the click: the whole window at once.
    assert scheduler.limits.buckets("views.open", "U1") == [Bucket("views.open", 100, window)]
    posts = scheduler.limits.buckets("chat.postMessage", "C1")
    assert posts[0] == Bucket("chat.postMessage", 300, window)  # the workspace's ceiling
    assert posts[-1] == Bucket("chat.postMessage:C1", 1, 0.5 * 1.02)  # a post a second
