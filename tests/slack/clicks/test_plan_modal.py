"""A plan longer than its message is offered whole in a modal (issue 39, item 2): "Read the
whole plan" opens it (views.open with the click's trigger), Approve and Decline at its end
decide as the message's buttons do, and the record says whether the decider opened it.

Through the real bolt app and the Slack stand-in, which refuses views outside Slack's limits.
"""

from __future__ import annotations

import asyncio
import html
from typing import Any

import pytest

from adapters.slack.model.ids import key_request_id
from adapters.slack.render.messages import NOT_ALLOWED
from adapters.slack.sandbox.blockcheck import view_problems
from adapters.slack.sandbox.records import View
from adapters.slack.stores import MemoryPendingStore
from bot.questions import AskOptions, ReviewPolicy
from tests.slack.asks.test_slack_provider import finished, plan
from tests.slack.render.test_long_plan_unseen import STEPS
from tests.slack_harness import SlackHarness, all_text, until

pytestmark = pytest.mark.timeout(60)

KEY = "plan-7"
RID = key_request_id(KEY)
READ = "Read the whole plan"


def buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [
        e["text"]["text"]
        for b in blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["type"] == "button"
    ]


async def opened(h: SlackHarness, user: str, *, count: int = 1) -> View:
    """The newest of ``user``'s open modals, once ``count`` are open."""
    ws = h.slack.workspace
    views: list[View] = await until(
        lambda: (lambda vs: vs if len(vs) >= count else None)(
            [v for v in ws.views.values() if v.user == user]
        ),
        what=f"{count} modal(s) for {user}",
    )
    return views[-1]


async def click_in(h: SlackHarness, view: View, user: str, text: str) -> None:
    status, _ = await h.slack.deliver(h.slack.click_view(user, view.to_dict(), text=text))
    assert status == 200


async def kept_read(store: MemoryPendingStore, user: str) -> None:
    """Wait until the record keeps that ``user`` opened the whole plan."""
    for _ in range(1000):
        record = await store.get(RID)
        if record is not None and user in record.plan_readers:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{user}'s read was not kept")


def modal_plan(view: View) -> str:
    """The plan as the modal's sections show it, formatting aside."""
    sections = [b["text"]["text"] for b in view.definition["blocks"] if b["type"] == "section"]
    return html.unescape("\n".join(sections))


async def test_the_whole_plan_opens_in_a_modal_and_approving_there_is_recorded() -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        task = h.ask(plan(STEPS), options=AskOptions(key=KEY))
        message = await h.posted()
        assert buttons(message.blocks)[:2] == [READ, "Approve"]
        await h.click(message, h.alice, text=READ)
        view = await opened(h, h.alice)
        assert view_problems(view.to_dict()) == []
        shown = modal_plan(view)
        for n in range(1, 41):  # every step, in the modal itself
            assert f"{n}. Step {n}: migrate shard {n}" in shown
        assert buttons(view.definition["blocks"][-1:]) == [
            "Approve",
            "Keep planning",
            "Decline with feedback…",
        ]
        await kept_read(store, h.alice)
        await click_in(h, view, h.alice, "Approve")
        assert (await task).answers[0].selected == ["Approve"]
        final = await finished(h, message)
        said = f"Approved by <@{h.alice}> after opening the whole plan"
        assert said in all_text(final.blocks)
        await until(lambda: said in all_text(view.definition["blocks"]), what="the modal's end")
        trail = await store.events(RID)
    assert [e.detail.get("openedWholePlan") for e in trail] == [None, True, True]
    assert [e.kind for e in trail] == ["asked", "changed", "answered"]
    assert trail[1].by == h.alice


