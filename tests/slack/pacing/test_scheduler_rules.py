"""The scheduler's order and cancellation rules, seen by its callers (issue 41)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.slack.pacing.budget import Bucket, LocalBudget
from adapters.slack.pacing.rate_limits import SlackLimits, retry_after_of
from adapters.slack.pacing.scheduler import WebApiScheduler

pytestmark = pytest.mark.timeout(10)
FAST = SlackLimits(time_scale=1000.0)


class _Refusal:
    """A Web API answer refusing a call: a 429, or chat.postMessage's ``rate_limited``."""

    def __init__(self, status: int, error: str, headers: dict[str, Any]) -> None:
        self.status_code, self.headers, self.data = status, headers, {"ok": False, "error": error}


def refusal(
    status: int = 429, error: str = "ratelimited", headers: dict[str, Any] | None = None
) -> SlackApiError:
    return SlackApiError(error, _Refusal(status, error, headers or {}))


async def test_a_429d_update_keeps_its_place_ahead_of_a_later_one() -> None:
    scheduler = WebApiScheduler(FAST)
    landed: list[str] = []
    in_flight, go_on = asyncio.Event(), asyncio.Event()
    tries = 0

    async def old() -> str:
        nonlocal tries
        tries += 1
        if tries == 1:
            in_flight.set()
            await go_on.wait()
            raise refusal(headers={"Retry-After": "0"})
        landed.append("old")
        return "old"

    async def new() -> str:
        landed.append("new")
        return "new"

    try:
        first = asyncio.create_task(scheduler.call("chat.update", old, key="C1:1.0"))
        await in_flight.wait()
        second = asyncio.create_task(scheduler.call("chat.update", new, key="C1:1.0"))
        await asyncio.sleep(0.01)
        go_on.set()
        assert list(await asyncio.gather(first, second)) == ["old", "new"]
    finally:
        await scheduler.close()
    assert landed == ["old", "new"]
    assert tries == 2 and scheduler.ratelimited == 1 and scheduler.sent == 3


async def test_cancelling_one_of_two_coalesced_updates_leaves_the_other() -> None:
    scheduler = WebApiScheduler(FAST)
    in_flight, go_on = asyncio.Event(), asyncio.Event()
    sent: list[str] = []

    async def blocking() -> str:
        in_flight.set()
        await go_on.wait()
        return "v0"

    def version(name: str) -> Any:
        async def send() -> str:
            sent.append(name)
            return name

        return send

    try:
        first = asyncio.create_task(scheduler.call("chat.update", blocking, key="m"))
        await in_flight.wait()
        v1 = asyncio.create_task(scheduler.call("chat.update", version("v1"), key="m"))
        await asyncio.sleep(0)
        v2 = asyncio.create_task(scheduler.call("chat.update", version("v2"), key="m"))
        await asyncio.sleep(0)
        assert scheduler.depths() == {"chat.update": 1}  # coalesced: one call waits
        v1.cancel()
        await asyncio.sleep(0)
        assert scheduler.depths() == {"chat.update": 1}  # v2 still waits
        go_on.set()
        assert await first == "v0"
        assert await v2 == "v2"
        with pytest.raises(asyncio.CancelledError):
            await v1
    finally:
        await scheduler.close()
    assert sent == ["v2"]


async def test_cancelling_both_coalesced_updates_takes_the_call_off() -> None:
    scheduler = WebApiScheduler(FAST)
    in_flight, go_on = asyncio.Event(), asyncio.Event()
    sent: list[str] = []

    async def blocking() -> str:
        in_flight.set()
        await go_on.wait()
        return "v0"

    async def later() -> str:
        sent.append("later")
        return "later"

    try:
        first = asyncio.create_task(scheduler.call("chat.update", blocking, key="m"))
        await in_flight.wait()
        waiting = [
            asyncio.create_task(scheduler.call("chat.update", later, key="m")) for _ in range(2)
        ]
        await asyncio.sleep(0)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert scheduler.depths() == {}
        go_on.set()
        assert await first == "v0"
        await asyncio.sleep(0.01)
    finally:
        await scheduler.close()
    assert sent == []


