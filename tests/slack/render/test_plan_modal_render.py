"""The whole-plan modal within Slack's limits (issue 39, item 2): a section holds 3,000
characters and a modal 100 blocks; a longer plan is split across sections (code fences
closed and reopened at each cut), and one too long even for that says where the rest is."""

from __future__ import annotations

import re

import pytest

from adapters.slack.blockkit import MAX_BLOCKS_MODAL, MAX_SECTION_TEXT
from adapters.slack.render.blocks.modals import render_plan_modal
from adapters.slack.render.mrkdwn import escape
from adapters.slack.sandbox.blockcheck import view_problems
from tests.slack.render.test_long_plan_unseen import STEPS
from tests.slack.render.test_message_budget import plan, record

pytestmark = pytest.mark.timeout(30)


def sections(view: dict[str, object]) -> list[str]:
    blocks = view["blocks"]
    assert isinstance(blocks, list)
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


def test_a_long_plan_is_split_across_sections_each_within_a_section() -> None:
    text = "a & b < c > d " * 3000  # 42,000 characters, 57,000 once escaped
    view = render_plan_modal(record(plan(text)))
    assert view_problems(view) == []
    shown = sections(view)
    assert len(shown) > 19 and all(len(s) <= MAX_SECTION_TEXT for s in shown)
    assert "".join(shown) == escape(text)  # every character, in order, no entity cut


def test_a_plan_longer_than_a_modal_holds_says_where_the_rest_is() -> None:
    text = STEPS * 20  # about 416,000 characters: more than 100 sections
    view = render_plan_modal(record(plan(text)))
    assert view_problems(view) == []
    blocks = view["blocks"]
    assert isinstance(blocks, list) and len(blocks) == MAX_BLOCKS_MODAL
    shown = "".join(sections(view))
    assert text.startswith(shown)
    said = blocks[-2]["elements"][0]["text"]
    rest = int(re.search(r"([\d,]+) more characters", said).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert rest == len(text) - len(shown) and "in the thread of the plan's message" in said
    assert blocks[-1]["type"] == "actions"


def test_a_code_block_cut_between_sections_is_closed_and_reopened() -> None:
    text = "## Deploy\n\n```bash\n" + "kubectl rollout status deploy/api\n" * 300 + "```\n**Done.**"
    shown = sections(render_plan_modal(record(plan(text))))
    assert len(shown) >= 4
    assert all(s.count("```") % 2 == 0 for s in shown)  # each section's code block closed
    assert all(s.startswith("```") for s in shown[1:])  # and reopened where it goes on
    assert shown[0].startswith("*Deploy*") and shown[-1].endswith("*Done.*")
    assert "bash" not in "".join(shown)
