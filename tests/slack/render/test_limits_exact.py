"""Block Kit's limits at their exact values and one past them, as a message shows them:
75 characters a button or option, 3,000 a text, 50 blocks a message (issue 41)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from adapters.slack.render.blocks.message import render_open
from adapters.slack.render.mrkdwn import ELLIPSIS, shorten_escaped
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from tests.slack.render.test_slack_blocks import bold_lines, opts, record, walk

pytestmark = pytest.mark.timeout(30)


def widget_texts(blocks: list[dict[str, Any]]) -> list[str]:
    """The text of every button and menu option, in order."""
    return [
        str(node["text"]["text"])
        for node in walk(blocks)
        if isinstance(node.get("text"), dict) and "value" in node
    ]


def shown(question: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The widget texts and the bold lines (question and full labels) of one question."""
    blocks = render_open(record(question)).blocks
    assert check_message(blocks) == []
    return widget_texts(blocks), bold_lines(blocks)


@pytest.mark.parametrize("options", [2, 30], ids=["buttons", "menu"])
def test_a_label_of_75_is_shown_whole_and_76_shortened_and_listed(options: int) -> None:
    fits, over = "a" * 74 + "Z", "b" * 75 + "Y"
    texts, lines = shown({"question": "Pick", "options": [{"label": fits}, *opts(options - 1)]})
    assert texts[0] == fits and fits not in lines
    texts, lines = shown({"question": "Pick", "options": [{"label": over}, *opts(options - 1)]})
    assert texts[0].startswith("1. b") and texts[0].endswith(ELLIPSIS + "b" * 27 + "Y")
    assert len(texts[0]) == 75  # numbered, its beginning and its end (issue 39)
    assert over in lines  # the whole label is listed above the widget


def test_a_menu_description_of_75_is_shown_whole_and_76_shortened() -> None:
    options = [{"label": "first", "description": "d" * 75}, *opts(29)]
    blocks = render_open(record({"question": "Pick", "options": options})).blocks
    descriptions = [n["description"]["text"] for n in walk(blocks) if "description" in n]
    assert descriptions == ["d" * 75]
    assert "first" not in bold_lines(blocks)
    options[0]["description"] = "d" * 76
    blocks = render_open(record({"question": "Pick", "options": options})).blocks
    descriptions = [n["description"]["text"] for n in walk(blocks) if "description" in n]
    assert descriptions == ["d" * 74 + ELLIPSIS]
    assert "first" in bold_lines(blocks)


def test_a_question_of_3000_characters_is_shown_whole_and_3001_shortened() -> None:
    whole = "x" * 2999 + "!"
    _, lines = shown({"question": whole, "options": opts(2)})
    assert lines[0] == whole
    longer = "y" + whole
    blocks = render_open(record({"question": longer, "options": opts(2)})).blocks
    assert check_message(blocks) == []
    runs = bold_lines(blocks)
    assert longer not in runs
    head, tail = runs[0], runs[1]  # its beginning and its end, what is left out between
    assert head.startswith("yxxx") and tail.endswith("x!") and len(head) + len(tail) < 3000


def test_fifty_blocks_are_posted_and_fifty_one_refused() -> None:
    posted: set[int] = set()
    refused: set[int] = set()
    for count in range(20, 30):
        questions = [
            {"id": f"q{i}", "question": f"Q{i}?", "options": opts(2)} for i in range(count)
        ]
        for note in (None, "one block more"):
            try:
                blocks = render_open(record(*questions, note=note)).blocks
            except UserQuestionError as error:
                assert error.code == SLACK_LIMIT
                found = re.search(r"needs (\d+) blocks", str(error))
                assert found is not None
                refused.add(int(found[1]))
            else:
                assert check_message(blocks) == []
                posted.add(len(blocks))
    assert max(posted) == 50 and min(refused) == 51


def test_shortened_text_never_ends_in_half_an_entity_or_half_a_mention() -> None:
    assert shorten_escaped("a &amp; b", 5) == "a " + ELLIPSIS
    assert shorten_escaped("a &amp; b", 8) == "a &amp;" + ELLIPSIS
    assert shorten_escaped("hi <@U0ALICE001> there", 10) == "hi " + ELLIPSIS
    assert shorten_escaped("<@U1> and more", 9) == "<@U1> an" + ELLIPSIS
    assert shorten_escaped("fits", 4) == "fits" and shorten_escaped("fits", 0) == ""
