"""A single reviewer's declined feedback is quoted, formatted as written, in its own
``markdown`` block above the outcome line, whole up to the 3,000 characters the modal
accepts; the outcome line says who declined. Through ``render_final`` and ``check_message``.
"""

from __future__ import annotations

import time

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.message import render_final
from adapters.slack.render.review_view import feedback_block
from adapters.slack.sandbox.blockcheck import check_message
from adapters.slack.sandbox.richtext import markdown_to_html
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
    assert out.blocks[-2] == {"type": "markdown", "text": f"> {feedback}"}  # nothing cut
    outcome = out.blocks[-1]
    assert "Declined by <@U0BOB> · " in all_text([outcome])


def test_short_feedback_is_a_formatted_quote_above_the_outcome_line() -> None:
    feedback = "Backfill at night, and **do not** drop `customer_id` :warning:\nThen ask again."
    out = render_final(_declined(feedback))
    quote, outcome = out.blocks[-2:]
    assert quote["type"] == "markdown"
    assert quote["text"] == (
        "> Backfill at night, and **do not** drop `customer_id` :warning:\n> Then ask again."
    )
    shown = markdown_to_html(quote["text"])
    assert "<b>do not</b>" in shown and "\N{WARNING SIGN}" in shown and "**" not in shown
    assert all_text([outcome]).startswith(":x: Declined by <@U0BOB> · <!date^")


def test_feedback_past_its_room_says_how_much_is_left_out() -> None:
    block = feedback_block("word " * 1000, 300)
    assert len(block["text"]) <= 300
    assert block["text"].endswith("more characters left out …]_")
