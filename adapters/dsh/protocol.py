"""The host's wire as the bot reads it, pure: JSON decoded with bounded nesting and no lone
surrogates; questions and approvals parsed to typed models (unknown keys dropped, as the
host's own schema does); one-line errors; the rules an answer obeys."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Final

from pydantic import Field, ValidationError

from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem, WireModel

MAX_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted in a frame (the real host's is about 10)."""

REPLACEMENT: Final = "\ufffd"
"""What a lone UTF-16 surrogate in host text becomes."""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
LENIENT: Final = "ignore"
"""How a host request's models take unknown keys (zod's default: dropped); the input comes
from ``load_json`` (no lone surrogates)."""


def scrub_text(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (JSON may escape half a pair) replaced by
    U+FFFD, since no UTF-8 encoder takes one."""
    if text.isascii():
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def _scrub(value: Any, depth: int = 1) -> Any:
    """Decoded JSON with every lone surrogate in its strings, keys too, replaced by U+FFFD;
    ``ValueError`` past ``MAX_DEPTH`` levels (so it recurses at most that deep)."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, list | dict) and depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, list):
        return [_scrub(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {scrub_text(key): _scrub(item, depth + 1) for key, item in value.items()}
    return value


def load_json(text: str | bytes, what: str) -> Any:
    """Decode ``text``; ``ValueError`` names ``what`` and the problem (never RecursionError)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to decode") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from exc
    try:
        return _scrub(data)
    except ValueError as exc:
        raise ValueError(f"{what} is {exc}") from None


def describe_validation_error(error: ValidationError) -> str:
    """Pydantic's errors as one line: ``loc.path: message; …`` (wire names)."""
    parts = []
    for item in error.errors(include_url=False):
        path = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {message}" if path else message)
    return "; ".join(parts)


class QuestionRequested(WireModel):
    """A question waterfall's request: one or more questions. Read with ``LENIENT`` (§7):
    unknown keys dropped at every level (an LLM may add ``"recommended": true`` and the host
    relays it), an unknown intent ``kind`` still refused, as the host's schema does."""

    questions: Annotated[list[AskUserQuestionItem], Field(min_length=1)]


class ApprovalRequested(WireModel):
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
