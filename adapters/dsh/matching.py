"""The host's ``matchesQuestions`` check: would it take this answer for these questions?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

__all__ = ["answer_problem"]

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
    # §6.1 minus the sessionId check, which needs the pending ask: compare it separately.
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
