"""The "Decline with feedback…" modal (issue 39, item 5): the text box first, then the plan as
formatted text (headings and bold as Slack shows them, code kept as code), never raw
Markdown; untrusted text stays inert."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.render.blocks.modals import render_text_modal
from adapters.slack.sandbox.blockcheck import check_view
from tests.slack.render.test_message_budget import plan, record

pytestmark = pytest.mark.timeout(30)

PLAN = (
    "## Rollout\n\n1. **Risk:** drain <!here> & node-1\n- __watch__ the errors\n\n"
    "```bash\nkubectl drain **node-1**\n```\n### Done"
)


def texts(modal: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in modal["blocks"] if b["type"] == "section"]


def test_the_box_comes_first_and_the_plan_reads_formatted() -> None:
    modal = render_text_modal(record(plan(PLAN)), 0)
    assert check_view(modal) == []
    kinds = [b["type"] for b in modal["blocks"]]
    assert kinds.index("input") < kinds.index("section"), kinds
    (shown,) = texts(modal)
    assert modal["blocks"][kinds.index("section")]["text"]["type"] == "mrkdwn"
    assert shown.splitlines()[:2] == ["*Rollout*", ""]
    assert "1. *Risk:* drain &lt;!here&gt; &amp; node-1" in shown
    assert "• *watch* the errors" in shown
    assert "```\nkubectl drain **node-1**\n```" in shown  # code is left as written
    assert shown.endswith("*Done*")
    assert "##" not in shown


def test_a_long_plan_is_cut_with_its_code_block_closed() -> None:
    long = "```\n" + "line\n" * 1000
    (shown,) = texts(render_text_modal(record(plan(long)), 0))
    assert shown.count("```") == 2 and len(shown) <= 3000
    assert "rest of the plan is in the message" in shown


def test_the_plan_message_says_what_keep_planning_and_dismiss_do() -> None:
    from adapters.slack.render.blocks.message import render_open

    blocks = render_open(record(plan("1. Go"))).blocks
    actions = [i for i, b in enumerate(blocks) if b["type"] == "actions"][-1]
    (line,) = blocks[actions + 1]["elements"]
    assert line["text"] == (
        "*Keep planning* or *Decline with feedback…*: the agent keeps planning (with your "
        "words). *Dismiss*: the agent gets no answer."
    )
