"""The benchmarks' clicks are a person's clicks: the bench stand-in (its own process, as the
benchmarks run it) keeps what each person ticked on each message, as their Slack client
does, and their later clicks carry it in ``state.values``.

Before, every generated click carried the message's state as first posted, so a form's
Submit showed nothing ticked, the bot asked to confirm an empty answer, and
``bench.ratelimit`` waited forever for forms that never ended.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack.provider import SlackQuestionProvider
from bench.common import Asks, StandIn, bot_app, message_of, send_paced, serve_bolt, signed
from bench.ratelimit import _form
from bot.questions.service import UserQuestionService


@pytest.mark.slow
async def test_a_persons_ticks_reach_the_bot_with_their_submit() -> None:
    async with asyncio.timeout(60), StandIn() as slack:
        app = await bot_app(slack.url, slack.token)
        provider = SlackQuestionProvider(app, channel=slack.channel)
        service = UserQuestionService()
        service.register_provider(provider)
        served = await serve_bolt(app)
        try:
            asks = Asks(service, make=_form)
            (rid,) = await asks.start(1)
            channel, ts = await message_of(provider.store, rid)
            bob, carol = slack.users[1], slack.users[2]
            clicks = [
                (bob, "region 1"),
                (carol, "region 4"),  # carol's ticks are hers: not in bob's Submit
                (bob, "region 3"),
                (bob, "region 1"),  # ticked again: unticked
                (bob, "region 0"),
                (bob, "Submit"),
            ]
            specs = [{"channel": channel, "ts": ts, "user": u, "text": t} for u, t in clicks]
            payloads = await slack.clicks(specs)
            samples = await send_paced([signed(served.url, p) for p in payloads], 0.0)
            assert [s.status for s in samples] == [200] * len(clicks)
            # each write noted between the request's start and its ack (same clock)
            assert all(s.sent_at <= s.written_at <= s.sent_at + s.latency for s in samples)
            answer = await asks.tasks[rid]
            regions, notify = answer.answers
            assert (regions.id, sorted(regions.selected)) == ("regions", ["region 0", "region 3"])
            assert notify.selected == []
        finally:
            await provider.aclose(grace=5)
            await served.close()
