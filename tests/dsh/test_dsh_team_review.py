"""Plan reviews from a dsh host under the bot's default review policy, and their revisions.

The host's plan review (``exit_plan_mode``) is decided by a team when ``DSH_REVIEW_POLICY``
is set; the session's next plan review after a decline shows what changed.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.questions import ReviewPolicy
from bot.questions.models import AskUserQuestionItem
from tests.dsh.test_dsh_client import (
    PLAN,
    SESSION_A,
    TIMEOUT,
    RigFactory,
    answer_of,
    envelope,
    eventually,
    make_rig,
    shown,
)
from tests.slack.render.test_review_wording import diff_rows

__all__ = ["make_rig"]  # the rig fixture, shared with the dsh client's tests


@pytest.mark.slow
async def test_a_host_plan_review_waits_for_the_default_policy(make_rig: RigFactory) -> None:
    rig = await make_rig(review=ReviewPolicy(approvals=2))
    bob = rig.slack.workspace.add_user("bob").id
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [PLAN])
        message = await rig.message()
        assert "Waiting for approval* — 0 of 2 approvals so far" in shown(message.blocks)
        await rig.click(message, "Approve")
        await eventually(lambda: "1 of 2 approvals so far" in shown(message.blocks), "the tally")
        assert not future.done() and rig.host.responses == []
        status, _ = await rig.slack.deliver(rig.slack.click(message, user=bob, text="Approve"))
        assert status == 200
        approved = {"id": "plan-review", "selected": ["Approve"]}
        assert await answer_of(future) == {"answers": [approved]}
        assert rig.host.responses == [envelope(rpc_id, approved)]
        text = await rig.final(message)
        assert f"Approved by <@{rig.alice}>, <@{bob}>" in text
        assert rig.posts == 1


@pytest.mark.slow
async def test_the_sessions_next_plan_after_a_decline_shows_what_changed(
    make_rig: RigFactory,
) -> None:
    rig = await make_rig()
    revised = AskUserQuestionItem.model_validate(
        {
            **PLAN.model_dump(mode="json", by_alias=True, exclude_unset=True),
            "detail": "# Plan\n\n1. Add the column.\n2. Backfill it in batches.\n3. Ship.",
        }
    )
    async with asyncio.timeout(TIMEOUT):
        _, first = rig.host.ask(SESSION_A, [PLAN])
        message = await rig.message()
        await rig.click(message, "Decline with feedback…")
        await rig.submit_modal("Backfill in batches.")
        assert (await answer_of(first))["answers"][0]["custom"] == "Backfill in batches."
        _, second = rig.host.ask(SESSION_A, [revised])
        again = await rig.message(2)
        text = shown(again.blocks)
        assert "the previous review>" in text and "Revises" in text
        assert "> Backfill in batches." in text
        rows = diff_rows(again.blocks)
        assert rows[rows.index("− 2. Backfill it.") + 1] == "+ 2. Backfill it in batches."
        await rig.click(again, "Approve")
        assert (await answer_of(second))["answers"][0]["selected"] == ["Approve"]
        # Approved: the session's next plan review is a fresh one again.
        _, third = rig.host.ask(SESSION_A, [PLAN])
        fresh = await rig.message(3)
        assert "Revises" not in shown(fresh.blocks)
        await rig.click(fresh, "Approve")
        await answer_of(third)


def test_the_default_policy_is_a_json_setting_checked_at_start() -> None:
    import pytest

    from bot.settings.config import ConfigError, load_settings

    wire = '{"approvals": 2, "required": [{"usergroups": ["S0LEADS"]}]}'
    policy = load_settings({"DSH_REVIEW_POLICY": wire}, None).dsh_review_policy
    assert policy is not None and policy.approvals == 2
    assert policy.required[0].usergroups == ["S0LEADS"]
    assert load_settings({}, None).dsh_review_policy is None
    with pytest.raises(ConfigError, match="DSH_REVIEW_POLICY"):
        load_settings({"DSH_REVIEW_POLICY": '{"approvals": 0}'}, None)
    with pytest.raises(ConfigError, match="DSH_REVIEW_POLICY"):
        load_settings({"DSH_REVIEW_POLICY": '{"reviewers": {"users": ["<!here>"]}}'}, None)
