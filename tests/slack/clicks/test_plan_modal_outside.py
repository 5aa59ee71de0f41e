"""The whole-plan modal from outside the question's message: a Home-tab or forged "Read the
whole plan" click opens nothing before the clicker is checked (a private channel's plan was
shown to a non-member), and a click inside a modal the clicker never opened through a read is
checked as a click from outside (it was checked as the message's own, and decided)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from bot.questions import AskOptions
from tests.slack.asks.test_slack_provider import plan
from tests.slack.render.test_long_plan_unseen import STEPS
from tests.slack_harness import SlackHarness, until

pytestmark = pytest.mark.timeout(60)

READ = "Read the whole plan"


def _from_home(h: SlackHarness, payload: dict[str, Any], user: str) -> dict[str, Any]:
    """``payload`` as if clicked by ``user`` on a Home tab (no channel, no message)."""
    forged = copy.deepcopy(payload)
    forged["user"] = h.slack.workspace.user_ref(user)
    forged.pop("channel", None)
    forged.pop("message", None)
    forged["container"] = {"type": "view", "view_id": "VHOME1"}
    forged["view"] = {"id": "VHOME1", "type": "home", "blocks": []}
    forged["trigger_id"] = h.slack.new_trigger_id(user)
    return forged


def _modals(h: SlackHarness, user: str) -> list[Any]:
    return [v for v in h.slack.workspace.views.values() if v.user == user]


def _refused(h: SlackHarness) -> bool:
    """Whether the bot sent a refusal (a forged payload's reply goes where its reply URL says)."""
    notes = [n.text for user in h.slack.workspace.users for n in h.ephemerals(user)]
    notes += [json.dumps(v.definition) for v in h.slack.workspace.views.values()]
    return any("not one of the people" in note for note in notes)


async def _private_review(h: SlackHarness) -> tuple[str, asyncio.Task[Any], Any]:
    ws = h.slack.workspace
    mallory = ws.add_user("mallory").id
    secret = ws.add_channel("secret", private=True, members=[ws.bot_user.id, h.alice]).id
    task = h.ask(plan(STEPS), options=AskOptions(channel=secret))
    return mallory, task, await h.posted(channel=secret)


async def test_a_read_from_outside_opens_nothing_for_a_non_member() -> None:
    async with SlackHarness() as h:
        mallory, task, message = await _private_review(h)
        read = _from_home(h, h.slack.click(message, user=h.alice, text=READ), mallory)
        status, _ = await h.slack.deliver(read)
        assert status == 200
        await until(lambda: _refused(h) or _modals(h, mallory), what="a refusal or a modal")
        assert not _modals(h, mallory)  # the plan is not shown to her
        assert not task.done()


async def test_a_click_in_a_modal_not_opened_by_a_read_is_checked_as_from_outside() -> None:
    async with SlackHarness() as h:
        mallory, task, message = await _private_review(h)
        await h.click(message, h.alice, text=READ)  # alice, a member, reads: her modal
        views = await until(lambda: list(h.slack.workspace.views.values()), what="the modal")
        forged = h.slack.click_view(mallory, views[-1].to_dict(), text="Approve")
        status, _ = await h.slack.deliver(forged)
        assert status == 200
        await until(lambda: _refused(h) or task.done(), what="a refusal or a decision")
        await asyncio.sleep(0.2)
        assert not task.done()