async def test_coalesced_callers_all_get_the_newest_result() -> None:
    scheduler = WebApiScheduler(FAST)
    in_flight, go_on = asyncio.Event(), asyncio.Event()

    async def blocking() -> str:
        in_flight.set()
        await go_on.wait()
        return "v0"

    def version(name: str) -> Any:
        async def send() -> str:
            return name

        return send

    try:
        first = asyncio.create_task(scheduler.call("chat.update", blocking, key="m"))
        await in_flight.wait()
        calls = [
            asyncio.create_task(scheduler.call("chat.update", version(f"v{i}"), key="m"))
            for i in (1, 2, 3)
        ]
        await asyncio.sleep(0)
        other = asyncio.create_task(scheduler.call("chat.update", version("x"), key="other"))
        go_on.set()
        assert await first == "v0"
        assert await asyncio.gather(*calls) == ["v3", "v3", "v3"]
        assert await other == "x"
    finally:
        await scheduler.close()
    assert scheduler.sent == 3


async def test_updates_of_one_message_go_one_at_a_time() -> None:
    scheduler = WebApiScheduler(FAST)
    active = peak = 0

    def version(name: str) -> Any:
        async def send() -> str:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.005)
            active -= 1
            return name

        return send

    try:
        one = asyncio.create_task(scheduler.call("chat.update", version("a"), key="m"))
        await asyncio.sleep(0)
        two = asyncio.create_task(scheduler.call("chat.update", version("b"), key="m"))
        assert list(await asyncio.gather(one, two)) == ["a", "b"]
    finally:
        await scheduler.close()
    assert peak == 1


async def test_a_real_error_fails_the_call_and_is_not_retried() -> None:
    scheduler = WebApiScheduler(FAST)
    tries = 0

    async def broken() -> str:
        nonlocal tries
        tries += 1
        raise refusal(400, "channel_not_found")

    try:
        with pytest.raises(SlackApiError):
            await scheduler.call("chat.postMessage", broken, channel="C1")
    finally:
        await scheduler.close()
    assert tries == 1 and scheduler.ratelimited == 0


async def test_posts_of_one_channel_land_in_order_and_channels_take_turns() -> None:
    scheduler = WebApiScheduler(FAST)
    landed: list[str] = []

    def post(name: str) -> Any:
        async def send() -> str:
            landed.append(name)
            return name

        return send

    try:
        names = ["a1", "a2", "a3", "b1", "b2"]
        await asyncio.gather(
            *(scheduler.call("chat.postMessage", post(n), channel=n[0]) for n in names)
        )
    finally:
        await scheduler.close()
    assert [n for n in landed if n[0] == "a"] == ["a1", "a2", "a3"]
    assert [n for n in landed if n[0] == "b"] == ["b1", "b2"]
    assert landed.index("b1") < landed.index("a3")  # b had a turn before a's last


def test_retry_after_of_each_refusal() -> None:
    assert retry_after_of(refusal(headers={"Retry-After": "7"})) == 7.0
    assert retry_after_of(refusal(headers={"retry-after": ["3"]})) == 3.0
    assert retry_after_of(refusal()) == 1.0
    assert retry_after_of(refusal(headers={"Retry-After": "-4"})) == 0.0
    assert retry_after_of(refusal(headers={"Retry-After": "soon"})) == 1.0
    assert retry_after_of(refusal(200, "rate_limited")) == 60.0
    assert retry_after_of(refusal(200, "rate_limited", headers={"Retry-After": "2"})) == 2.0
    assert retry_after_of(refusal(200, "channel_not_found")) is None
    assert retry_after_of(ValueError("x")) is None


