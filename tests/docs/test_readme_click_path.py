"""The README's "a click, end to end" paragraph names files that exist, in the order a
click reaches them (each named module imports or is called by the one before it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLACK = ROOT / "adapters" / "slack"


def _paragraph() -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    start = text.index("A click, end to end, file by file")
    return text[start : text.index("\n\n", start)]


def _named(paragraph: str) -> list[str]:
    return re.findall(r"`([\w/]+\.py)`", paragraph)


def test_every_file_the_click_paragraph_names_exists() -> None:
    names = _named(_paragraph())
    assert len(names) >= 15, names
    missing = [
        name
        for name in names
        if not (SLACK / name).is_file() and not (SLACK / "stores" / name).is_file()
    ]
    assert missing == [], f"the README names files that are not in adapters/slack/: {missing}"


def test_the_ack_path_order_is_the_handlers_own() -> None:
    """handler.py calls interactions → authorize → failures.settle, in that order."""
    names = _named(_paragraph())
    path = names[: names.index("stores/contract.py") + 1]
    assert path == [
        "clicks/bolt_app.py",
        "clicks/bolt_request.py",
        "clicks/listeners.py",
        "clicks/handler.py",
        "model/interactions.py",
        "asks/authorize.py",
        "asks/failures.py",
        "stores/contract.py",
    ]
    entry = (SLACK / "clicks" / "bolt_app.py").read_text("utf-8")
    entry = entry[entry.index("async def handle(") :]
    assert (
        entry.index("is_valid_request(")
        < entry.index("bolt_request(")
        < entry.index("async_dispatch(")
    )
    source = (SLACK / "clicks" / "handler.py").read_text("utf-8")
    body = source[source.index("async def handle_action") :]
    parse = body.index("parse_block_actions(")
    gate = body.index("self._gate.")
    write = body.index("await settle(")
    assert parse < gate < write
    assert "decide(" in (SLACK / "clicks" / "handler.py").read_text("utf-8")
    assert "def mutate" in (SLACK / "stores" / "contract.py").read_text("utf-8")
