"""The rate-limit budget keeps count through concurrency, outages and months of channels.

- One process takes for many methods at once (a worker each) and holds after 429s: every
  call is counted in Redis, none is granted by the local fallback because the connection
  pool ran dry, and nothing claims Redis was unreachable.
- Calls granted and ``Retry-After`` holds taken while Redis was unreachable are written to
  Redis when it is back: neither this process nor another spends the window twice.
- A shorter hold never cuts a longer one short, in memory or in Redis.
- Buckets whose windows have passed are forgotten (one per channel posted to, for months).
"""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from adapters.slack.pacing import budget as budget_module
from adapters.slack.pacing.budget import Bucket, LocalBudget, RedisBudget
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.pacing.scheduler import WebApiScheduler
from tests.slack.stores.test_store_contract import _Proxy, proxy  # noqa: F401

LOGGER = "adapters.slack"
METHODS = [
    "chat.postMessage",
    "chat.update",
    "chat.postEphemeral",
    "views.publish",
    "views.open",
    "usergroups.users.list",
    "conversations.history",
    "users.info",
]


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def kept(budget: LocalBudget) -> int:
    """How many buckets and holds ``budget`` keeps in memory."""
    return len(budget._calls) + len(budget._held)


async def _ok() -> str:
    return "ok"


# -- many callers at once ------------------------------------------------------------------