async def test_withdraw_fails_only_the_tagged_waiting_calls() -> None:
    from adapters.slack.pacing.scheduler import tagged

    scheduler = WebApiScheduler(FAST)
    in_flight, go_on = asyncio.Event(), asyncio.Event()

    async def blocking() -> str:
        in_flight.set()
        await go_on.wait()
        return "first"

    async def quick() -> str:
        return "sent"

    try:
        first = asyncio.create_task(scheduler.call("chat.update", blocking, key="m"))
        await in_flight.wait()
        with tagged("q1"):
            mine = asyncio.create_task(scheduler.call("chat.update", quick, key="m"))
        theirs = asyncio.create_task(scheduler.call("chat.update", quick, key="n"))
        await asyncio.sleep(0)
        assert scheduler.is_queued("q1") and not scheduler.is_queued("q2")
        assert scheduler.withdraw("chat.update", "q1", RuntimeError("withdrawn"))
        assert not scheduler.is_queued("q1")
        assert not scheduler.withdraw("chat.update", "q1", RuntimeError("again"))
        go_on.set()
        with pytest.raises(RuntimeError, match="withdrawn"):
            await mine
        assert await first == "first" and await theirs == "sent"
    finally:
        await scheduler.close()


async def test_a_429d_post_holds_its_conversation_only() -> None:
    scheduler = WebApiScheduler(FAST)
    refused = 0
    first_refused = asyncio.Event()

    async def held() -> str:
        nonlocal refused
        refused += 1
        first_refused.set()
        raise refusal(headers={"Retry-After": "2000"})  # 2 s real

    async def other() -> str:
        return "other"

    try:
        stuck = asyncio.create_task(scheduler.call("chat.postMessage", held, channel="C1"))
        await first_refused.wait()
        assert (
            await asyncio.wait_for(scheduler.call("chat.postMessage", other, channel="C2"), 0.5)
            == "other"
        )
        assert not stuck.done()
    finally:
        await scheduler.close()
    assert refused == 1


async def test_a_second_conversation_refused_during_a_hold_holds_the_method() -> None:
    scheduler = WebApiScheduler(FAST)
    refused: list[str] = []
    third_sent, both_refused = asyncio.Event(), asyncio.Event()

    def refused_in(name: str) -> Any:
        async def send() -> str:
            refused.append(name)
            if len(refused) == 2:
                both_refused.set()
            raise refusal(headers={"Retry-After": "2000"})

        return send

    async def third() -> str:
        third_sent.set()
        return "third"

    try:
        calls = [
            asyncio.create_task(scheduler.call("chat.postMessage", refused_in(c), channel=c))
            for c in ("C1", "C2")
        ]
        await both_refused.wait()
        late = asyncio.create_task(scheduler.call("chat.postMessage", third, channel="C3"))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(third_sent.wait(), 0.5)
        assert not late.done() and not any(c.done() for c in calls)
    finally:
        await scheduler.close()


class _SlowHold(LocalBudget):
    """A budget whose hold takes its time (a shared budget's round trip to Redis)."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()

    async def hold(self, bucket: Bucket, seconds: float) -> None:
        self.holding.set()
        await asyncio.sleep(60)


async def test_a_call_whose_429_is_being_held_when_the_client_closes_is_told() -> None:
    """Closed while its 429's hold is written: the call fails; its caller does not hang."""
    budget = _SlowHold()
    scheduler = WebApiScheduler(FAST, budget=budget)

    async def refused() -> str:
        raise refusal(headers={"Retry-After": "1"})

    call = asyncio.create_task(scheduler.call("chat.postMessage", refused, channel="C1"))
    await asyncio.wait_for(budget.holding.wait(), 5)
    await scheduler.close()
    with pytest.raises(SlackClientError, match="closed"):
        await asyncio.wait_for(call, 2)


async def test_a_call_in_flight_when_the_client_closes_fails_as_closed() -> None:
    scheduler = WebApiScheduler(FAST)
    sending = asyncio.Event()

    async def slow() -> str:
        sending.set()
        await asyncio.sleep(60)
        return "late"

    call = asyncio.create_task(scheduler.call("chat.postMessage", slow, channel="C1"))
    await asyncio.wait_for(sending.wait(), 5)
    await scheduler.close()
    with pytest.raises(SlackClientError, match="closed"):
        await asyncio.wait_for(call, 2)
