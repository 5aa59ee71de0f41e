"""A modal's detail is cut as shown: escaping (``&`` is ``&amp;``) and revealed hiding
characters (``⟨U+200B⟩``) lengthen it after a cut of the raw text, and Slack refused the
modal (a section over 3,000 characters), so the question could not be answered or declined."""

from __future__ import annotations

import pytest

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.modals import MODAL_DETAIL, render_text_modal
from adapters.slack.render.mrkdwn import escape, reveal
from adapters.slack.sandbox.blockcheck import check_view
from bot.questions.models import AskUserQuestionItem

PLAN_INTENT = {"kind": "plan-review", "approve": "Approve"}
PLAN_OPTIONS = [{"label": "Approve"}, {"label": "Keep planning"}]


def _record(detail: str, *, plan: bool) -> PendingRecord:
    extra = {"intent": PLAN_INTENT, "options": PLAN_OPTIONS} if plan else {}
    item = AskUserQuestionItem.model_validate(
        {"id": "q", "question": "Approve?" if plan else "Why?", "detail": detail, **extra}
    )
    return PendingRecord(id="0123456789abcdef0123", channel="C1", questions=[item])


@pytest.mark.parametrize(
    "detail",
    ["\u200b" * 376, "&" * 601, "R&D <-> Q&A <<>> &&\n" * 75, "```\n" + "<&>" * 900],
    ids=["hidden", "ampersands", "escaped-plan", "fenced"],
)
@pytest.mark.parametrize("plan", [True, False], ids=["feedback", "answer"])
def test_a_modal_with_a_long_escaped_or_hidden_detail_is_one_slack_takes(
    detail: str, plan: bool
) -> None:
    view = render_text_modal(_record(detail, plan=plan), 0)
    assert check_view(view) == []
    shown = " ".join(str(b.get("text", {}).get("text", "")) for b in view["blocks"])
    long = len(escape(detail) if plan else reveal(detail)) > MODAL_DETAIL
    assert ("rest" in shown) == long  # says where the rest is, when cut
