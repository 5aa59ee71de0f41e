"""The Home tab marks plan reviews and tool approvals (issue 39, item 6)."""

from __future__ import annotations

import pytest

from adapters.slack.home.tab import render_home
from adapters.slack.model.record import ApprovalView, PendingRecord
from tests.slack.render.test_message_budget import plan, record
from tests.slack_harness import all_text

pytestmark = pytest.mark.timeout(30)


def test_plan_reviews_and_approvals_are_marked_and_questions_are_not() -> None:
    view = ApprovalView(tool_name="bash", headline="Run the release script", command="./r.sh")
    approval = PendingRecord(id="1" * 20, questions=[], channel="C0Q", approval=view)
    question = record({"question": "Deploy?", "options": [{"label": "Yes"}]}, id="2" * 20)
    reviewed = record(plan("1. Go"), id="3" * 20)
    text = all_text(render_home([approval, question, reviewed])["blocks"])
    assert "Tool approval: \nRun the release script" in text  # (all_text: one line a piece)
    assert "Plan review: \nApprove this plan" in text
    assert "review: Deploy?" not in text and "approval: Deploy?" not in text
