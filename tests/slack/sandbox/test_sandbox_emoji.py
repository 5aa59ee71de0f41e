"""The sandbox page shows what the bot itself sends as Slack would.

1. Every ``:emoji:`` code the bot writes into a message (a string literal anywhere in the
   Slack provider, its blocks, the DSH adapter or ``bot/``, docstrings aside) is one the
   sandbox shows as its character, so no ``:alarm_clock: Answer by …`` shows as raw text.
2. On a phone (390x844) a confirm dialog naming a long command (a tool approval's "Allow
   once?", a 150-character token with no break in it) stays within the screen: the dialog
   and both of its buttons lie inside the viewport's width (a screenshot is saved).
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from playwright.async_api import Browser, expect

from adapters.slack.model.record import ApprovalView
from adapters.slack.render.outcomes import ICONS
from adapters.slack.sandbox.richtext import EMOJI, mrkdwn_to_html, plain_to_html
from bot.app.runtime import Runtime
from bot.questions.models import AskOptions
from tests.slack.sandbox import test_sandbox_browser as _browser_module
from tests.slack.sandbox.test_sandbox_browser import TEST_BUDGET, open_page, pinned
from tests.source_tree import parse

runtime = _browser_module.runtime  # the fixtures of the sandbox browser tests
browser = _browser_module.browser

ROOT: Final = Path(__file__).resolve().parents[3]
SOURCES: Final = (
    "adapters/slack/*.py",
    *(f"adapters/slack/{package}/**/*.py" for package in ("asks", "clicks", "home", "model")),
    *(f"adapters/slack/{package}/**/*.py" for package in ("pacing", "render")),
    "adapters/dsh/**/*.py",
    "bot/**/*.py",
)
"""What the bot sends from (the sandbox is the stand-in; the stores' keys are no text)."""

CODE: Final = re.compile(r"(?<![\w:])(:[a-z0-9_+\-]+:)(?![\w:])")
"""An emoji code standing on its own (not ``p:req:`` or ``08:00:00``)."""

PHONE: Final = {"width": 390, "height": 844}


def browser_test(test: Any) -> Any:
    """The marks of the sandbox browser tests (skipped without Chromium, outside CI)."""
    for mark in _browser_module.pytestmark:
        test = mark(test)
    return test


# ---------------------------------------------------------------------------------------
# 1. Every emoji code the bot sends has a character in the sandbox


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in node.body[:1]:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    found.add(id(statement.value))
    return found


def _literals(path: Path) -> Iterator[str]:
    """Every string literal of a module but its docstrings; an f-string's interpolations
    stand as ``X`` (a word character, so ``f"{prefix}:req:"`` is no code)."""
    tree = parse(path.read_text(encoding="utf-8"))
    skipped = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
            yield "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "X"
                for v in node.values
            )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
        ):
            yield node.value


def sent_codes() -> dict[str, list[str]]:
    """Each emoji code in the bot's string literals, with the files it is in."""
    codes: dict[str, list[str]] = {}
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            for text in _literals(path):
                for match in CODE.finditer(text):
                    codes.setdefault(match[1], []).append(str(path.relative_to(ROOT)))
    return codes


@pytest.mark.slow
def test_the_scan_finds_the_bots_emoji() -> None:
    codes = sent_codes()
    # The ones a person sees most (a deadline, an outcome, an escalation); no store key.
    assert {":alarm_clock:", ":white_check_mark:", ":rotating_light:", ":x:"} <= set(codes)
    assert ":memory:" not in codes and ":req:" not in codes


@pytest.mark.slow
def test_every_emoji_code_the_bot_sends_shows_as_its_character_in_the_sandbox() -> None:
    codes = sent_codes()
    missing = {code: files for code, files in codes.items() if code.strip(":") not in EMOJI}
    assert missing == {}
    for code in codes:
        shown = mrkdwn_to_html(f"{code} Answer by noon")
        assert code not in shown and shown.endswith(" Answer by noon")
        assert code not in plain_to_html(code)


def test_every_outcome_icon_shows_as_its_character() -> None:
    for verb, icon in ICONS.items():
        assert icon.strip(":") in EMOJI, verb


@pytest.mark.parametrize(
    ("code", "character"),
    [
        ("alarm_clock", "\N{ALARM CLOCK}"),
        ("rotating_light", "\N{POLICE CARS REVOLVING LIGHT}"),
        ("fast_forward", "\N{BLACK RIGHT-POINTING DOUBLE TRIANGLE}"),
        ("raised_hand", "\N{RAISED HAND}"),
        ("repeat", "\N{CLOCKWISE RIGHTWARDS AND LEFTWARDS OPEN CIRCLE ARROWS}"),
        ("thread", "\N{SPOOL OF THREAD}"),
    ],
)
def test_the_bots_own_codes_are_slacks_characters(code: str, character: str) -> None:
    assert EMOJI.get(code) == character


# ---------------------------------------------------------------------------------------
# 2. A confirm dialog on a phone stays on the screen

TOKEN: Final = "x" * 150
COMMAND: Final = f"rm -rf /srv/data/cache && echo {TOKEN} > /srv/outside.txt"


@browser_test
async def test_an_allow_once_confirm_fits_a_phone(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, viewport=PHONE, has_touch=True)
        view = ApprovalView(
            tool_name="bash", headline="escalate sandbox to danger-full-access", command=COMMAND
        )
        options = AskOptions(key="dsh:phone-confirm", label="session 3f2a9c1e")
        decided = asyncio.ensure_future(runtime.provider.ask_approval(view, options=options))
        panel = await pinned(page, "escalate sandbox")
        await panel.get_by_role("button", name="Allow once").click()
        confirm = page.get_by_test_id("confirm")
        await expect(confirm).to_contain_text("Allow once?")
        await expect(confirm).to_contain_text(TOKEN)
        path = tmp_path / "phone-allow-once-confirm.png"
        await page.screenshot(path=path)
        boxes = await page.evaluate(
            """() => {
                const box = (el) => {
                    const r = el.getBoundingClientRect();
                    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom};
                };
                const dialog = document.querySelector('[data-testid=confirm]');
                const parts = {dialog: box(dialog)};
                for (const id of ['confirm-ok', 'confirm-deny']) {
                    parts[id] = box(dialog.querySelector(`[data-testid=${id}]`));
                }
                for (const el of dialog.querySelectorAll('*')) {
                    const r = el.getBoundingClientRect();
                    if (r.right > (parts.widest || 0)) parts.widest = r.right;
                }
                parts.viewport = {width: window.innerWidth, height: window.innerHeight,
                                  scroll: document.documentElement.scrollWidth};
                return parts;
            }"""
        )
        width, height = boxes["viewport"]["width"], boxes["viewport"]["height"]
        assert width == PHONE["width"]
        for name in ("dialog", "confirm-ok", "confirm-deny"):
            left, right = boxes[name]["left"], boxes[name]["right"]
            top, bottom = boxes[name]["top"], boxes[name]["bottom"]
            assert left >= 0 and right <= width, (name, boxes)
            assert top >= 0 and bottom <= height, (name, boxes)
        assert boxes["widest"] <= width, boxes  # the command wraps, nothing runs off
        await confirm.get_by_test_id("confirm-ok").click()
        record = await asyncio.wait_for(decided, 10)
        assert (record.state, record.decision) == ("answered", "allowed-once")
        assert errors == []
    print(path)
