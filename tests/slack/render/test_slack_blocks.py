"""blocks.py: a pending record rendered as Block Kit, within Slack's limits.

Every rendering here is also checked with ``blockcheck.check_message`` / ``check_view`` (the
project's referee for slack-platform.md §1.1), so a layout that Slack would refuse fails
the test even when the widgets look right.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from adapters.slack.clicks.transitions import encode_answer
from adapters.slack.model import ids
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.render.blocks.message import render_final, render_open, render_stale
from adapters.slack.render.blocks.modals import render_text_modal
from adapters.slack.render.blocks.overflow import CONTINUED, split_text
from adapters.slack.render.blocks.parts import Rendered
from adapters.slack.render.layout import MAX_TAP_OPTIONS, layout_of, plan_review_of
from adapters.slack.render.mrkdwn import ELLIPSIS, escape
from adapters.slack.sandbox.blockcheck import check_message, check_view
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from bot.questions.models import (
    AskUserQuestionAnswer,
    AskUserQuestionAnswerItem,
    AskUserQuestionItem,
)

ROLLBACK = "\u200b*\u200brollback\u200b*\u200b"
"""``*rollback*`` typed in feedback, as shown: a zero-width space each side of each ``*``,
so it reads as typed and cannot open or close bold (``outcomes.literal``)."""

RID = "0123456789abcdef0123"
ALICE = "U0ALICE001"
Block = dict[str, Any]

INJECTIONS = ["<!channel>", "<@U123>", "<https://evil|x>", "&", "<!here|here>", "<#C1>"]
INJECTION = " ".join(INJECTIONS)


# --- helpers ---------------------------------------------------------------------------


def item(**wire: Any) -> AskUserQuestionItem:
    wire.setdefault("id", "q")
    wire.setdefault("question", "Which one?")
    return AskUserQuestionItem.model_validate(wire)


def opts(n: int, prefix: str = "Option") -> list[dict[str, Any]]:
    return [{"label": f"{prefix} {i}"} for i in range(n)]


def record(*questions: AskUserQuestionItem | dict[str, Any], **fields: Any) -> PendingRecord:
    items = [q if isinstance(q, AskUserQuestionItem) else item(**q) for q in questions]
    fields.setdefault("id", RID)
    fields.setdefault("owner", "proc-1")
    fields.setdefault("channel", "C0QUESTION")
    return PendingRecord(questions=items, **fields)


def plan(
    detail: str | None = "# Plan\n\n1. Ship it", *, approve: str = "Approve", **over: Any
) -> dict[str, Any]:
    question: dict[str, Any] = {
        "id": "plan",
        "question": "Approve this plan?",
        "detail": detail,
        "options": [{"label": approve}, {"label": "Keep planning"}],
        "intent": {"kind": "plan-review", "approve": approve},
    }
    question.update(over)
    return question


def walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside ``node``, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def mrkdwn_objects(blocks: list[Block]) -> list[dict[str, Any]]:
    return [node for node in walk(blocks) if node.get("type") == "mrkdwn"]


def formatted_texts(blocks: list[Block]) -> list[str]:
    """Every text Slack parses for formatting: mrkdwn objects and markdown blocks."""
    return [str(n["text"]) for n in walk(blocks) if n.get("type") in ("mrkdwn", "markdown")]


def rich_lines(blocks: list[Block]) -> list[str]:
    """The text of each line of every rich_text block (its leaves joined), in order."""
    return [
        "".join(str(leaf.get("text", "")) for leaf in line["elements"])
        for n in walk(blocks)
        if n.get("type") == "rich_text_section"
        for line in [n]
    ]


def bold_lines(blocks: list[Block]) -> list[str]:
    """The bold runs of every rich_text block."""
    return [
        str(n["text"])
        for n in walk(blocks)
        if n.get("type") == "text" and (n.get("style") or {}).get("bold")
    ]


def all_text(blocks: list[Block]) -> str:
    return "\n".join(
        [
            str(n["text"])
            for n in walk(blocks)
            if n.get("type") in ("mrkdwn", "markdown", "plain_text")
            and isinstance(n.get("text"), str)
        ]
        + rich_lines(blocks)
    )


def assert_within_limits(rendered: Rendered) -> None:
    assert check_message(rendered.blocks, rendered.text) == []
    for part in rendered.thread:
        assert check_message(part, "(continued)") == []


def actions_blocks(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b["type"] == "actions"]


def elements(blocks: list[Block]) -> list[Block]:
    return [e for b in actions_blocks(blocks) for e in b["elements"]]


def buttons(blocks: list[Block]) -> list[Block]:
    return [e for e in elements(blocks) if e["type"] == "button"]


def button_texts(blocks: list[Block]) -> list[str]:
    return [b["text"]["text"] for b in buttons(blocks)]


def choice(blocks: list[Block], question: int = 0) -> Block:
    """The one choice widget (radio/checkboxes/select) of question ``question``."""
    found = [
        e
        for b in actions_blocks(blocks)
        if (ref := ids.parse_block_id(b.get("block_id"))) is not None and ref.question == question
        for e in b["elements"]
        if e["type"] != "button"
    ]
    assert len(found) == 1, found
    widget: Block = found[0]
    return widget


def menu_options(element: Block) -> list[Block]:
    if "option_groups" in element:
        return [o for g in element["option_groups"] for o in g["options"]]
    return list(element["options"])


_ENTITY = re.compile(r"&(amp|lt|gt);")


def unescape(text: str) -> str:
    return _ENTITY.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], text)


_OUR_TOKENS = re.compile(r"<@U[A-Z0-9]+>|<!date\^\d+\^\{date_short_pretty\} at \{time\}\|[^<>]*>")


def assert_inert(texts: list[str]) -> None:
    """No Slack control sequence survives except our own mention/date tokens."""
    for text in texts:
        bare = re.sub(r"(?m)^> ", "", _OUR_TOKENS.sub("", text))  # a quote's own marker
        assert "<" not in bare and ">" not in bare, text
        assert _ENTITY.sub("", bare).count("&") == 0, text


# --- layout choice ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("questions", "layout"),
    [
        ([{"options": opts(2)}], "tap"),
        ([{"options": opts(MAX_TAP_OPTIONS)}], "tap"),
        ([{"options": opts(MAX_TAP_OPTIONS + 1)}], "menu"),
        ([{"options": opts(100)}], "menu"),
        ([{"options": opts(101)}], "menu"),
        ([{}], "text"),
        ([{"options": []}], "text"),
        ([{"options": opts(3), "multiSelect": True}], "form"),
        ([{"options": opts(3)}, {"id": "b", "options": opts(3)}], "form"),
        ([{}, {"id": "b"}], "form"),
        ([plan()], "plan"),
    ],
)
def test_layout_of(questions: list[dict[str, Any]], layout: str) -> None:
    assert layout_of([item(**q) for q in questions]) == layout


# --- tap -------------------------------------------------------------------------------


def test_tap_has_one_button_per_option_then_other_and_dismiss() -> None:
    options = [
        {"label": "Red", "description": "warm"},
        {"label": "Green"},
        {"label": "Blue", "description": "cool"},
    ]
    rendered = render_open(record({"question": "Colour?", "options": options}))
    assert_within_limits(rendered)
    assert button_texts(rendered.blocks) == ["Red", "Green", "Blue", "Other…", "Dismiss"]
    picks = buttons(rendered.blocks)[:3]
    assert [b["value"] for b in picks] == ["0", "1", "2"]
    assert [ids.parse_action_id(b["action_id"]) for b in picks] == ["pick"] * 3
    other, dismiss = buttons(rendered.blocks)[3:]
    assert ids.parse_action_id(other["action_id"]) == "text"
    assert ids.parse_action_id(dismiss["action_id"]) == "dismiss"
    assert "confirm" in dismiss  # dismissing is a deliberate act
    (block,) = actions_blocks(rendered.blocks)
    assert ids.parse_block_id(block["block_id"]) == ids.BlockRef(RID, 0, "c0")
    # buttons cannot show descriptions: they are listed above the buttons
    (listed,) = [b for b in rendered.blocks if b["type"] == "rich_text" and "Red" in str(b)]
    assert rendered.blocks.index(listed) < rendered.blocks.index(block)
    assert rich_lines([listed]) == ["Red — warm", "Blue — cool"]
    assert "Colour?" in bold_lines(rendered.blocks)


def test_a_long_label_is_shortened_on_the_button_but_the_value_is_the_index() -> None:
    long_label = "L" * 200
    rendered = render_open(record({"options": [{"label": long_label}, {"label": "short"}]}))
    assert_within_limits(rendered)
    first = buttons(rendered.blocks)[0]
    assert len(first["text"]["text"]) == 75
    assert first["text"]["text"] == "1. " + "L" * 43 + ELLIPSIS + "L" * 28
    assert first["value"] == "0"


def test_blank_labels_still_make_a_valid_button() -> None:
    rendered = render_open(record({"options": [{"label": ""}, {"label": "   "}]}))
    assert_within_limits(rendered)
    assert button_texts(rendered.blocks)[:2] == ["(blank)", "(blank)"]


# --- menu ------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [6, 50, 100])
def test_menu_up_to_100_options_is_a_static_select(count: int) -> None:
    rendered = render_open(record({"options": opts(count)}))
    assert_within_limits(rendered)
    menu = choice(rendered.blocks)
    assert menu["type"] == "static_select"
    assert ids.parse_action_id(menu["action_id"]) == "pick"
    assert "option_groups" not in menu
    assert [o["value"] for o in menu["options"]] == [str(i) for i in range(count)]
    assert [o["text"]["text"] for o in menu["options"]] == [f"Option {i}" for i in range(count)]
    assert button_texts(rendered.blocks) == ["Other…", "Dismiss"]


@pytest.mark.slow
@pytest.mark.parametrize("count", [101, 250, 1000])
def test_menu_over_100_options_uses_option_groups(count: int) -> None:
    rendered = render_open(record({"options": opts(count)}))
    assert_within_limits(rendered)
    menu = choice(rendered.blocks)
    assert menu["type"] == "static_select" and "options" not in menu
    groups = menu["option_groups"]
    assert len(groups) == -(-count // 100)
    assert all(len(g["options"]) <= 100 for g in groups)
    assert [o["value"] for o in menu_options(menu)] == [str(i) for i in range(count)]


@pytest.mark.slow
def test_menu_of_ten_thousand_options_is_the_largest_that_renders() -> None:
    rendered = render_open(record({"options": [{"label": "x"} for _ in range(10_000)]}))
    assert_within_limits(rendered)
    menu = choice(rendered.blocks)
    assert len(menu["option_groups"]) == 100
    assert menu_options(menu)[-1]["value"] == "9999"


@pytest.mark.slow
def test_more_than_ten_thousand_options_is_a_slack_limit_error_naming_the_limit() -> None:
    with pytest.raises(UserQuestionError) as caught:
        render_open(record({"options": [{"label": "x"} for _ in range(10_001)]}))
    assert caught.value.code == SLACK_LIMIT
    assert "10000" in caught.value.message


def test_menu_shows_option_descriptions_and_shortens_long_texts() -> None:
    options = [{"label": "A" * 100, "description": "D" * 100}, *opts(7)]
    rendered = render_open(record({"options": options}))
    assert_within_limits(rendered)
    first = menu_options(choice(rendered.blocks))[0]
    assert first["value"] == "0"
    assert first["text"]["text"] == "1. " + "A" * 43 + ELLIPSIS + "A" * 28
    assert first["description"]["text"] == "D" * 74 + ELLIPSIS
    assert "description" not in menu_options(choice(rendered.blocks))[1]


# --- text ------------------------------------------------------------------------------


def test_a_question_without_options_gets_an_answer_button() -> None:
    rendered = render_open(record({"question": "Why?", "detail": "Tell me more"}))
    assert_within_limits(rendered)
    assert button_texts(rendered.blocks) == ["Answer…", "Dismiss"]
    answer = buttons(rendered.blocks)[0]
    assert ids.parse_action_id(answer["action_id"]) == "text"
    assert answer["style"] == "primary"
    assert next(b for b in rendered.blocks if b["type"] == "markdown")["text"] == "Tell me more"


# --- form ------------------------------------------------------------------------------


def test_single_multi_select_question_is_checkboxes_with_submit() -> None:
    rendered = render_open(record({"options": opts(3), "multiSelect": True}))
    assert_within_limits(rendered)
    widget = choice(rendered.blocks)
    assert widget["type"] == "checkboxes"
    assert ids.parse_action_id(widget["action_id"]) == "draft"
    assert [o["value"] for o in widget["options"]] == ["0", "1", "2"]
    assert "initial_options" not in widget
    assert button_texts(rendered.blocks) == ["Other…", "Submit", "Dismiss"]
    submit = buttons(rendered.blocks)[1]
    assert ids.parse_action_id(submit["action_id"]) == "submit"
    assert submit["style"] == "primary"
    submit_block = actions_blocks(rendered.blocks)[-1]
    assert ids.parse_block_id(submit_block["block_id"]) == ids.BlockRef(RID, None, "s0")


@pytest.mark.parametrize(("count", "kind"), [(10, "checkboxes"), (11, "multi_static_select")])
def test_multi_select_widget_by_option_count(count: int, kind: str) -> None:
    rendered = render_open(record({"options": opts(count), "multiSelect": True}))
    assert_within_limits(rendered)
    assert choice(rendered.blocks)["type"] == kind
    assert "Submit" in button_texts(rendered.blocks)


def test_multi_select_with_many_options_uses_option_groups() -> None:
    rendered = render_open(record({"options": opts(150), "multiSelect": True}))
    assert_within_limits(rendered)
    widget = choice(rendered.blocks)
    assert widget["type"] == "multi_static_select"
    assert [o["value"] for o in menu_options(widget)] == [str(i) for i in range(150)]


def several() -> list[dict[str, Any]]:
    return [
        {"id": "size", "question": "Size?", "header": "Shirt", "options": opts(4, "Size")},
        {"id": "extras", "question": "Extras?", "options": opts(3, "Extra"), "multiSelect": True},
        {"id": "city", "question": "City?", "options": opts(12, "City")},
        {"id": "note", "question": "Anything else?", "detail": "Free *text*"},
    ]


def test_several_questions_get_one_widget_each_and_one_submit() -> None:
    rendered = render_open(record(*several()))
    assert_within_limits(rendered)
    assert choice(rendered.blocks, 0)["type"] == "radio_buttons"
    assert choice(rendered.blocks, 1)["type"] == "checkboxes"
    assert choice(rendered.blocks, 2)["type"] == "static_select"
    for index in range(3):
        assert ids.parse_action_id(choice(rendered.blocks, index)["action_id"]) == "draft"
    texts = button_texts(rendered.blocks)
    assert texts == ["Other…", "Other…", "Other…", "Answer…", "Submit", "Dismiss"]
    text = all_text(rendered.blocks)
    for number, question in enumerate(["Size?", "Extras?", "City?", "Anything else?"], 1):
        assert f"{number}. {question}" in bold_lines(rendered.blocks)
    assert "Shirt" in text  # the header
    assert "Free *text*" in text  # the detail
    assert "skipped" in text  # unanswered questions are skipped: say so
    refs = [ids.parse_block_id(b["block_id"]) for b in actions_blocks(rendered.blocks)]
    assert [r.question for r in refs if r is not None] == [0, 1, 2, 3, None]


def test_drafts_become_initial_options() -> None:
    drafts = [
        Draft(selected=[2]),
        Draft(selected=[0, 2]),
        Draft(selected=[11]),
        Draft(custom="<@U123> & more"),
    ]
    rendered = render_open(record(*several(), drafts=drafts, version=7))
    assert_within_limits(rendered)
    radio = choice(rendered.blocks, 0)
    assert radio["initial_option"] == radio["options"][2]
    boxes = choice(rendered.blocks, 1)
    assert boxes["initial_options"] == [boxes["options"][0], boxes["options"][2]]
    menu = choice(rendered.blocks, 2)
    assert menu["initial_option"]["value"] == "11"
    text = all_text(rendered.blocks)
    assert "&lt;@U123&gt; &amp; more" in text  # the draft's free text is shown, escaped
    assert all(b["block_id"].endswith(("c7", "s7")) for b in actions_blocks(rendered.blocks))


def test_out_of_range_drafts_are_ignored() -> None:
    rendered = render_open(record(*several(), drafts=[Draft(selected=[9]), Draft(selected=[-1])]))
    assert_within_limits(rendered)
    assert "initial_option" not in choice(rendered.blocks, 0)
    assert "initial_options" not in choice(rendered.blocks, 1)


def test_multi_select_menu_drafts_become_initial_options() -> None:
    rendered = render_open(
        record({"options": opts(150), "multiSelect": True}, drafts=[Draft(selected=[3, 120])])
    )
    assert_within_limits(rendered)
    widget = choice(rendered.blocks)
    assert [o["value"] for o in widget["initial_options"]] == ["3", "120"]


def test_too_many_questions_is_a_slack_limit_error() -> None:
    questions = [{"id": f"q{i}", "options": opts(2), "header": "H"} for i in range(20)]
    with pytest.raises(UserQuestionError) as caught:
        render_open(record(*questions))
    assert caught.value.code == SLACK_LIMIT
    assert "50" in caught.value.message


# --- plan review -----------------------------------------------------------------------


def test_plan_review_is_claimed_under_the_conditions() -> None:
    review = plan_review_of([item(**plan())])
    assert review is not None
    assert (review.approve, review.decline) == (0, 1)
    only_approve = plan(options=[{"label": "Approve"}])
    review = plan_review_of([item(**only_approve)])
    assert review is not None and (review.approve, review.decline) == (0, None)
    reversed_options = plan(options=[{"label": "No"}, {"label": "Approve"}])
    review = plan_review_of([item(**reversed_options)])
    assert review is not None and (review.approve, review.decline) == (1, 0)
    assert plan_review_of([item(**plan(detail=""))]) is not None  # empty plan is still a plan
    assert plan_review_of([item(**plan(multiSelect=False))]) is not None


@pytest.mark.parametrize(
    "questions",
    [
        pytest.param([plan(), {"id": "other"}], id="more than one question"),
        pytest.param([plan(intent=None)], id="no intent"),
        pytest.param([plan(detail=None)], id="no detail"),
        pytest.param(
            [plan(approve="Ship", options=[{"label": "Approve"}, {"label": "No"}])],
            id="approve label not among options",
        ),
        pytest.param([plan(options=[])], id="no options"),
        pytest.param([plan(options=None)], id="options missing"),
        pytest.param(
            [plan(options=[{"label": "Approve"}, {"label": "No"}, {"label": "Later"}])],
            id="three options",
        ),
        pytest.param([plan(multiSelect=True)], id="multi-select"),
    ],
)
def test_plan_review_declines_and_the_generic_flow_is_used(
    questions: list[dict[str, Any]],
) -> None:
    items = [item(**q) for q in questions]
    assert plan_review_of(items) is None
    assert layout_of(items) != "plan"
    rendered = render_open(record(*items))
    assert_within_limits(rendered)
    assert "Decline with feedback…" not in button_texts(rendered.blocks)
    assert not [b for b in rendered.blocks if b["type"] == "header"]


def test_plan_review_buttons() -> None:
    question = plan(
        approve="Ship it",
        options=[
            {"label": "Not yet", "description": "keep planning"},
            {"label": "Ship it", "description": "leave plan mode"},
        ],
        header="Release plan",
    )
    rendered = render_open(record(question))
    assert_within_limits(rendered)
    assert button_texts(rendered.blocks) == [
        "Ship it",
        "Not yet",
        "Decline with feedback…",
        "Dismiss",
    ]
    approve, decline, feedback, dismiss = buttons(rendered.blocks)
    assert approve["style"] == "primary" and approve["value"] == "1"
    assert decline["style"] == "danger" and decline["value"] == "0"
    assert ids.parse_action_id(approve["action_id"]) == "pick"
    assert ids.parse_action_id(decline["action_id"]) == "pick"
    assert ids.parse_action_id(feedback["action_id"]) == "text"
    assert ids.parse_action_id(dismiss["action_id"]) == "dismiss"
    header = [b for b in rendered.blocks if b["type"] == "header"]
    assert header[0]["text"] == {"type": "plain_text", "text": "Release plan", "emoji": True}
    markdown = [b for b in rendered.blocks if b["type"] == "markdown"]
    assert markdown[0]["text"] == "# Plan\n\n1. Ship it"
    text = all_text(rendered.blocks)
    assert "Approve this plan?" in bold_lines(rendered.blocks)
    assert "Ship it — leave plan mode" in text and "Not yet — keep planning" in text
    assert rendered.thread == []


def test_plan_review_with_only_the_approve_option_has_no_danger_button() -> None:
    rendered = render_open(record(plan(options=[{"label": "Approve"}])))
    assert_within_limits(rendered)
    assert button_texts(rendered.blocks) == ["Approve", "Decline with feedback…", "Dismiss"]
    assert not [b for b in buttons(rendered.blocks) if b.get("style") == "danger"]


def long_plan(size: int, unit: str) -> str:
    text = ""
    n = 0
    while len(text) < size:
        text += f"## Step {n}\n\n{unit * 8}\n\n"
        n += 1
    return text[:size]


def _plan_pieces(rendered: Rendered) -> tuple[str, list[str]]:
    (main,) = [b for b in rendered.blocks if b["type"] == "markdown"]
    chunks = []
    for part in rendered.thread:
        (markdown,) = [b for b in part if b["type"] == "markdown"]
        chunks.append(markdown["text"])
    return main["text"], chunks


@pytest.mark.parametrize(
    "unit",
    [
        "Deploy the service to staging, then run the smoke tests. ",
        "if a < b && c > d { return x -> y; } ",  # code: every character may need escaping
        "<<<&&&>>>",
        "averyveryverylongwordwithoutanyspaces" * 5,
        "🎉 emoji ünïcode ",
    ],
)
def test_a_20000_character_plan_is_shown_whole_across_the_thread(unit: str) -> None:
    detail = long_plan(20_000, unit)
    assert len(detail) == 20_000
    rendered = render_open(record(plan(detail)))
    assert_within_limits(rendered)
    main, chunks = _plan_pieces(rendered)
    assert CONTINUED.search(main)
    assert chunks, "the rest of the plan goes to the thread"
    shown = unescape(CONTINUED.sub("", main))
    assert shown + "".join(unescape(c) for c in chunks) == detail
    assert shown and all(chunks)
    for n, part in enumerate(rendered.thread, 1):
        caption = next(b for b in part if b["type"] == "context")["elements"][0]["text"]
        assert caption == f"Plan, continued ({n}/{len(rendered.thread)})"
    # the buttons are still there, in the main message
    assert "Approve" in button_texts(rendered.blocks)


def test_long_details_of_several_questions_all_reach_the_thread() -> None:
    details = [long_plan(8000, f"detail {i} <&> ") for i in range(3)]
    questions = [{"id": f"q{i}", "options": opts(2), "detail": d} for i, d in enumerate(details)]
    rendered = render_open(record(*questions))
    assert_within_limits(rendered)
    mains = [b["text"] for b in rendered.blocks if b["type"] == "markdown"]
    assert len(mains) == 3
    rebuilt = [unescape(CONTINUED.sub("", m)) for m in mains]
    for part in rendered.thread:
        caption = part[0]["elements"][0]["text"]
        index = int(re.match(r"Detail of question (\d+)", caption).group(1)) - 1  # type: ignore[union-attr]
        rebuilt[index] += unescape(part[1]["text"])
    assert rebuilt == details


def test_every_rendering_shows_the_same_part_of_the_plan() -> None:
    """The thread is posted once: re-renders and the final message must stop where it starts."""
    rec = record(plan(long_plan(20_000, "x < y & z ")))
    opened = render_open(rec)
    main, chunks = _plan_pieces(opened)
    again = render_open(rec.next(note="Reopened: " + "n" * 1000, label="L" * 500))
    assert _plan_pieces(again) == (main, chunks)
    final = render_final(
        rec.next(
            state="answered",
            answered_by=ALICE,
            answer=AskUserQuestionAnswer(
                answers=[AskUserQuestionAnswerItem(id="plan", selected=[], custom="<&>" * 1000)]
            ),
        )
    )
    assert_final_shape(final)
    (final_main, feedback) = [b["text"] for b in final.blocks if b["type"] == "markdown"]
    assert final_main == main and feedback.startswith("> &lt;&amp;&gt;")


def test_a_message_over_slacks_text_cap_is_a_slack_limit_error() -> None:
    options = [{"label": f"{i:03d} " + "x" * 70} for i in range(400)]  # ~30,000 characters
    with pytest.raises(UserQuestionError) as caught:
        render_open(record({"options": options}))
    assert caught.value.code == SLACK_LIMIT
    assert "msg_blocks_too_long" in caught.value.message


def test_a_short_plan_needs_no_thread() -> None:
    detail = long_plan(5000, "word ")
    rendered = render_open(record(plan(detail)))
    assert_within_limits(rendered)
    main, chunks = _plan_pieces(rendered)
    assert unescape(main) == detail and chunks == []


# --- split_text ------------------------------------------------------------------------


@pytest.mark.slow
@given(st.text(alphabet=st.sampled_from("ab \n\n<&é🎉"), max_size=400), st.integers(1, 60))
def test_split_text_parts_rejoin_and_respect_the_limit(text: str, limit: int) -> None:
    parts = split_text(text, limit)
    assert "".join(parts) == text
    assert all(len(part) <= limit for part in parts)
    assert all(parts[:-1])  # no empty parts except a lone empty text


@pytest.mark.slow
@given(st.text(max_size=2000), st.integers(1, 500))
def test_split_text_with_any_text(text: str, limit: int) -> None:
    parts = split_text(text, limit)
    assert "".join(parts) == text
    assert all(len(part) <= limit for part in parts)


def test_split_text_prefers_paragraph_then_line_then_word_boundaries() -> None:
    assert split_text("aaaaaaa\n\nbb cc\ndd", 12) == ["aaaaaaa\n\n", "bb cc\ndd"]
    assert split_text("aaaaaaa\nbb cc dd", 12) == ["aaaaaaa\n", "bb cc dd"]
    assert split_text("aaaaaaa bb cc dd", 12) == ["aaaaaaa bb ", "cc dd"]
    assert split_text("aaaaaaaaaaaaaaaa", 5) == ["aaaaa", "aaaaa", "aaaaa", "a"]
    assert split_text("", 5) == [""]


@pytest.mark.slow
@given(st.text(alphabet=st.sampled_from("ab \n<&>é"), max_size=400), st.integers(5, 60))
def test_split_text_escaped_limits_each_escaped_part(text: str, limit: int) -> None:
    parts = split_text(text, limit, escaped=True)
    assert "".join(parts) == text
    assert all(len(escape(part)) <= limit for part in parts)


def test_split_text_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError):
        split_text("abc", 0)
    with pytest.raises(ValueError):
        split_text("abc", 4, escaped=True)  # "&" alone escapes to 5 characters


# --- escaping --------------------------------------------------------------------------


def _injected_record(**fields: Any) -> PendingRecord:
    questions = [
        {
            "id": "a",
            "question": f"Q {INJECTION}",
            "header": f"H {INJECTION}",
            "detail": f"D {INJECTION}",
            "options": [
                {"label": f"L {INJECTION}", "description": f"desc {INJECTION}"},
                {"label": "plain"},
            ],
        }
    ]
    return record(*questions, label=f"bot {INJECTION}", **fields)


def _injected_variants() -> list[PendingRecord]:
    base = _injected_record()
    question = base.questions[0]
    variants = [base]
    variants.append(base.model_copy(update={"questions": [question, question]}))  # form
    many = question.model_copy(update={"options": question.options * 4})  # type: ignore[operator]
    variants.append(base.model_copy(update={"questions": [many]}))  # menu
    plan_question = question.model_copy(
        update={
            "intent": item(**plan()).intent.model_copy(  # type: ignore[union-attr]
                update={"approve": question.options[0].label}  # type: ignore[index]
            )
        }
    )
    variants.append(base.model_copy(update={"questions": [plan_question]}))
    no_options = question.model_copy(update={"options": None})
    variants.append(base.model_copy(update={"questions": [no_options]}))
    return variants


@pytest.mark.parametrize("rec", _injected_variants(), ids=["tap", "form", "menu", "plan", "text"])
def test_asker_text_is_escaped_everywhere_and_mrkdwn_is_verbatim(rec: PendingRecord) -> None:
    rendered = render_open(rec.model_copy(update={"note": f"note {INJECTION}"}))
    assert_within_limits(rendered)
    texts = formatted_texts(rendered.blocks)
    assert_inert([*texts, rendered.text])
    joined = "\n".join(texts)
    assert "&lt;!channel&gt;" in joined and "&lt;@U123&gt;" in joined
    assert "&lt;https://evil|x&gt;" in joined and " &amp; " in joined
    for obj in mrkdwn_objects(rendered.blocks):
        assert obj["verbatim"] is True


def test_asker_text_is_escaped_in_the_final_message_and_modal() -> None:
    rec = _injected_record().next(
        state="answered",
        answered_by=ALICE,
        finished_at=1_700_000_000.0,
        answer=AskUserQuestionAnswer(
            answers=[AskUserQuestionAnswerItem(id="a", selected=[], custom=f"C {INJECTION}")]
        ),
    )
    final = render_final(rec)
    assert_within_limits(final)
    assert_inert([*formatted_texts(final.blocks), final.text])
    assert all(obj["verbatim"] is True for obj in mrkdwn_objects(final.blocks))
    modal = render_text_modal(_injected_record(), 0)
    assert check_view(modal) == []
    assert_inert(formatted_texts(modal["blocks"]))
    assert all(obj["verbatim"] is True for obj in mrkdwn_objects(modal["blocks"]))


def test_the_configured_mention_is_ours_and_kept() -> None:
    rendered = render_open(record({"options": opts(2)}, mention="<!here>"))
    assert_within_limits(rendered)
    assert "<!here>" in formatted_texts(rendered.blocks)[0]


# --- final -----------------------------------------------------------------------------


def finished(
    rec: PendingRecord, state: str, answers: list[dict[str, Any]] | None = None, **kw: Any
) -> PendingRecord:
    answer = None
    if answers is not None:
        answer = AskUserQuestionAnswer.model_validate({"answers": answers})
    return rec.next(state=state, answer=answer, finished_at=1_700_000_000.0, **kw)


INTERACTIVE = {"button", "static_select", "multi_static_select", "checkboxes", "radio_buttons",
               "plain_text_input", "overflow"}  # fmt: skip


def assert_final_shape(rendered: Rendered) -> None:
    assert_within_limits(rendered)
    assert not [b for b in rendered.blocks if b["type"] in ("actions", "input")]
    assert not [n for n in walk(rendered.blocks) if n.get("type") in INTERACTIVE]
    assert not [n for n in walk(rendered.blocks) if "action_id" in n]
    assert rendered.thread == []


def test_final_answered_form_shows_who_and_what() -> None:
    rec = finished(
        record(*several(), label="deploy-bot", version=3),
        "answered",
        [
            {"id": "size", "selected": ["Size 2"]},
            {"id": "extras", "selected": ["Extra 0", "Extra 2"], "custom": "gift wrap"},
            {"id": "city", "selected": []},
            {"id": "note", "selected": [], "custom": "thanks!"},
        ],
        answered_by=ALICE,
    )
    rendered = render_final(rec)
    assert_final_shape(rendered)
    text = all_text(rendered.blocks)
    assert "Answered" in text and f"<@{ALICE}>" in text
    assert "→ Size 2" in text
    assert "→ Extra 0, Extra 2, “gift wrap”" in text
    assert "→ skipped" in text
    assert "→ “thanks!”" in text
    assert "Asked by deploy-bot" in text
    assert rendered.text.startswith(f"Answered by <@{ALICE}>: deploy-bot: ")


@pytest.mark.parametrize(
    ("state", "word", "by"),
    [
        ("cancelled", "Dismissed", True),
        ("aborted", "Cancelled", False),
        ("failed", "Failed", False),
    ],
)
def test_final_outcomes(state: str, word: str, by: bool) -> None:
    rec = finished(record({"options": opts(3)}), state, answered_by=ALICE if by else None)
    rendered = render_final(rec)
    assert_final_shape(rendered)
    text = all_text(rendered.blocks)
    assert word in text
    assert word in rendered.text
    assert (f"<@{ALICE}>" in text) is by
    assert "→" not in text  # no answer lines


@pytest.mark.parametrize("state", ["aborted", "failed"])
def test_final_says_why_it_ended(state: str) -> None:
    rec = finished(record({"options": opts(3)}), state, note="Bot <stopped> & gone")
    rendered = render_final(rec)
    assert_final_shape(rendered)
    assert "Bot &lt;stopped&gt; &amp; gone" in all_text(rendered.blocks)


def test_final_plan_keeps_the_plan_and_the_thread_marker() -> None:
    detail = long_plan(20_000, "step <x> & y ")
    rec = finished(
        record(plan(detail)),
        "answered",
        [{"id": "plan", "selected": [], "custom": "F" * 3000}],
        answered_by=ALICE,
    )
    rendered = render_final(rec)
    assert_final_shape(rendered)
    text = all_text(rendered.blocks)
    assert "in the thread below" in text
    assert f"Declined by <@{ALICE}> · " in text and "> " + "F" * 10 in text
    assert [b for b in rendered.blocks if b["type"] == "header"]


def test_each_answer_reads_as_chosen_then_typed_or_skipped_or_none() -> None:
    questions = [item(id=f"q{n}", options=[{"label": "<a>"}, {"label": "b"}]) for n in range(3)]
    rec = finished(
        record(*questions),
        "answered",
        [{"id": "q0", "selected": ["<a>"], "custom": "b & c"}, {"id": "q1", "selected": []}],
    )
    rendered = render_final(rec)
    assert_final_shape(rendered)
    answers = [b for b in rendered.blocks if "→" in all_text([b])]
    assert [all_text([b]) for b in answers] == ["→ <a>, “b & c”", "→ skipped", "→ no answer"]
    assert [p.get("style") for p in answers[1]["elements"][0]["elements"]] == [
        None,
        {"italic": True},
    ]


def test_stale_message_has_no_buttons() -> None:
    rendered = render_stale()
    assert_final_shape(rendered)
    assert "no longer open" in rendered.text


# --- modal -----------------------------------------------------------------------------


def test_text_modal_is_a_valid_view_that_names_its_question() -> None:
    rec = record(*several(), drafts=[Draft(), Draft(), Draft(), Draft(custom="draft text")])
    modal = render_text_modal(rec, 3)
    assert check_view(modal) == []
    assert ids.parse_callback_id(modal["callback_id"]) == "text"
    assert ids.parse_private_metadata(modal["private_metadata"]) == ids.ModalRef(RID, 3)
    (field,) = [b for b in modal["blocks"] if b["type"] == "input"]
    assert ids.parse_block_id(field["block_id"]) == ids.BlockRef(RID, 3, "in")
    assert ids.parse_action_id(field["element"]["action_id"]) == "text"
    assert field["element"]["multiline"] is True
    assert field["element"]["initial_value"] == "draft text"
    assert field["label"]["text"] == "Your answer"
    assert rich_lines(modal["blocks"]) == ["Anything else?"]  # the question, once
    assert modal["title"]["text"] == "Your answer"


def test_plan_feedback_modal() -> None:
    modal = render_text_modal(record(plan()), 0)
    assert check_view(modal) == []
    assert modal["title"]["text"] == "Plan feedback"
    assert modal["submit"]["text"] == "Decline"


def test_text_modal_for_an_extreme_question_is_still_valid() -> None:
    rec = record({"question": "Q" * 5000 + INJECTION}, drafts=[Draft(custom="x" * 5000)])
    modal = render_text_modal(rec, 0)
    assert check_view(modal) == []


# --- any request: within limits, or a SLACK_LIMIT error ---------------------------------

_pieces = st.sampled_from(
    [*"ab Z9*_~`@#!|:\n&<>", "🎉", "👍🏽", "é", "<!channel>", "<@U1>", "<https://evil|x>"]
)


def texts(min_size: int = 0, max_size: int = 30) -> st.SearchStrategy[str]:
    """Text made of letters, emoji and Slack control sequences."""
    return st.lists(_pieces, min_size=min_size, max_size=max_size).map("".join)


short_text = texts()
long_text = st.builds(lambda s, n: s * n, texts(1, 20), st.integers(1, 2000))
any_text = st.one_of(short_text, short_text, short_text, short_text, long_text)
options_strategy = st.lists(
    st.fixed_dictionaries(
        {"label": st.one_of(short_text, texts(max_size=120))},
        optional={"description": short_text},
    ),
    max_size=150,
)


@st.composite
def question_strategy(draw: st.DrawFn, index: int) -> dict[str, Any]:
    question: dict[str, Any] = {"id": f"q{index}", "question": draw(any_text)}
    if draw(st.booleans()):
        question["options"] = draw(options_strategy)
    if draw(st.booleans()):
        question["detail"] = draw(any_text)
    if draw(st.booleans()):
        question["header"] = draw(short_text)
    if draw(st.booleans()):
        question["multiSelect"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        labels = [o["label"] for o in question.get("options") or []]
        chosen = bool(labels) and draw(st.booleans())
        approve = draw(st.sampled_from(labels)) if chosen else "Approve"
        question["intent"] = {"kind": "plan-review", "approve": approve}
    return question


@st.composite
def record_strategy(draw: st.DrawFn) -> PendingRecord:
    count = draw(st.one_of(st.just(1), st.just(1), st.integers(1, 3), st.integers(1, 30)))
    questions = [draw(question_strategy(i)) for i in range(count)]
    if draw(st.integers(0, 3)) == 0:  # make plan reviews common
        questions = [draw(question_strategy(0))]
        questions[0]["intent"] = {"kind": "plan-review", "approve": "Yes"}
        questions[0]["options"] = [{"label": "Yes"}, {"label": draw(short_text)}][
            : draw(st.integers(1, 2))
        ]
        questions[0].pop("multiSelect", None)
        questions[0]["detail"] = draw(any_text)
    drafts = [
        Draft(
            selected=draw(st.lists(st.integers(0, 160), max_size=5)),
            custom=draw(st.none() | any_text),
        )
        for _ in range(draw(st.integers(0, len(questions))))
    ]
    return record(
        *questions,
        drafts=drafts,
        version=draw(st.integers(0, 999_999)),
        label=draw(st.none() | short_text),
        note=draw(st.none() | short_text),
    )


@pytest.mark.slow
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(record_strategy())
def test_any_request_renders_within_limits_or_is_a_slack_limit_error(rec: PendingRecord) -> None:
    try:
        rendered = render_open(rec)
    except UserQuestionError as error:
        assert error.code == SLACK_LIMIT
        event("SLACK_LIMIT")
        return
    event(f"rendered {layout_of(rec.questions)}{' with thread' if rendered.thread else ''}")
    assert_within_limits(rendered)
    assert_inert([*formatted_texts(rendered.blocks), rendered.text])
    for part in rendered.thread:
        assert_inert(formatted_texts(part))
    assert all(obj["verbatim"] is True for obj in mrkdwn_objects(rendered.blocks))
    # ... and however it ends, the final message fits too (else the buttons would stay up)
    answered = rec.next(
        state="answered",
        answered_by=ALICE,
        finished_at=1_700_000_000.0,
        answer=encode_answer(
            rec.questions,
            [d.model_copy(update={"custom": (d.custom or "")[:3000]}) for d in rec.drafts],
        ),
    )
    for final in (answered, rec.next(state="aborted", note=rec.note, finished_at=1.0)):
        rendered_final = render_final(final)
        assert_final_shape(rendered_final)
        assert_inert([*formatted_texts(rendered_final.blocks), rendered_final.text])


# --- issue 16: text as typed, outcomes in words, full labels, modals -------------------

TYPED = "Should I **delete** the `tmp/` folder, run *all* _migrations_ and ~skip~ v2.4?"


def _question_leaves(blocks: list[Block]) -> list[Block]:
    return [n for n in walk(blocks) if n.get("type") == "text" and TYPED in str(n.get("text"))]


@pytest.mark.parametrize(
    "question",
    [
        {"question": TYPED, "options": opts(2)},
        {"question": TYPED, "options": opts(12)},
        {"question": TYPED},
        {"question": TYPED, "options": opts(3), "multiSelect": True},
        plan(question=TYPED),
    ],
    ids=["tap", "menu", "text", "form", "plan"],
)
def test_a_question_with_markdown_characters_is_shown_as_typed(question: dict[str, Any]) -> None:
    rec = record(question, label="agent *x*")
    opened = render_open(rec)
    final = render_final(finished(rec, "cancelled", answered_by=ALICE))
    modal = render_text_modal(rec, 0)
    for blocks in (opened.blocks, final.blocks, modal["blocks"]):
        # the question is one literal bold rich-text run, and never mrkdwn it could break
        (leaf,) = _question_leaves(blocks)
        assert leaf == {"type": "text", "text": TYPED, "style": {"bold": True}}
        assert not [t for t in formatted_texts(blocks) if "delete" in t]
    for blocks in (opened.blocks, final.blocks):  # who asked, as typed too
        assert "Asked by agent *x*" in all_text(blocks) and "*agent" not in all_text(blocks)
    # the notification texts carry it escaped and unwrapped
    assert TYPED in opened.text and TYPED in final.text and f"*{TYPED}" not in opened.text


def test_a_question_in_rich_text_cannot_mention_or_link() -> None:
    rendered = render_open(_injected_record())
    rich = [n for n in walk(rendered.blocks) if n.get("type") == "rich_text"]
    leaves = [n for b in rich for n in walk(b["elements"]) if "type" in n and "elements" not in n]
    assert leaves and {leaf["type"] for leaf in leaves} == {"text"}
    assert f"Q {INJECTION}" in [leaf["text"] for leaf in leaves]


def _plan_record(answer: dict[str, Any], **kw: Any) -> PendingRecord:
    return finished(record(plan()), "answered", [answer], **kw)


def test_a_declined_plan_says_declined_by_whom_with_the_feedback() -> None:
    rec = _plan_record(
        {"id": "plan", "selected": [], "custom": "Phase 3 needs a *rollback* test <first>."},
        answered_by="U0BOB00001",
        answered_by_name="bob",
    )
    rendered = render_final(rec)
    assert_final_shape(rendered)
    (line,) = [t for t in formatted_texts(rendered.blocks) if "Declined" in t]
    assert line.startswith(":x: Declined by <@U0BOB00001> · <!date^")
    # The feedback: formatted as written, quoted, just above the outcome line.
    quote = rendered.blocks[-2]
    assert quote == {"type": "markdown", "text": "> Phase 3 needs a *rollback* test &lt;first&gt;."}
    assert "Answered" not in all_text(rendered.blocks)
    assert rendered.text.startswith(
        f"Declined by <@U0BOB00001> — «Phase 3 needs a {ROLLBACK} test &lt;first&gt;.»: "
    )
    assert_inert([*formatted_texts(rendered.blocks), rendered.text])


def test_a_plan_declined_with_its_decline_button_says_declined() -> None:
    rec = _plan_record({"id": "plan", "selected": ["Keep planning"]}, answered_by=ALICE)
    rendered = render_final(rec)
    assert f":x: Declined by <@{ALICE}>" in all_text(rendered.blocks)
    assert rendered.text.startswith(f"Declined by <@{ALICE}>: ")


def test_an_approved_plan_says_approved() -> None:
    rec = _plan_record({"id": "plan", "selected": ["Approve"]}, answered_by=ALICE)
    rendered = render_final(rec)
    assert_final_shape(rendered)
    assert f":white_check_mark: Approved by <@{ALICE}> · <!date^" in all_text(rendered.blocks)
    assert "Answered" not in all_text(rendered.blocks)
    assert rendered.text.startswith(f"Approved by <@{ALICE}>: ")


@pytest.mark.parametrize(
    ("state", "fields", "line"),
    [
        ("cancelled", {"answered_by": ALICE}, f":no_entry_sign: Dismissed by <@{ALICE}>"),
        ("aborted", {"note": "Cancelled: the asker stopped waiting."}, ":black_square_for_stop: "
         "Cancelled: the asker stopped waiting."),
        ("aborted", {"note": "Answered in another client."}, ":black_square_for_stop: "
         "Answered in another client."),
        ("aborted", {"note": "The harness went away."}, ":black_square_for_stop: "
         "Cancelled: The harness went away."),
        ("failed", {"note": "Slack said no"}, ":warning: Failed: Slack said no"),
        ("failed", {"note": "No answer within 30 seconds.", "error_code": "ASK_TIMEOUT"},
         ":hourglass: Timed out: no answer within 30 seconds."),
    ],
)  # fmt: skip
def test_every_ending_is_said_in_words(state: str, fields: dict[str, Any], line: str) -> None:
    rendered = render_final(finished(record({"options": opts(3)}), state, **fields))
    assert_final_shape(rendered)
    (outcome,) = [t for t in formatted_texts(rendered.blocks) if t.startswith(":")]
    assert outcome.startswith(line + " · <!date^")
    assert rendered.text.startswith(line.split(" ", 1)[1].rstrip(".") + ": ")


def test_a_form_submitted_with_nothing_says_skipped() -> None:
    rec = finished(
        record({"options": opts(3), "multiSelect": True}),
        "answered",
        [{"id": "q", "selected": []}],
        answered_by=ALICE,
    )
    rendered = render_final(rec)
    assert f":fast_forward: Skipped by <@{ALICE}>" in all_text(rendered.blocks)
    assert "→ skipped" in all_text(rendered.blocks)


LONG = "Ship it now: deploy build 2.3.1 to every production region, then run the smoke tests"


@pytest.mark.parametrize("count", [2, 12])
def test_shortened_labels_are_listed_in_full_before_choosing(count: int) -> None:
    options = [{"label": f"{i} {LONG} {'x' * 30}"} for i in range(count)]
    options[1]["description"] = "D" * 120
    rendered = render_open(record({"question": "Ship?", "options": options}))
    assert_within_limits(rendered)
    widget_at = rendered.blocks.index(actions_blocks(rendered.blocks)[0])
    listed = [b for b in rendered.blocks[:widget_at] if b["type"] == "rich_text"]
    lines = rich_lines(listed)
    for option in options:
        full = option["label"] + (f" — {option['description']}" if "description" in option else "")
        assert full in lines
    assert all(len(t) <= 75 for t in button_texts(rendered.blocks))


def test_labels_that_fit_are_not_listed_again() -> None:
    rendered = render_open(record({"question": "Pick", "options": opts(12)}))
    assert rich_lines(rendered.blocks) == ["Pick"]


def test_a_form_lists_the_options_its_checkboxes_shorten() -> None:
    options = [{"label": "short"}, {"label": "L" * 120, "description": "d" * 100}]
    rendered = render_open(record({"options": options, "multiSelect": True}))
    assert_within_limits(rendered)
    assert "L" * 120 + " — " + "d" * 100 in rich_lines(rendered.blocks)
    assert "short" not in rich_lines(rendered.blocks)


def test_full_labels_too_long_for_the_message_continue_in_the_thread() -> None:
    options = [{"label": f"{i:03d} " + "y" * 116} for i in range(100)]
    rendered = render_open(record({"question": "Which?", "options": options}))
    assert_within_limits(rendered)
    assert "full text of the options is in the thread" in all_text(rendered.blocks)
    threaded = [line for part in rendered.thread for line in rich_lines(part)]
    assert threaded == [option["label"] for option in options]


def test_the_modal_shows_the_question_once_with_its_detail() -> None:
    rec = record({"question": "What name?", "detail": "Short *and* <sweet>", "options": opts(2)})
    modal = render_text_modal(rec, 0)
    assert check_view(modal) == []
    assert all_text(modal["blocks"]).count("What name?") == 1
    assert "Short *and* <sweet>" in [
        b["text"]["text"] for b in modal["blocks"] if b["type"] == "section"
    ]


def test_the_modal_shows_the_beginning_of_a_long_detail() -> None:
    rec = record(plan(long_plan(20_000, "step ")))
    modal = render_text_modal(rec, 0)
    assert check_view(modal) == []
    (section,) = [b for b in modal["blocks"] if b["type"] == "section"]
    assert section["text"]["type"] == "mrkdwn"  # the plan formatted, as the message shows it
    assert section["text"]["text"].startswith("*Step 0")
    assert section["text"]["text"].endswith("_(The rest of the plan is in the message.)_")


def test_a_detail_past_the_thread_cap_is_one_file_in_full() -> None:
    from adapters.slack.render.blocks.overflow import MAX_THREAD_REPLIES, THREAD_PART

    detail = long_plan(THREAD_PART * (MAX_THREAD_REPLIES + 2), "step <&> ")
    rendered = render_open(record(plan(detail)))
    assert_within_limits(rendered)
    assert rendered.thread == []
    assert len(rendered.files) == 1
    attached = rendered.files[0]
    assert attached.content == detail  # whole and unescaped: a file is not mrkdwn
    assert attached.filename == "plan.md" and attached.title == "Plan"
    assert "in full" in attached.comment
    main, _ = _plan_pieces(rendered)
    assert CONTINUED.search(main)


@pytest.mark.slow
def test_details_up_to_the_thread_cap_stay_continuation_messages() -> None:
    from adapters.slack.render.blocks.overflow import MAX_THREAD_REPLIES, THREAD_PART

    detail = long_plan(THREAD_PART * (MAX_THREAD_REPLIES - 2), "step ")
    rendered = render_open(record(plan(detail)))
    assert rendered.files == []
    assert 0 < len(rendered.thread) <= MAX_THREAD_REPLIES


def test_a_deadline_is_shown_while_open_and_a_link_stays_on_the_record() -> None:
    rec = record({"options": opts(2)}, deadline=1_700_003_600.0, link="https://ci.example/r/1")
    rendered = render_open(rec)
    assert_within_limits(rendered)
    assert (
        ":alarm_clock: Answer by <!date^1700003600^{date_short_pretty} at {time}"
        "|2023-11-14 23:13 UTC>" in all_text(rendered.blocks)
    )
    (link,) = [b for b in buttons(rendered.blocks) if "url" in b]
    assert link["url"] == "https://ci.example/r/1"
    assert ids.parse_action_id(link["action_id"]) == "link"
    final = render_final(finished(rec, "cancelled", answered_by=ALICE))
    assert_within_limits(final)
    # The record keeps the link (the same URL button) and nothing else that can be clicked.
    (kept,) = [b for b in final.blocks if b["type"] == "actions"]
    assert kept["elements"] == [link]
    assert_final_shape(Rendered(final.text, [b for b in final.blocks if b is not kept]))
    assert "Answer by" not in all_text(final.blocks)


def test_a_shortened_outcome_line_never_cuts_a_date_or_a_mention_in_half() -> None:
    plan = {
        "question": "Approve?",
        "detail": "step " * 2400,
        "options": [{"label": "Approve"}, {"label": "Keep planning"}],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }
    declined = record(plan).next(
        state="answered",
        answered_by=ALICE,
        finished_at=1_700_000_000.0,
        answer=AskUserQuestionAnswer.model_validate(
            {"answers": [{"id": "q1", "selected": [], "custom": "too risky " * 300}]}
        ),
    )
    rendered = render_final(declined)
    assert_final_shape(rendered)
    assert_inert([*formatted_texts(rendered.blocks), rendered.text])
    line = rendered.blocks[-1]["elements"][0]["text"]
    assert line.startswith(f":x: Declined by <@{ALICE}>")
    assert line.endswith("|2023-11-14 22:13 UTC>")


def test_an_answer_choosing_a_blank_label_reads_as_skipped_or_as_its_text() -> None:
    questions = [item(id=f"q{n}", options=[{"label": ""}, {"label": "b"}]) for n in range(2)]
    rec = finished(
        record(*questions),
        "answered",
        [{"id": "q0", "selected": [""]}, {"id": "q1", "selected": [""], "custom": "why"}],
    )
    answers = [b for b in render_final(rec).blocks if "→" in all_text([b])]
    assert [all_text([b]) for b in answers] == ["→ skipped", "→ “why”"]
