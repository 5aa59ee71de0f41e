"""The README's "a click, end to end" paragraph names files that exist, in the order a click
reaches them, and from the listener to the resolved waiter it reads in at most eight files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLACK = ROOT / "adapters" / "slack"

pytestmark = pytest.mark.timeout(30)


def _paragraph(page: Path) -> str:
    text = page.read_text("utf-8")
    start = text.index("A click, end to end, file by file")
    return text[start : text.index("\n\n", start)]


def _named(paragraph: str) -> list[str]:
    return re.findall(r"`([\w/]+\.py)`", paragraph)


@pytest.mark.parametrize("page", ["README.md", "docs/design.md"])
def test_every_file_the_click_paragraph_names_exists(page: str) -> None:
    names = _named(_paragraph(ROOT / page))
    missing = [name for name in names if not (SLACK / name).is_file()]
    assert missing == [], f"{page} names files that are not in adapters/slack/: {missing}"


def test_from_the_listener_to_the_resolved_waiter_a_click_reads_in_seven_files() -> None:
    names = _named(_paragraph(ROOT / "README.md"))
    path = names[names.index("clicks/handler.py") : names.index("stores/watches.py") + 1]
    assert path == [
        "clicks/handler.py",
        "model/interactions.py",
        "asks/authorize.py",
        "stores/contract.py",
        "clicks/transitions.py",
        "stores/memory.py",
        "stores/watches.py",
    ]
    assert names[0] == "clicks/bolt_app.py"


def test_each_step_calls_the_next_in_the_order_named() -> None:
    """The handler parses, authorizes, then settles; settle's mutate decides with the
    handler's change, which asks transitions; the store's write wakes the watches."""
    entry = (SLACK / "clicks" / "bolt_app.py").read_text("utf-8")
    entry = entry[entry.index("async def handle(") :]
    assert (
        entry.index("is_valid_request(")
        < entry.index("bolt_request(")
        < entry.index("async_dispatch(")
    )
    handler = (SLACK / "clicks" / "handler.py").read_text("utf-8")
    assert "handler.handle_action(" in handler[handler.index("def register_listeners") :]
    body = handler[handler.index("async def _handle_action") :]
    assert body.index("self._outside_cached(") < body.index("self._gate.")
    assert handler.index("parse_block_actions(") < handler.index("await settle(")
    assert "decide(" in handler and "ClickAuthority" in handler
    contract = (SLACK / "stores" / "contract.py").read_text("utf-8")
    assert "async def mutate" in contract
    assert re.search(r"^(async def settle\(|settle = )", contract, re.MULTILINE)
    memory = (SLACK / "stores" / "memory.py").read_text("utf-8")
    assert "WatchRegistry" in memory
