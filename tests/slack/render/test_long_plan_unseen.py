"""A plan longer than its message says exactly how much is not on screen (issue 39, item 2):
the numbered steps and the characters the thread holds, on the open message and the record."""

from __future__ import annotations

import html
import re

import pytest

from adapters.slack.render.approval import render_record
from tests.slack.render.test_message_budget import plan, record, shown_details

pytestmark = pytest.mark.timeout(30)

STEPS = "".join(
    f"{n}. Step {n}: migrate shard {n} and check it. " + "Careful work here. " * 25 + "\n"
    for n in range(1, 41)
)


def _unseen(text: str) -> tuple[str, str, int]:
    found = re.search(r"_… steps (\d+)–(\d+) and ([\d,]+) more characters are in the thread", text)
    assert found is not None, text[-300:]
    return found.group(1), found.group(2), int(found.group(3).replace(",", ""))


def test_a_long_plan_says_which_steps_and_how_many_characters_are_unseen() -> None:
    rendered = render_record(record(plan(STEPS)))
    (shown,) = shown_details(rendered)
    first, last, characters = _unseen(shown)
    body = html.unescape(shown[: shown.index("\n\n_… steps")])
    assert STEPS.startswith(body) and characters == len(STEPS) - len(body)
    assert f"\n{first}. Step {first}:" in STEPS[len(body) - 1 :] and last == "40"
    assert f"{int(first) - 1}. Step" in body and f"{first}. Step {first}:" not in body
    thread = "".join(html.unescape(part[1]["text"]) for part in rendered.thread)
    assert len(thread) == characters


def test_a_long_detail_without_steps_counts_its_characters() -> None:
    detail = "word " * 4000
    rendered = render_record(record({"detail": detail, "options": [{"label": "A"}]}))
    (shown,) = shown_details(rendered)
    found = re.search(r"_… ([\d,]+) more characters are in the thread below\._$", shown)
    assert found is not None, shown[-200:]
    assert int(found.group(1).replace(",", "")) == len(detail) - len(
        html.unescape(shown[: found.start()].rstrip("\n"))
    )