async def test_approving_from_the_message_without_opening_it_says_so() -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        task = h.ask(plan(STEPS), options=AskOptions(key=KEY))
        message = await h.posted()
        await h.click(message, h.bob, text=READ)  # someone else read it: not alice
        await opened(h, h.bob)
        await kept_read(store, h.bob)
        await h.click(message, h.alice, text="Approve")
        assert (await task).answers[0].selected == ["Approve"]
        final = await finished(h, message)
        trail = await store.events(RID)
    said = f"Approved by <@{h.alice}> without opening the whole plan"
    assert said in all_text(final.blocks) and said in final.text
    assert trail[-1].detail["openedWholePlan"] is False


async def test_a_plan_the_message_shows_whole_has_no_read_button_and_no_such_record() -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        task = h.ask(plan(), options=AskOptions(key=KEY))
        message = await h.posted()
        assert READ not in buttons(message.blocks)
        await h.click(message, h.alice, text="Approve")
        await task
        final = await finished(h, message)
        trail = await store.events(RID)
    assert "whole plan" not in all_text(final.blocks)
    assert "openedWholePlan" not in trail[-1].detail


async def test_someone_who_may_not_decide_is_refused_in_the_modal_as_on_the_message() -> None:
    async with asyncio.timeout(30), SlackHarness() as h:
        h.provider.defaults.allowed_users = [h.alice]
        task = h.ask(plan(STEPS))
        message = await h.posted()
        await h.click(message, h.bob, text=READ)  # reading is anyone's who sees the message
        view = await opened(h, h.bob)
        await click_in(h, view, h.bob, "Approve")
        note = f"{NOT_ALLOWED[:-1]}; <@{h.alice}> can."
        await until(lambda: [e for e in h.ephemerals(h.bob) if e.text == note], what="the note")
        await until(lambda: note in all_text(view.definition["blocks"]), what="the modal's note")
        assert "Approve" in buttons(view.definition["blocks"])  # still open, still decidable
        await asyncio.sleep(0.1)
        assert not task.done()


async def test_decline_in_the_modal_leads_to_the_feedback_modal() -> None:
    async with asyncio.timeout(30), SlackHarness() as h:
        task = h.ask(plan(STEPS))
        message = await h.posted()
        await h.click(message, h.alice, text=READ)
        view = await opened(h, h.alice)
        await click_in(h, view, h.alice, "Decline with feedback…")
        feedback = await opened(h, h.alice, count=2)  # pushed on top of the plan
        assert feedback.previous_view_id == view.id
        status, _ = await h.slack.deliver(
            h.slack.submission(feedback.id, values={"aq1.text": "Stage it first."})
        )
        assert status == 200
        assert (await task).answers[0].custom == "Stage it first."
        said = f"Declined by <@{h.alice}> after opening the whole plan"
        assert said in all_text((await finished(h, message)).blocks)
        await until(lambda: said in all_text(view.definition["blocks"]), what="the modal's end")


async def test_a_team_reviewers_vote_from_the_modal_says_they_opened_it() -> None:
    async with asyncio.timeout(30), SlackHarness() as h:
        policy = AskOptions(review=ReviewPolicy(approvals=2))
        task = h.ask(plan(STEPS), options=policy)
        message = await h.posted()
        await h.click(message, h.alice, text=READ)
        await click_in(h, await opened(h, h.alice), h.alice, "Approve")
        await h.click(message, h.bob, text="Approve")
        await task
        text = all_text((await finished(h, message)).blocks)
    assert f"<@{h.alice}> approved after opening the whole plan · " in text
    assert f"<@{h.bob}> approved without opening the whole plan · " in text


async def test_a_read_click_on_a_question_that_is_not_a_plan_opens_nothing() -> None:
    async with asyncio.timeout(30), SlackHarness() as h:
        h.ask({"questions": [{"id": "q", "question": "Ship?", "options": [{"label": "Yes"}]}]})
        message = await h.posted()
        payload = h.slack.click(h.current(message), user=h.alice, text="Yes")
        payload["actions"][0]["action_id"] = "aq1.read"  # signed as Slack would, yet no plan
        status, _ = await h.slack.deliver(payload)
        assert status == 200
        await asyncio.sleep(0.2)
        assert not h.slack.workspace.views and h.slack.calls.count("views.open") == 0
