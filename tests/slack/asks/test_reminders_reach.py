"""A reminder reaches a person whatever the settings (issue 39, item 1): who may answer,
else a per-question ``remind`` or the bot's default, else a top-level message in the channel
(never a thread reply that mentions nobody)."""

from __future__ import annotations

import asyncio

import pytest

from bot.mcp.server import input_schema
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions
from bot.questions.review import ReviewerSet, ReviewPolicy
from tests.api.test_gateway import DEPLOY, running
from tests.slack.asks.test_slack_provider import FastClock, one, plan, replies
from tests.slack_harness import SlackHarness

pytestmark = pytest.mark.timeout(30)


async def _timed_out(h: SlackHarness, options: AskOptions, wire: object = None) -> object:
    task = h.ask(wire or one("Deploy?", ["Yes", "No"]), options=options)  # type: ignore[arg-type]
    message = await h.posted()
    with pytest.raises(UserQuestionError):
        await task
    return message


async def test_with_anyone_answering_and_no_remind_it_is_a_top_level_message() -> None:
    async with SlackHarness(clock=FastClock(), allowed_users=None) as h:
        message = await _timed_out(h, AskOptions(timeout=60, reminders=(30,)))
        assert replies(h, message) == []  # no silent thread reply
        tops = h.top_messages(h.channel)
        assert len(tops) == 2, [m.text for m in tops]
        reminder = tops[1].text
        assert reminder.startswith(":alarm_clock: Reminder: a question is still waiting")
        ts = message.ts.replace(".", "")  # type: ignore[attr-defined]
        assert f"/archives/{h.channel}/p{ts}|" in reminder


@pytest.mark.parametrize("where", ["question", "bot"])
async def test_remind_names_who_is_mentioned_when_anyone_may_answer(where: str) -> None:
    default = {"remind": ("U0ONCALL", "S0LEADS1")} if where == "bot" else {}
    async with SlackHarness(clock=FastClock(), allowed_users=None, **default) as h:
        remind = ("U0ONCALL", "S0LEADS1") if where == "question" else ()
        message = await _timed_out(h, AskOptions(timeout=60, reminders=(30,), remind=remind))
        (reminder,) = replies(h, message)
        assert reminder.startswith(":alarm_clock: <@U0ONCALL> <!subteam^S0LEADS1> Reminder:")


async def test_a_review_reminds_its_reviewers() -> None:
    async with SlackHarness(clock=FastClock(), allowed_users=None) as h:
        review = ReviewPolicy(reviewers=ReviewerSet(users=[h.bob], usergroups=["S0LEADS1"]))
        options = AskOptions(timeout=60, reminders=(30,), review=review)
        message = await _timed_out(h, options, plan())
        (reminder,) = replies(h, message)
        assert reminder.startswith(f":alarm_clock: <@{h.bob}> <!subteam^S0LEADS1> Reminder:")


def test_remind_ids_are_checked() -> None:
    with pytest.raises(ValueError):
        AskOptions(remind=("#ops",))


async def test_the_http_api_takes_remind_and_the_bot_default_fills_it() -> None:
    assert "remind" in input_schema()["properties"]  # the MCP tool takes it as the API does
    async with running(slack_remind="S0ONCALL1") as bed:
        body = {**DEPLOY, "timeout": 600, "reminders": [60]}
        status, posted = await asyncio.wait_for(bed.ask({**body, "remind": ["U0LEAD"]}), 30)
        assert status == 201, posted
        record = await bed.runtime.store.get(posted["id"])
        assert record is not None and record.remind == ["U0LEAD"]
        status, posted = await asyncio.wait_for(bed.ask(body), 30)
        record = await bed.runtime.store.get(posted["id"])
        assert record is not None and record.remind == ["S0ONCALL1"]
        status, refused = await asyncio.wait_for(bed.ask({**body, "remind": ["#ops"]}), 30)
        assert status == 422 and ["remind", "0"] in [e["loc"] for e in refused["errors"]]
