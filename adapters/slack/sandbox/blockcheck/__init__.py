"""Every Block Kit rule Slack documents, checked as Slack checks a payload: the stand-in's
``invalid_blocks``, and the test suite's word on every rendering."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.slack.blockkit import MAX_BLOCKS_MESSAGE, MAX_BLOCKS_MODAL, Problem, totals
from adapters.slack.sandbox.blockcheck.checker import Checker
from adapters.slack.sandbox.blockcheck.rules import kind_of
from adapters.slack.sandbox.blockcheck.table import HOME_VIEW, VIEW

__all__ = ["check_message", "check_view", "message_problems", "view_problems"]


def check_message(blocks: list[dict[str, Any]], text: str | None = None) -> list[str]:
    """Every rule a message with these ``blocks`` and top-level ``text`` breaks."""
    return [str(p) for p in message_problems(blocks, text) if not p.warning]


def check_view(view: dict[str, Any]) -> list[str]:
    """Every rule this modal (or App Home ``home``) ``view`` breaks."""
    return [str(p) for p in view_problems(view) if not p.warning]


def message_problems(blocks: object, text: object = None) -> list[Problem]:
    """Errors and warnings for a message, as ``Problem`` records."""
    checker = Checker(modal=False)
    checker.blocks(blocks, MAX_BLOCKS_MESSAGE)
    return checker.problems + totals(blocks, text)


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
