"""Issue 38, item 3: a plan review's reviewers narrow the operator's allow-list, never widen it.

An agent asks with ``review.reviewers``; with ``SLACK_ALLOWED_USERS`` (or user groups) set,
only people on both may vote: an agent cannot choose approvers the operator did not allow.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.slack.asks.test_slack_provider import plan
from tests.slack.clicks.test_team_review import policy, vote
from tests.slack_harness import SlackHarness, all_text, until

pytestmark = pytest.mark.timeout(30)


async def _refused(h: SlackHarness, message: Any, user: str) -> None:
    await vote(h, message, user, "Approve")
    note = await until(lambda: h.ephemerals(user))
    assert "not" in note[-1].text.lower()
    assert f"<@{user}> approved" not in all_text(h.current(message).blocks)


@pytest.mark.parametrize("allowed_by", ["users", "usergroups"])
async def test_a_reviewer_the_operator_did_not_allow_cannot_approve(allowed_by: str) -> None:
    h = SlackHarness()  # the operator's allow-list is set before the provider starts
    if allowed_by == "users":
        h._provider_options["allowed_users"] = [h.alice, h.bob]
    else:
        team = h.slack.workspace.add_usergroup("operators", [h.alice, h.bob])
        h._provider_options["allowed_usergroups"] = [team.id]
    async with h:
        task = h.ask(plan(), options=policy(approvals=1, reviewers={"users": [h.carol, h.alice]}))
        message = await h.posted()
        await _refused(h, message, h.carol)
        assert not task.done()
        await _refused(h, message, h.bob)  # allowed, but not a reviewer: still refused
        await vote(h, message, h.alice, "Approve")
        assert (await task).answers[0].selected == ["Approve"]
