"""Pure decisions: how a request is presented (plan review, buttons, menu, text, form)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from bot.questions.models import AskUserQuestionItem

Layout = Literal["plan", "tap", "menu", "text", "form"]

MAX_TAP_OPTIONS: Final = 5


@dataclass(frozen=True, slots=True)
class PlanReview:
    """A request that the plan-review presentation claims."""

    approve: int
    decline: int | None


def plan_review_of(questions: Sequence[AskUserQuestionItem]) -> PlanReview | None:
    """The plan review this request is, or ``None`` for the generic flow (§6.2 rules)."""
    if len(questions) != 1:
        return None
    question = questions[0]
    intent = question.intent
    options = question.options or []
    if intent is None or intent.kind != "plan-review" or question.detail is None:
        return None
    if question.is_multi_select or len(options) > 2:
        return None
    labels = [option.label for option in options]
    if intent.approve not in labels:
        return None
    approve = labels.index(intent.approve)
    decline = next((i for i, label in enumerate(labels) if label != intent.approve), None)
    return PlanReview(approve, decline)


def layout_of(questions: Sequence[AskUserQuestionItem]) -> Layout:
    """How a request is presented."""
    if plan_review_of(questions) is not None:
        return "plan"
    if len(questions) == 1:
        question = questions[0]
        options = question.options or []
        if not options:
            return "text"
        if not question.is_multi_select:
            return "tap" if len(options) <= MAX_TAP_OPTIONS else "menu"
    return "form"
