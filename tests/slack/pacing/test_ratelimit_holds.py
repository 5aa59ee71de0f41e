"""Rate-limit refusals the scheduler waits out: chat.postMessage's ``rate_limited`` error code,
429s on unpaced methods after ``close``, and a 429 in one conversation (reference §4)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.slack.clicks.bolt_app import close_web_client, web_client
from adapters.slack.pacing.paced import PacedWebClient
from adapters.slack.pacing.rate_limits import RATE_LIMITED_RETRY_AFTER, SlackLimits, retry_after_of
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.webapi import SlackStandIn
from tests.slack.asks.test_slack_provider import one
from tests.slack_harness import SlackHarness, until

# Slack's real ratios, 50 times faster: a Slack second lasts 20 ms.
SCALED = SlackLimits(time_scale=50.0)


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(rate_limits=RateLimiter(SCALED)) as standin:
        for name in ("a", "b", "c"):
            standin.workspace.add_channel(name)
        yield standin


def paced(slack: SlackStandIn, limits: SlackLimits = SCALED) -> PacedWebClient:
    client = web_client(slack.token, base_url=slack.url, timeout=5, limits=limits)
    assert isinstance(client, PacedWebClient)
    return client


def channel_id(slack: SlackStandIn, name: str) -> str:
    return next(c.id for c in slack.workspace.channels.values() if c.name == name)


def refusals(slack: SlackStandIn, method: str, channel: str | None = None) -> list[Any]:
    return [
        c
        for c in slack.calls(method)
        if c.response is not None
        and not c.response.get("ok")
        and channel in (None, c.params.get("channel"))
    ]


# -- chat.postMessage's own ``rate_limited`` error code ---------------------------------------


def _refusal(status: int, error: str, headers: dict[str, str]) -> SlackApiError:
    response = AsyncSlackResponse(
        client=None,  # type: ignore[arg-type]
        http_verb="POST",
        api_url="https://slack.com/api/chat.postMessage",
        req_args={},
        data={"ok": False, "error": error},
        headers=headers,
        status_code=status,
    )
    return SlackApiError(error, response)


def test_rate_limited_error_code_counts_as_a_rate_limit() -> None:
    assert retry_after_of(_refusal(200, "rate_limited", {})) == RATE_LIMITED_RETRY_AFTER
    assert retry_after_of(_refusal(200, "rate_limited", {"retry-after": "7"})) == 7.0
    assert retry_after_of(_refusal(429, "ratelimited", {"Retry-After": "3"})) == 3.0
    assert retry_after_of(_refusal(200, "channel_not_found", {})) is None


@pytest.mark.slow
async def test_rate_limited_error_code_is_waited_out_then_posted_once(
    slack: SlackStandIn,
) -> None:
    slack.faults.add(method="chat.postMessage", kind="rate_limited")
    client = paced(slack)
    a = channel_id(slack, "a")
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        posted = await client.chat_postMessage(channel=a, text="hello")
        elapsed = loop.time() - started
    finally:
        await close_web_client(client)
    assert posted["ok"]
    answers = [c.response and c.response.get("error") for c in slack.calls("chat.postMessage")]
    assert answers == ["rate_limited", None]
    assert [c.status for c in slack.calls("chat.postMessage")] == [200, 200]  # not a 429
    assert [m.text for m in slack.workspace.messages[a]] == ["hello"]
    assert client.scheduler.ratelimited == 1
    # No Retry-After: the documented default hold, in Slack seconds at the limits' scale.
    assert elapsed >= SCALED.real(RATE_LIMITED_RETRY_AFTER) * 0.95


async def test_a_question_refused_rate_limited_is_posted_once_after_the_hold() -> None:
    async with SlackHarness() as h:
        h.slack.faults.add(method="chat.postMessage", kind="rate_limited")
        task = h.ask(one(options=["Yes", "No"]))
        message = await h.posted()
        await h.click(message, h.alice, text="Yes")
        answer = await asyncio.wait_for(task, 10)
        assert answer.to_wire() == {"answers": [{"id": "q", "selected": ["Yes"]}]}
        tops = [c for c in h.slack.calls("chat.postMessage") if not c.params.get("thread_ts")]
        assert [c.response.get("error") if c.response else None for c in tops] == [
            "rate_limited",
            None,
        ]
        assert len(h.top_messages()) == 1


# -- a 429 on an unpaced method, then close --------------------------------------------------


async def test_close_ends_an_unpaced_call_waiting_out_a_429() -> None:
    async with SlackStandIn() as slack:
        client = paced(slack, SlackLimits())  # real time: Retry-After 30 is 30 s
        slack.faults.add(method="auth.test", kind="ratelimit", retry_after=30, count=5)
        task = asyncio.ensure_future(client.auth_test())
        await until(lambda: slack.calls("auth.test"), what="the first auth.test")
        await close_web_client(client)
        with pytest.raises(SlackClientError):
            await asyncio.wait_for(task, 2)
        assert len(slack.calls("auth.test")) == 1  # never retried after close


# -- a 429 in one conversation ----------------------------------------------------------------


@pytest.mark.slow
async def test_a_429_in_one_channel_does_not_hold_the_others(slack: SlackStandIn) -> None:
    # Retry-After 50 Slack seconds: one real second at this scale.
    slack.faults.add(method="chat.postMessage", kind="ratelimit", retry_after=50)
    client = paced(slack)
    a, b = channel_id(slack, "a"), channel_id(slack, "b")
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        to_a = asyncio.ensure_future(client.chat_postMessage(channel=a, text="to a"))
        await until(lambda: refusals(slack, "chat.postMessage", a), what="a's 429")
        await client.chat_postMessage(channel=b, text="to b")
        b_after = loop.time() - started
        assert not to_a.done()  # a still waits out its Retry-After
        await to_a
        a_after = loop.time() - started
    finally:
        await close_web_client(client)
    assert b_after < 0.5, b_after
    assert a_after >= SCALED.real(50) * 0.95, a_after
    assert [c.params["text"] for c in slack.calls("chat.postMessage") if c.status == 200] == [
        "to b",
        "to a",
    ]


@pytest.mark.slow
async def test_a_second_conversations_429_during_the_hold_holds_the_method(
    slack: SlackStandIn,
) -> None:
    slack.faults.add(method="chat.postMessage", kind="ratelimit", retry_after=50, count=2)
    client = paced(slack)
    a, b, c = (channel_id(slack, n) for n in ("a", "b", "c"))
    try:
        loop = asyncio.get_running_loop()
        to_a = asyncio.ensure_future(client.chat_postMessage(channel=a, text="to a"))
        await until(lambda: refusals(slack, "chat.postMessage", a), what="a's 429")
        to_b = asyncio.ensure_future(client.chat_postMessage(channel=b, text="to b"))
        await until(lambda: refusals(slack, "chat.postMessage", b), what="b's 429")
        widened_at = loop.time()
        await client.chat_postMessage(channel=c, text="to c")
        c_after = loop.time() - widened_at
        await asyncio.gather(to_a, to_b)
    finally:
        await close_web_client(client)
    # Two conversations refused within one hold: the whole method waits b's Retry-After.
    assert c_after >= SCALED.real(50) * 0.9, c_after
    assert client.scheduler.ratelimited == 2
