"""Declined feedback the modal accepts (up to 3,000 characters) is in the record whole.

Long feedback gets its own ``rich_text`` block (literal: no zero-width spaces lengthen
it); the outcome line still says who declined. Through ``render_final`` and
``check_message``.
"""

from __future__ import annotations

import time

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks import render_final
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from tests.slack_harness import all_text


def _declined(feedback: str) -> PendingRecord:
    question = AskUserQuestionItem.model_validate(
        {
            "id": "plan-review",
            "question": "Approve?",
            "detail": "# Plan",
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
    )
    answer = {"answers": [{"id": "plan-review", "selected": [], "custom": feedback}]}
    return PendingRecord(
        id="0123456789abcdef0123",
        owner="p",
        channel="C1",
        questions=[question],
        state="answered",
        answered_by="U0BOB",
        answered_by_name="bob",
        finished_at=time.time(),
        answer=AskUserQuestionAnswer.model_validate(answer),
    )


def test_long_declined_feedback_is_in_the_record_whole() -> None:
    items = ", ".join(f"user_id_{i} to account_id_{i}" for i in range(98))
    feedback = f"Rename: {items}. LAST: do not touch *prod*."
    assert len(feedback) <= 3000  # what the feedback modal accepts
    out = render_final(_declined(feedback))
    assert check_message(out.blocks, out.text) == []
    leaves = [
        leaf["text"]
        for block in out.blocks
        if block["type"] == "rich_text"
        for section in block["elements"]
        for leaf in section["elements"]
    ]
    assert f"«{feedback}»" in leaves  # as typed, nothing cut, no zero-width spaces
    outcome = [b for b in out.blocks if b["type"] == "context"][-1]
    assert "Declined by <@U0BOB>" in all_text([outcome])


def test_short_declined_feedback_stays_in_the_outcome_line() -> None:
    out = render_final(_declined("Use the v2 API instead."))
    outcome = [b for b in out.blocks if b["type"] == "context"][-1]
    assert "Declined by <@U0BOB> — «Use the v2 API instead.»" in all_text([outcome])
