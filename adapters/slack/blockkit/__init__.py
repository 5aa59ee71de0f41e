"""Block Kit's published limits, checked before Slack sees a payload (pure). Imports nothing
else of the project."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from adapters.slack.blockkit.checker import Checker
from adapters.slack.blockkit.limits import (
    HOME_VIEW,
    MAX_BLOCKS_MESSAGE,
    MAX_BLOCKS_MODAL,
    MAX_MARKDOWN_TOTAL,
    MAX_MESSAGE_TEXT,
    MESSAGE_TEXT_BUDGET,
    RECOMMENDED_MESSAGE_TEXT,
    VIEW,
)
from adapters.slack.blockkit.problems import INVALID_BLOCKS, Problem, kind_of, too_long

__all__ = [
    "INVALID_BLOCKS",
    "MSG_BLOCKS_TOO_LONG",
    "MSG_TOO_LONG",
    "Problem",
    "block_text_length",
    "check_message",
    "check_view",
    "message_problems",
    "view_problems",
]

MSG_BLOCKS_TOO_LONG: Final = "msg_blocks_too_long"
MSG_TOO_LONG: Final = "msg_too_long"

_DISPLAY_TYPES: Final = frozenset({"plain_text", "mrkdwn", "markdown", "text", "link"})


def check_message(blocks: list[dict[str, Any]], text: str | None = None) -> list[str]:
    """Every limit a message with these ``blocks`` and top-level ``text`` breaks."""
    return [str(p) for p in message_problems(blocks, text) if not p.warning]


def check_view(view: dict[str, Any]) -> list[str]:
    """Every limit this modal (or App Home ``home``) ``view`` breaks."""
    return [str(p) for p in view_problems(view) if not p.warning]


def message_problems(blocks: object, text: object = None) -> list[Problem]:
    """Errors and warnings for a message, as ``Problem`` records."""
    checker = Checker(modal=False)
    checker.blocks(blocks, MAX_BLOCKS_MESSAGE)
    if checker.markdown_total > MAX_MARKDOWN_TOTAL:
        checker.add(
            "blocks",
            f"{checker.markdown_total} characters in markdown blocks, "
            f"Slack allows at most {MAX_MARKDOWN_TOTAL} in one message",
        )
    total = block_text_length(blocks) if isinstance(blocks, list) else 0
    if total > MESSAGE_TEXT_BUDGET:
        checker.add(
            "blocks",
            f"{total} characters of text in all blocks, "
            f"Slack allows at most {MESSAGE_TEXT_BUDGET} (msg_blocks_too_long)",
            MSG_BLOCKS_TOO_LONG,
        )
    if text is not None:
        if not isinstance(text, str):
            checker.add("text", "must be a string")
        elif len(text) > MAX_MESSAGE_TEXT:
            checker.add("text", too_long(len(text), MAX_MESSAGE_TEXT), MSG_TOO_LONG)
        elif len(text) > RECOMMENDED_MESSAGE_TEXT:
            checker.problems.append(
                Problem(
                    "text",
                    f"{len(text)} characters, Slack recommends at most {RECOMMENDED_MESSAGE_TEXT}",
                    MSG_TOO_LONG,
                    warning=True,
                )
            )
    return checker.problems


def view_problems(view: object) -> list[Problem]:
    """Errors for a modal view (or an App Home ``home`` view), as ``Problem`` records."""
    checker = Checker(modal=True)
    if not isinstance(view, Mapping):
        checker.add("view", f"must be an object, got {kind_of(view)}")
        return checker.problems
    if view.get("type") not in ("modal", "home"):
        checker.add("type", f"must be 'modal' or 'home', got {view.get('type')!r}")
    if view.get("type") == "home":
        for key in ("title", "close", "submit"):
            if key in view:
                checker.add(key, "a home view has none")
        checker.rules(view, "", HOME_VIEW)
    else:
        checker.rules(view, "", VIEW)
    blocks = view.get("blocks")
    if blocks is None:
        checker.add("blocks", "required")
    else:
        checker.blocks(blocks, MAX_BLOCKS_MODAL)
    has_input = isinstance(blocks, list) and any(
        isinstance(b, Mapping) and b.get("type") == "input" for b in blocks
    )
    if has_input and view.get("submit") is None:
        checker.add("submit", "required when the view has an input block")
    return checker.problems


def block_text_length(blocks: Iterable[object]) -> int:
    """Characters of text in ``blocks``, as counted against ``MESSAGE_TEXT_BUDGET``."""
    return sum(_display_text(block) for block in blocks)


def _display_text(node: object) -> int:
    if isinstance(node, list):
        return sum(_display_text(n) for n in node)
    if not isinstance(node, Mapping):
        return 0
    total = 0
    text = node.get("text")
    if isinstance(text, str) and node.get("type") in _DISPLAY_TYPES:
        total += len(text)
    for key, value in node.items():
        if key != "text" or not isinstance(value, str):
            total += _display_text(value)
    return total
