"""A declined team review says its feedback once: in the decliner's vote line, not again in
another quote style on the outcome line (issue 39, item 6)."""

from __future__ import annotations

import pytest

from adapters.slack.model.tally import Vote
from adapters.slack.render.approval import render_record
from bot.questions.models import AskUserQuestionAnswer
from bot.questions.review import ReviewPolicy
from tests.slack.render.test_message_budget import plan, record
from tests.slack_harness import all_text

pytestmark = pytest.mark.timeout(30)


def test_the_feedback_of_a_declined_team_review_is_shown_once() -> None:
    feedback = "Phase 3 needs a rollback test first."
    vote = Vote(user="U0BOB0001", name="bob", approve=False, feedback=feedback, at=1.7e9)
    answer = {"answers": [{"id": "plan-review", "selected": [], "custom": f"bob: {feedback}"}]}
    ended = record(plan("1. Go"), review=ReviewPolicy(approvals=2), votes=[vote]).next(
        state="answered", answer=AskUserQuestionAnswer.model_validate(answer), finished_at=1.7e9
    )
    text = all_text(render_record(ended).blocks)
    assert text.count("Phase 3 needs a rollback test first") == 1, text
    assert "Declined by <@U0BOB0001>" in text
