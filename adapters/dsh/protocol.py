"""The host's requests as the bot reads them, pure: questions and approvals parse to typed
models (unknown keys dropped, as the host's own schema does), and the rules an answer obeys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final, Literal

from pydantic import Field

from adapters.dsh.wire import Lenient as _Lenient
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem


class HostOption(_Lenient):
    """``AskUserQuestionOption`` as the host's frame schema reads it: other keys dropped."""

    label: str
    description: str | None = None


class HostPlanReviewIntent(_Lenient):
    """``PlanReviewIntent`` as the host's frame schema reads it: other keys dropped."""

    kind: Literal["plan-review"]
    approve: str


class HostQuestion(_Lenient):
    """``AskUserQuestionItem`` as the host's frame schema reads it (§7): unknown keys dropped at
    every level (an LLM may add ``"recommended": true`` and the host relays it), an unknown
    intent ``kind`` still refused, as the host's schema does."""

    id: str
    question: str
    detail: str | None = None
    header: str | None = None
    options: list[HostOption] | None = None
    multi_select: bool | None = None
    intent: Annotated[HostPlanReviewIntent, Field(discriminator="kind")] | None = None

    def to_item(self) -> AskUserQuestionItem:
        """The seam's question from the known keys, as given (no defaults added)."""
        return AskUserQuestionItem.model_validate(self.to_wire())


class QuestionRequested(_Lenient):
    """A question waterfall's request: one or more questions."""

    questions: Annotated[list[HostQuestion], Field(min_length=1)]


class ApprovalRequested(_Lenient):
    """An approval waterfall's request: a tool waits for permission (``call_id``: its call)."""

    tool_name: str
    call_id: str | None = None
    reason: str | None = None


def approval_headline(payload: ApprovalRequested) -> str:
    """The panel's headline: the reason, or "Tool {toolName} requests privileged execution"."""
    reason = (payload.reason or "").strip()
    return reason or f"Tool {payload.tool_name} requests privileged execution"


# --------------------------------------------------------------------------- matchesQuestions

# ECMAScript's WhiteSpace and LineTerminator, which ``String.prototype.trim`` removes. Not
# ``str.strip()``'s set: JS trims U+FEFF but not U+001C-U+001F or U+0085.
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _labels(labels: Sequence[str]) -> str:
    return ", ".join(repr(label) for label in labels)


def answer_problem(
    questions: Sequence[AskUserQuestionItem], answer: AskUserQuestionAnswer
) -> str | None:
    """Why the host's ``matchesQuestions`` would refuse ``answer`` (first rule broken), or None."""
    answers = answer.answers
    if len(answers) != len(questions):
        return f"expected {len(questions)} answer(s), one per question in order, got {len(answers)}"
    for position, (item, question) in enumerate(zip(answers, questions, strict=True), 1):
        if item.id != question.id:
            return (
                f"answer #{position} has id {item.id!r} but question #{position} is "
                f"{question.id!r}; answers go in question order"
            )
        selected = item.selected
        if len(set(selected)) != len(selected):
            repeated = [label for index, label in enumerate(selected) if label in selected[:index]]
            return f"answer to {question.id!r} selects {repeated[0]!r} more than once"
        if item.custom is not None and item.custom.strip(_JS_WHITESPACE) == "":
            return f"answer to {question.id!r} has blank custom text; leave custom out instead"
        if not question.is_multi_select:
            if item.custom is not None and selected:
                return (
                    f"question {question.id!r} is single-select: custom text replaces the "
                    "choice, so selected must be [] when custom is given "
                    f"(got [{_labels(selected)}])"
                )
            if len(selected) > 1:
                return (
                    f"question {question.id!r} is single-select but {len(selected)} labels "
                    f"are selected ({_labels(selected)})"
                )
        options = question.option_labels
        for label in selected:
            if label not in options:
                if not options:
                    return (
                        f"question {question.id!r} has no options, so selected must be []; "
                        f"got {label!r}"
                    )
                return (
                    f"answer to {question.id!r} selects {label!r}, which is not one of its "
                    f"options ({_labels(options)})"
                )
    return None