async def test_every_method_taking_at_once_is_counted_in_redis(
    redis_url: str,
    redis_admin: aioredis.Redis,
    store_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduler = WebApiScheduler(SlackLimits(), budget=RedisBudget(redis_url, prefix=store_prefix))
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            answers = await asyncio.gather(*(scheduler.call(m, _ok, channel="C1") for m in METHODS))
    finally:
        await scheduler.close()
    assert answers == ["ok"] * len(METHODS)
    counted = {m: await redis_admin.zcard(f"{store_prefix}:ratelimit:{m}") for m in METHODS}
    assert counted == dict.fromkeys(METHODS, 1)
    assert "Redis unreachable" not in caplog.text


async def test_fifty_takes_and_holds_at_once_all_reach_redis(
    redis_url: str,
    redis_admin: aioredis.Redis,
    store_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Holds come from the calls in flight that got 429 (any number at once)."""
    budget = RedisBudget(redis_url, prefix=store_prefix)
    buckets = [Bucket(f"m{i}", 10, 60.0) for i in range(50)]
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            grants = await asyncio.gather(*(budget.take([b]) for b in buckets))
            await asyncio.gather(*(budget.hold(b, 20.0) for b in buckets))
    finally:
        await budget.close()
    assert grants == [(0.0, 0)] * 50
    prefix = f"{store_prefix}:ratelimit"
    assert [await redis_admin.zcard(f"{prefix}:{b.key}") for b in buckets] == [1] * 50
    held = [await redis_admin.pttl(f"{prefix}:{b.key}:hold") for b in buckets]
    assert all(19_000 < ms <= 20_000 for ms in held), held
    assert "Redis unreachable" not in caplog.text


@pytest.mark.slow
async def test_a_caller_finding_every_connection_busy_is_granted_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Eight calls stuck on a Redis that answers nobody (a black hole): the ninth caller
    waits for a connection, then is told to wait: not granted on this process's word."""
    writers: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while await reader.read(4096):
            pass

    monkeypatch.setattr(budget_module, "_CONNECTION_WAIT", 0.3, raising=False)
    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    budget = RedisBudget(f"redis://127.0.0.1:{port}/0", prefix="black-hole")
    stuck = [asyncio.ensure_future(budget.take([Bucket(f"m{i}", 10, 60.0)])) for i in range(8)]
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            await asyncio.sleep(0.1)
            assert await budget.take([Bucket("m8", 10, 60.0)]) == (0.5, 0)
            await budget.hold(Bucket("m8", 10, 60.0), 20.0)  # kept here, for Redis later
        assert not any(task.done() for task in stuck)
        assert budget._fallback._calls == {} and list(budget._fallback._held) == ["m8"]
        assert "Redis unreachable" not in caplog.text
    finally:
        for task in stuck:
            task.cancel()
        await asyncio.gather(*stuck, return_exceptions=True)
        await budget.close()
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()


# -- an outage -------------------------------------------------------------------------------


async def test_calls_granted_while_redis_was_down_count_when_it_is_back(
    proxy: _Proxy,  # noqa: F811
    redis_url: str,
    redis_admin: aioredis.Redis,
    store_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = RedisBudget(proxy.url, prefix=store_prefix)
    other = RedisBudget(redis_url, prefix=store_prefix)  # a process Redis never left
    five = Bucket("chat.update", 5, 60.0)
    views = Bucket("views.open", 100, 60.0)
    caplog.set_level(logging.INFO, logger=LOGGER)
    try:
        assert await budget.take([five]) == (0.0, 0)  # counted in Redis
        await proxy.cut()
        for _ in range(4):  # paced by this process alone
            assert await budget.take([five]) == (0.0, 0)
        await budget.hold(views, 30.0)  # a 429 answered while Redis is down
        assert "Redis unreachable" in caplog.text
        await proxy.restore()
        wait, full = await budget.take([five])
        assert 55.0 < wait <= 60.0 and full == 0, "a sixth call within the minute was granted"
        wait, _ = await other.take([five])
        assert 55.0 < wait <= 60.0, "another process granted a sixth call within the minute"
        wait, _ = await other.take([views])
        assert 25.0 < wait <= 30.0, "the Retry-After taken during the outage was forgotten"
        assert "shared through Redis again" in caplog.text
        assert await redis_admin.zcard(f"{store_prefix}:ratelimit:chat.update") == 5
        assert kept(budget._fallback) == 0  # written back, then forgotten here
    finally:
        await budget.close()
        await other.close()


@pytest.mark.slow
async def test_the_fallback_forgets_what_passed_during_a_long_outage(
    proxy: _Proxy,  # noqa: F811
    store_prefix: str,
) -> None:
    budget = RedisBudget(proxy.url, prefix=store_prefix)
    try:
        await proxy.cut()
        for i in range(2_000):  # posts to 2,000 channels, each bucket a few milliseconds long
            assert await budget.take([Bucket(f"chat.postMessage:C{i}", 1, 0.005)]) == (0.0, 0)
        await asyncio.sleep(0.05)
        await budget.take([Bucket("chat.postMessage:C1", 1, 0.005)])
        assert kept(budget._fallback) < 10
    finally:
        await budget.close()


# -- holds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["local", "redis"])
async def test_a_shorter_hold_leaves_a_longer_one(
    kind: str, redis_url: str, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    def make() -> LocalBudget | RedisBudget:
        if kind == "local":
            return LocalBudget()
        return RedisBudget(redis_url, prefix=store_prefix)

    first = make()
    second = first if kind == "local" else make()  # in Redis: another process
    posts = Bucket("chat.postMessage", 300, 66.0)
    try:
        await first.hold(posts, 30.0)  # a 429 with Retry-After: 30
        await second.hold(posts, 1.0)  # a moment later another with Retry-After: 1
        wait, _ = await first.take([posts])
        assert 29.0 < wait <= 30.0
        await second.hold(posts, 45.0)  # a longer one still lengthens it
        wait, _ = await first.take([posts])
        assert 44.0 < wait <= 45.0
    finally:
        await first.close()
        await second.close()


# -- memory ----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_buckets_whose_windows_passed_are_forgotten() -> None:
    clock = FakeClock()
    budget = LocalBudget(clock)
    limits = SlackLimits()
    for i in range(20_000):  # a post to each of 20,000 DMs over the months
        clock.now += 4.0
        assert await budget.take(limits.buckets("chat.postMessage", f"D{i:08d}")) == (
            0.0,
            0,
        )
        if i % 20 == 0:
            await budget.hold(Bucket(f"users.info:{i}", 100, 60.0), 5.0)
    assert kept(budget) < 100  # while posting: only what is still in its window
    clock.now += 3600  # an hour later every window and hold is long past
    assert await budget.take(limits.buckets("chat.postMessage", "C1")) == (0.0, 0)
    assert kept(budget) <= 3  # the post just made: the workspace's, the pace's, the channel's


async def test_forgetting_keeps_the_windows_exact() -> None:
    """A bucket swept away while others are busy is not reset early, nor kept late."""
    clock = FakeClock()
    budget = LocalBudget(clock)
    two = Bucket("m", 2, 10.0)
    assert await budget.take([two]) == (0.0, 0)
    clock.now += 4
    assert await budget.take([two]) == (0.0, 0)
    for i in range(50):  # other buckets come and go, sweeps run
        clock.now += 0.1
        assert await budget.take([Bucket(f"c{i}", 1, 0.05)]) == (0.0, 0)
    wait, _ = await budget.take([two])
    assert wait == pytest.approx(1.0)  # the first call leaves the window at 1010
    clock.now += 1.0
    assert await budget.take([two]) == (0.0, 0)
    clock.now += 100
    assert await budget.take([Bucket("n", 1, 1.0)]) == (0.0, 0)
    assert kept(budget) == 1
