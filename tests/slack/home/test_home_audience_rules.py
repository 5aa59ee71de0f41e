"""Home tab audiences follow who can see a question and who may act on it (the click path's
rule): a DM's or private channel's question is not on others' tabs nor answerable from them,
and a team review's plan is listed for its reviewers."""

from __future__ import annotations

import json

import pytest

from bot.questions import AskOptions, ReviewPolicy
from tests.slack.asks.test_slack_provider import one, plan
from tests.slack_harness import SlackHarness, until
from tests.slack_payloads import click


def home_of(h: SlackHarness, user: str) -> str:
    view = h.slack.workspace.home_views.get(user)
    return json.dumps(view, ensure_ascii=False) if view else ""


@pytest.mark.slow
async def test_dm_and_private_questions_stay_off_other_home_tabs() -> None:
    async with SlackHarness() as h:
        ws = h.slack.workspace
        secret = ws.add_channel("security-private", members=[h.alice, ws.bot_user.id], private=True)
        dm = h.ask(
            one("Alice: approve your salary change?", ["Approve", "Reject"]),
            options=AskOptions(channel=h.alice),
        )
        priv = h.ask(
            one("Rotate the leaked prod DB password?", ["Rotate", "Wait"]),
            options=AskOptions(channel=secret.id),
        )
        public = h.ask(one("Ship the release?", ["Ship", "Hold"]))
        await until(lambda: len([c for c in h.slack.calls("chat.postMessage") if c.ok]) >= 3)
        await h.slack.open_home(h.bob)
        await h.slack.open_home(h.alice)
        await until(lambda: "Ship the release" in home_of(h, h.bob), what="bob's home")
        await until(lambda: "salary" in home_of(h, h.alice), what="alice's home")
        bob_home, alice_home = home_of(h, h.bob), home_of(h, h.alice)
        assert "salary" not in bob_home and "leaked prod DB" not in bob_home
        assert "Ship the release" in alice_home
        assert "leaked prod DB" not in alice_home  # private channel: answered in its message
        # bob replays Alice's Home button: refused, the question stays open
        payload = click(ws.home_views[h.alice]["blocks"], user=h.bob, button_text="Approve")
        await h.slack.deliver(payload)
        await until(
            lambda: any(c.params.get("user") == h.bob for c in h.slack.calls("chat.postEphemeral")),
            what="bob refused",
        )
        assert not dm.done()
        # Alice's own Home button answers her DM question
        payload = click(ws.home_views[h.alice]["blocks"], user=h.alice, button_text="Approve")
        await h.slack.deliver(payload)
        answer = await dm
        assert "Approve" in json.dumps(answer.to_wire())
        priv.cancel()
        public.cancel()


async def test_team_review_home_lists_reviewers_not_answerers() -> None:
    async with SlackHarness() as h:
        opts = AskOptions(
            review=ReviewPolicy.model_validate({"approvals": 1, "reviewers": {"users": [h.bob]}})
        )
        h.provider.defaults.allowed_users = [h.alice, h.bob]  # reviewers narrow it to bob
        task = h.ask(plan(), options=opts)
        await h.posted()
        await h.slack.open_home(h.alice)
        await h.slack.open_home(h.bob)
        await until(lambda: home_of(h, h.alice) and home_of(h, h.bob), what="homes")
        await until(lambda: "Approve this plan" in home_of(h, h.bob), what="bob lists plan")
        assert "Approve this plan" not in home_of(h, h.alice)
        task.cancel()


async def test_a_private_channels_question_naming_answerers_is_on_no_non_members_home() -> None:
    """Issue 38, item 15: an allow-list does not show a private channel's question (its text
    and buttons) on the Home tab of allowed people outside that channel."""
    async with SlackHarness() as h:
        ws = h.slack.workspace
        secret = ws.add_channel("incident-private", members=[h.alice, ws.bot_user.id], private=True)
        h.provider.defaults.allowed_users = [h.alice, h.bob]
        priv = h.ask(
            one("Rotate the leaked prod DB password?", ["Rotate", "Wait"]),
            options=AskOptions(channel=secret.id),
        )
        public = h.ask(one("Ship the release?", ["Ship", "Hold"]))
        await until(lambda: len([c for c in h.slack.calls("chat.postMessage") if c.ok]) >= 2)
        await h.slack.open_home(h.bob)
        await until(lambda: "Ship the release" in home_of(h, h.bob), what="bob's home")
        assert "leaked prod DB" not in home_of(h, h.bob)
        priv.cancel()
        public.cancel()


async def test_a_reviewer_the_allow_list_leaves_out_is_not_listed() -> None:
    """Issue 38, item 3: a reviewer who may not vote (not on the operator's allow-list) is
    not shown the plan on the Home tab either."""
    async with SlackHarness() as h:
        opts = AskOptions(
            review=ReviewPolicy.model_validate({"approvals": 1, "reviewers": {"users": [h.bob]}})
        )
        h.provider.defaults.allowed_users = [h.alice]
        task = h.ask(plan(), options=opts)
        public = h.ask(one("Ship the release?", ["Ship", "Hold"]))
        await until(lambda: len([c for c in h.slack.calls("chat.postMessage") if c.ok]) >= 2)
        await h.slack.open_home(h.bob)
        await until(lambda: home_of(h, h.bob), what="bob's home")
        assert "Approve this plan" not in home_of(h, h.bob)
        task.cancel()
        public.cancel()
