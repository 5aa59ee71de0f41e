"""The Block Kit limits checker: valid payloads pass, each limit broken by one is named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from adapters.slack import blockkit as bk
from adapters.slack.sandbox.blockcheck import check_message, check_view, message_problems
from adapters.slack.sandbox.blockcheck import table as lim

Json = dict[str, Any]


def plain(text: str) -> Json:
    return {"type": "plain_text", "text": text, "emoji": True}


def md(text: str) -> Json:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def option(text: str, value: str, **extra: Any) -> Json:
    return {"text": plain(text), "value": value, **extra}


def options(n: int, prefix: str = "o") -> list[Json]:
    return [option(f"{prefix}{i}", f"{prefix}{i}") for i in range(n)]


def button(text: str = "Go", action_id: str = "go", **extra: Any) -> Json:
    return {"type": "button", "text": plain(text), "action_id": action_id, **extra}


def buttons(n: int) -> list[Json]:
    return [button(f"b{i}", f"b{i}") for i in range(n)]


def actions(*elements: Json, **extra: Any) -> Json:
    return {"type": "actions", "elements": list(elements), **extra}


def section(text: str = "hi", **extra: Any) -> Json:
    return {"type": "section", "text": md(text), **extra}


def select(n: int = 3, **extra: Any) -> Json:
    return {"type": "static_select", "action_id": "pick", "options": options(n), **extra}


def text_input(**extra: Any) -> Json:
    return {"type": "plain_text_input", "action_id": "text", **extra}


def input_block(element: Json | None = None, **extra: Any) -> Json:
    block = {"type": "input", "block_id": "in", "label": plain("Answer"), **extra}
    block["element"] = element if element is not None else text_input()
    return block


def confirm(**extra: Any) -> Json:
    dialog = {"title": plain("Sure?"), "text": md("Really?"), "confirm": plain("Yes")}
    return {**dialog, "deny": plain("No"), **extra}


def modal(*blocks: Json, **extra: Any) -> Json:
    view = {"type": "modal", "title": plain("Question"), "submit": plain("Send")}
    return {**view, "close": plain("Cancel"), "blocks": list(blocks), **extra}


VALID_MESSAGE: list[Json] = [
    {"type": "header", "block_id": "head", "text": plain("Deploy plan")},
    section(
        "*Pick one*",
        block_id="q1",
        accessory=button("Details", "details", url="https://example.com", style="primary"),
        expand=True,
    ),
    {"type": "section", "block_id": "facts", "fields": [md("*Env*"), md("prod")]},
    {"type": "context", "block_id": "ctx", "elements": [md("asked by agent"), plain("now")]},
    {"type": "divider", "block_id": "div"},
    actions(
        button("Approve", "approve", value="0", style="primary"),
        button("Decline", "decline", value="1", style="danger", confirm=confirm(style="danger")),
        {
            "type": "static_select",
            "action_id": "menu",
            "placeholder": plain("Choose"),
            "option_groups": [
                {"label": plain("A"), "options": options(2, "a")},
                {"label": plain("B"), "options": options(2, "b")},
            ],
            "initial_option": option("b1", "b1"),
        },
        {
            "type": "multi_static_select",
            "action_id": "multi",
            "options": options(3),
            "initial_options": [option("o2", "o2")],
            "max_selected_items": 2,
        },
        {"type": "overflow", "action_id": "more", "options": options(5)},
        block_id="acts",
    ),
    actions(
        {
            "type": "checkboxes",
            "action_id": "boxes",
            "options": [option("one", "1", description=md("_first_")), *options(9)],
        },
        {"type": "radio_buttons", "action_id": "radio", "options": options(10)},
        block_id="choices",
    ),
    input_block(
        text_input(
            multiline=True,
            min_length=0,
            max_length=3000,
            placeholder=plain("Type"),
            dispatch_action_config={"trigger_actions_on": ["on_enter_pressed"]},
        ),
        block_id="other",
        hint=plain("Free text"),
        optional=True,
        dispatch_action=True,
    ),
    {"type": "markdown", "text": "# Plan\n\n1. build\n2. ship"},
    {
        "type": "rich_text",
        "block_id": "rich",
        "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "hi"}]}],
    },
    {"type": "image", "block_id": "img", "image_url": "https://example.com/a.png", "alt_text": "a"},
]

VALID_MODAL: Json = modal(
    section("Why?", block_id="why"),
    input_block(text_input(multiline=True, max_length=3000)),
    input_block({"type": "radio_buttons", "action_id": "r", "options": options(3)}, block_id="in2"),
    private_metadata='{"q": "r1"}',
    callback_id="aq.other",
    external_id="ext-1",
    notify_on_close=True,
)


def test_a_valid_message_passes() -> None:
    assert check_message(VALID_MESSAGE, text="Deploy plan: approve or decline") == []


def test_a_valid_modal_passes() -> None:
    assert check_view(VALID_MODAL) == []


def test_an_empty_message_and_text_only_pass() -> None:
    assert check_message([]) == []
    assert check_message([], text="x" * bk.MAX_MESSAGE_TEXT) == []


AT_LIMIT: list[tuple[str, list[Json]]] = [
    ("50 blocks", [{"type": "divider"}] * bk.MAX_BLOCKS_MESSAGE),
    ("section text 3000", [section("x" * 3000)]),
    ("10 fields of 2000", [{"type": "section", "fields": [md("x" * 1000)] * 10}]),
    ("header 150", [{"type": "header", "text": plain("x" * 150)}]),
    ("context 10", [{"type": "context", "elements": [md("x")] * 10}]),
    ("actions 25", [actions(*buttons(25))]),
    ("button text 75", [actions(button("x" * 75))]),
    ("button value 2000", [actions(button(value="x" * 2000))]),
    ("button url 3000", [actions(button(url="x" * 3000))]),
    ("block_id 255", [section(block_id="x" * 255)]),
    ("action_id 255", [actions(button(action_id="x" * 255))]),
    ("100 options", [actions(select(100))]),
    ("option text 75 value 150", [actions(select(0, options=[option("x" * 75, "v" * 150)]))]),
    ("10 checkboxes", [actions({"type": "checkboxes", "options": options(10)})]),
    ("input max_length 1", [input_block(text_input(max_length=1))]),
    ("markdown 12000", [{"type": "markdown", "text": "x" * 12000}]),
    ("budget 12000", [section("x" * 3000)] * 4),
]


@pytest.mark.parametrize(("blocks"), [b for _, b in AT_LIMIT], ids=[n for n, _ in AT_LIMIT])
def test_payloads_at_each_limit_pass(blocks: list[Json]) -> None:
    assert check_message(blocks) == []


def too_long(path: str, n: int, limit: int) -> str:
    return f"{path}: {n} characters, Slack allows at most {limit}"


def too_many(path: str, n: int, limit: int) -> str:
    return f"{path}: {n} items, Slack allows at most {limit}"


E0 = "blocks[0].elements[0]"

MESSAGE_CASES: list[tuple[str, list[Json], list[str]]] = [
    (
        "51 blocks",
        [{"type": "divider"}] * 51,
        ["blocks: 51 blocks, Slack allows at most 50 in a message"],
    ),
    (
        "block_id 256",
        [section(block_id="x" * 256)],
        [too_long("blocks[0].block_id", 256, 255)],
    ),
    (
        "duplicate block_id",
        [section(block_id="q"), {"type": "divider", "block_id": "q"}],
        ["blocks[1].block_id: 'q' is already used by blocks[0]"],
    ),
    ("section text 3001", [section("x" * 3001)], [too_long("blocks[0].text.text", 3001, 3000)]),
    (
        "empty text",
        [section("")],
        ["blocks[0].text.text: 0 characters, Slack requires at least 1"],
    ),
    (
        "11 fields",
        [{"type": "section", "fields": [md("x")] * 11}],
        [too_many("blocks[0].fields", 11, 10)],
    ),
    (
        "field 2001",
        [{"type": "section", "fields": [md("x"), md("x" * 2001)]}],
        [too_long("blocks[0].fields[1].text", 2001, 2000)],
    ),
    ("section without text", [{"type": "section"}], ["blocks[0]: a section needs text or fields"]),
    (
        "header 151",
        [{"type": "header", "text": plain("x" * 151)}],
        [too_long("blocks[0].text.text", 151, 150)],
    ),
    (
        "header mrkdwn",
        [{"type": "header", "text": md("x")}],
        ["blocks[0].text.type: must be plain_text, got 'mrkdwn'"],
    ),
    (
        "text type",
        [{"type": "section", "text": {"type": "markdown", "text": "x"}}],
        ["blocks[0].text.type: must be plain_text or mrkdwn, got 'markdown'"],
    ),
    (
        "11 context elements",
        [{"type": "context", "elements": [md("x")] * 11}],
        [too_many("blocks[0].elements", 11, 10)],
    ),
    ("26 actions", [actions(*buttons(26))], [too_many("blocks[0].elements", 26, 25)]),
    ("empty actions", [actions()], ["blocks[0].elements: 0 items, Slack requires at least 1"]),
    (
        "duplicate action_id",
        [actions(button("a", "x"), button("b", "x"))],
        ["blocks[0].elements[1].action_id: 'x' is already used by blocks[0].elements[0]"],
    ),
    (
        "action_id 256",
        [actions(button(action_id="x" * 256))],
        [too_long(f"{E0}.action_id", 256, 255)],
    ),
    ("button text 76", [actions(button("x" * 76))], [too_long(f"{E0}.text.text", 76, 75)]),
    (
        "button value 2001",
        [actions(button(value="x" * 2001))],
        [too_long(f"{E0}.value", 2001, 2000)],
    ),
    ("button url 3001", [actions(button(url="x" * 3001))], [too_long(f"{E0}.url", 3001, 3000)]),
    (
        "button style",
        [actions(button(style="secondary"))],
        [f"{E0}.style: must be 'primary' or 'danger', got 'secondary'"],
    ),
    (
        "accessibility label 76",
        [actions(button(accessibility_label="x" * 76))],
        [too_long(f"{E0}.accessibility_label", 76, 75)],
    ),
    (
        "confirm title 101",
        [actions(button(confirm=confirm(title=plain("x" * 101))))],
        [too_long(f"{E0}.confirm.title.text", 101, 100)],
    ),
    (
        "confirm text 301",
        [actions(button(confirm=confirm(text=md("x" * 301))))],
        [too_long(f"{E0}.confirm.text.text", 301, 300)],
    ),
    (
        "confirm button 31",
        [actions(button(confirm=confirm(confirm=plain("x" * 31))))],
        [too_long(f"{E0}.confirm.confirm.text", 31, 30)],
    ),
    (
        "deny button 31",
        [actions(button(confirm=confirm(deny=plain("x" * 31))))],
        [too_long(f"{E0}.confirm.deny.text", 31, 30)],
    ),
    ("101 options", [actions(select(101))], [too_many(f"{E0}.options", 101, 100)]),
    (
        "options and groups",
        [actions(select(option_groups=[{"label": plain("g"), "options": options(1, "g")}]))],
        [f"{E0}: give options or option_groups, not both"],
    ),
    (
        "no options",
        [actions({"type": "static_select", "action_id": "s"})],
        [f"{E0}.options: required (or option_groups)"],
    ),
    (
        "101 option groups",
        [
            actions(
                {
                    "type": "static_select",
                    "option_groups": [
                        {"label": plain("g"), "options": [option("x", f"v{i}")]} for i in range(101)
                    ],
                }
            )
        ],
        [too_many(f"{E0}.option_groups", 101, 100)],
    ),
    (
        "group of 101 options",
        [
            actions(
                {
                    "type": "static_select",
                    "option_groups": [{"label": plain("g"), "options": options(101)}],
                }
            )
        ],
        [too_many(f"{E0}.option_groups[0].options", 101, 100)],
    ),
    (
        "group label 76",
        [
            actions(
                {
                    "type": "static_select",
                    "option_groups": [{"label": plain("x" * 76), "options": options(1)}],
                }
            )
        ],
        [too_long(f"{E0}.option_groups[0].label.text", 76, 75)],
    ),
    (
        "placeholder 151",
        [actions(select(placeholder=plain("x" * 151)))],
        [too_long(f"{E0}.placeholder.text", 151, 150)],
    ),
    (
        "initial option not an option",
        [actions(select(initial_option=option("o1", "nope")))],
        [f"{E0}.initial_option: matches no option (value 'nope')"],
    ),
    (
        "initial option text differs",
        [actions(select(initial_option=option("other", "o1")))],
        [f"{E0}.initial_option: matches no option (value 'o1')"],
    ),
    (
        "max_selected_items 0",
        [actions({**select(), "type": "multi_static_select", "max_selected_items": 0})],
        [f"{E0}.max_selected_items: is 0, Slack requires at least 1"],
    ),
    (
        "initial options",
        [
            actions(
                {
                    **select(),
                    "type": "multi_static_select",
                    "initial_options": [option("o0", "o0"), option("x", "x")],
                }
            )
        ],
        [f"{E0}.initial_options[1]: matches no option (value 'x')"],
    ),
    (
        "option text 76",
        [actions(select(0, options=[option("x" * 76, "v")]))],
        [too_long(f"{E0}.options[0].text.text", 76, 75)],
    ),
    (
        "option value 151",
        [actions(select(0, options=[option("x", "v" * 151)]))],
        [too_long(f"{E0}.options[0].value", 151, 150)],
    ),
    (
        "option description 76",
        [actions(select(0, options=[option("x", "v", description=plain("d" * 76))]))],
        [too_long(f"{E0}.options[0].description.text", 76, 75)],
    ),
    (
        "duplicate option value",
        [actions(select(0, options=[option("a", "v"), option("b", "v")]))],
        [f"{E0}.options[1].value: 'v' is already used by {E0}.options[0]"],
    ),
    (
        "mrkdwn option in a menu",
        [actions(select(0, options=[{"text": md("a"), "value": "v"}]))],
        [f"{E0}.options[0].text.type: must be plain_text, got 'mrkdwn'"],
    ),
    (
        "11 checkboxes",
        [actions({"type": "checkboxes", "options": options(11)})],
        [too_many(f"{E0}.options", 11, 10)],
    ),
    (
        "11 radio buttons",
        [actions({"type": "radio_buttons", "options": options(11)})],
        [too_many(f"{E0}.options", 11, 10)],
    ),
    (
        "no checkboxes",
        [actions({"type": "checkboxes", "options": []})],
        [f"{E0}.options: 0 items, Slack requires at least 1"],
    ),
    (
        "6 overflow options",
        [actions({"type": "overflow", "options": options(6)})],
        [too_many(f"{E0}.options", 6, 5)],
    ),
    (
        "max_length 3001",
        [input_block(text_input(max_length=3001))],
        ["blocks[0].element.max_length: is 3001, Slack allows at most 3000"],
    ),
    (
        "max_length 0",
        [input_block(text_input(max_length=0))],
        ["blocks[0].element.max_length: is 0, Slack requires at least 1"],
    ),
    (
        "min_length 3001",
        [input_block(text_input(min_length=3001))],
        ["blocks[0].element.min_length: is 3001, Slack allows at most 3000"],
    ),
    (
        "min_length -1",
        [input_block(text_input(min_length=-1))],
        ["blocks[0].element.min_length: is -1, Slack requires at least 0"],
    ),
    (
        "input placeholder 151",
        [input_block(text_input(placeholder=plain("x" * 151)))],
        [too_long("blocks[0].element.placeholder.text", 151, 150)],
    ),
    (
        "dispatch trigger",
        [input_block(text_input(dispatch_action_config={"trigger_actions_on": ["on_blur"]}))],
        [
            "blocks[0].element.dispatch_action_config.trigger_actions_on[0]: "
            "must be 'on_enter_pressed' or 'on_character_entered', got 'on_blur'"
        ],
    ),
    (
        "label 2001",
        [input_block(label=plain("x" * 2001))],
        [too_long("blocks[0].label.text", 2001, 2000)],
    ),
    (
        "hint 2001",
        [input_block(hint=plain("x" * 2001))],
        [too_long("blocks[0].hint.text", 2001, 2000)],
    ),
    (
        "button in an input",
        [input_block(button())],
        ["blocks[0].element.type: a button is not allowed in an input block"],
    ),
    (
        "markdown over 12000 in total",
        [{"type": "markdown", "text": "x" * 6000}, {"type": "markdown", "text": "x" * 6001}],
        [
            "blocks: 12001 characters in markdown blocks, "
            "Slack allows at most 12000 in one message",
            "blocks: 12001 characters of text in all blocks, "
            "Slack allows at most 12000 (msg_blocks_too_long)",
        ],
    ),
    (
        "text budget 12001",
        [*[section("x" * 3000)] * 4, {"type": "context", "elements": [md("y")]}],
        [
            "blocks: 12001 characters of text in all blocks, "
            "Slack allows at most 12000 (msg_blocks_too_long)"
        ],
    ),
    (
        "budget counts rich text",
        [
            *[section("x" * 3000)] * 4,
            {
                "type": "rich_text",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": "y"}]}
                ],
            },
        ],
        [
            "blocks: 12001 characters of text in all blocks, "
            "Slack allows at most 12000 (msg_blocks_too_long)"
        ],
    ),
    ("unknown block", [{"type": "video"}], ["blocks[0].type: unsupported block type 'video'"]),
    (
        "unknown element",
        [actions({"type": "users_select"})],
        [f"{E0}.type: unsupported element type 'users_select'"],
    ),
    (
        "unknown field",
        [section(colour="red")],
        ["blocks[0].colour: not a field of a section block"],
    ),
    (
        "emoji on mrkdwn",
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x", "emoji": True}}],
        ["blocks[0].text.emoji: only plain_text takes emoji"],
    ),
    ("not a block", ["divider"], ["blocks[0]: must be a block object, got str"]),  # type: ignore[list-item]
]


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [(b, e) for _, b, e in MESSAGE_CASES],
    ids=[n for n, _, _ in MESSAGE_CASES],
)
def test_each_message_limit_broken_by_one_is_named(blocks: list[Json], expected: list[str]) -> None:
    assert check_message(blocks) == expected


def test_message_text_over_40000_is_an_error_and_over_4000_a_warning() -> None:
    assert check_message([], text="x" * 40_001) == [too_long("text", 40_001, 40_000)]
    assert check_message([], text="x" * 4001) == []
    (warning,) = message_problems([], "x" * 4001)
    assert (
        warning.warning and str(warning) == "text: 4001 characters, Slack recommends at most 4000"
    )


def test_problems_carry_codes() -> None:
    budget = [section("x" * 3000)] * 5
    assert [p.code for p in message_problems(budget)] == [bk.MSG_BLOCKS_TOO_LONG]
    assert [p.code for p in message_problems([actions(button("x" * 76))])] == [bk.INVALID_BLOCKS]
    assert [p.code for p in message_problems([], "x" * 40_001)] == [bk.MSG_TOO_LONG]


def test_block_text_length_counts_display_text_only() -> None:
    blocks = [
        section("abc", block_id="x" * 20, accessory=button("Go", value="v" * 100)),
        {"type": "markdown", "text": "12345"},
    ]
    assert bk.block_text_length(blocks) == 3 + 2 + 5


def replace(view: Json, **changes: Any) -> Json:
    return {**view, **changes}


VIEW_CASES: list[tuple[str, Json, list[str]]] = [
    (
        "type home",
        replace(VALID_MODAL, type="home"),
        [
            "title: a home view has none",
            "close: a home view has none",
            "submit: a home view has none",
        ],
    ),
    (
        "type page",
        replace(VALID_MODAL, type="page"),
        ["type: must be 'modal' or 'home', got 'page'"],
    ),
    ("title 25", replace(VALID_MODAL, title=plain("x" * 25)), [too_long("title.text", 25, 24)]),
    ("no title", {k: v for k, v in VALID_MODAL.items() if k != "title"}, ["title: required"]),
    ("submit 25", replace(VALID_MODAL, submit=plain("x" * 25)), [too_long("submit.text", 25, 24)]),
    (
        "no submit with an input",
        {k: v for k, v in VALID_MODAL.items() if k != "submit"},
        ["submit: required when the view has an input block"],
    ),
    ("close 25", replace(VALID_MODAL, close=plain("x" * 25)), [too_long("close.text", 25, 24)]),
    (
        "title mrkdwn",
        replace(VALID_MODAL, title={"type": "mrkdwn", "text": "x"}),
        ["title.type: must be plain_text, got 'mrkdwn'"],
    ),
    (
        "private_metadata 3001",
        replace(VALID_MODAL, private_metadata="x" * 3001),
        [too_long("private_metadata", 3001, 3000)],
    ),
    (
        "callback_id 256",
        replace(VALID_MODAL, callback_id="x" * 256),
        [too_long("callback_id", 256, 255)],
    ),
    (
        "external_id 256",
        replace(VALID_MODAL, external_id="x" * 256),
        [too_long("external_id", 256, 255)],
    ),
    (
        "101 blocks",
        replace(VALID_MODAL, blocks=[{"type": "divider"}] * 101),
        ["blocks: 101 blocks, Slack allows at most 100 in a modal"],
    ),
    (
        "markdown in a modal",
        modal({"type": "markdown", "text": "x"}),
        ["blocks[0].type: markdown blocks are allowed only in messages"],
    ),
    (
        "duplicate block_id",
        modal(section(block_id="a"), section(block_id="a")),
        ["blocks[1].block_id: 'a' is already used by blocks[0]"],
    ),
    ("no blocks", {k: v for k, v in VALID_MODAL.items() if k != "blocks"}, ["blocks: required"]),
]


@pytest.mark.parametrize(
    ("view", "expected"), [(v, e) for _, v, e in VIEW_CASES], ids=[n for n, _, _ in VIEW_CASES]
)
def test_each_modal_limit_broken_by_one_is_named(view: Json, expected: list[str]) -> None:
    assert check_view(view) == expected


def test_a_modal_of_100_blocks_passes() -> None:
    assert check_view(modal(*[{"type": "divider"}] * 100)) == []


def test_a_modal_without_inputs_needs_no_submit() -> None:
    view = {"type": "modal", "title": plain("Done"), "blocks": [section("Thanks")]}
    assert check_view(view) == []


def test_a_view_that_is_not_an_object() -> None:
    assert check_view([]) == ["view: must be an object, got list"]  # type: ignore[arg-type]


# Cross-checks against slack_sdk's models, where slack_sdk validates.


def sdk_dicts(blocks: list[Json]) -> list[Json]:
    parsed = Block.parse_all(blocks)
    assert len(parsed) == len(blocks)  # parse_all drops unknown types silently
    return [b.to_dict() for b in parsed]


def test_slack_sdk_accepts_the_valid_message() -> None:
    dicts = sdk_dicts(VALID_MESSAGE)
    assert check_message(dicts) == []


def test_slack_sdk_accepts_the_valid_modal() -> None:
    view = View(**VALID_MODAL).to_dict()
    assert check_view(view) == []


SDK_REJECTS: list[tuple[str, Callable[[], object]]] = [
    ("section text", lambda: sdk_dicts([section("x" * 3001)])),
    ("fields", lambda: sdk_dicts([{"type": "section", "fields": [md("x")] * 11}])),
    ("header", lambda: sdk_dicts([{"type": "header", "text": plain("x" * 151)}])),
    ("actions", lambda: sdk_dicts([actions(*buttons(26))])),
    ("context", lambda: sdk_dicts([{"type": "context", "elements": [md("x")] * 11}])),
    ("block_id", lambda: sdk_dicts([section(block_id="x" * 256)])),
    ("button text", lambda: sdk_dicts([actions(button("x" * 76))])),
    ("button value", lambda: sdk_dicts([actions(button(value="x" * 2001))])),
    ("input label", lambda: sdk_dicts([input_block(label=plain("x" * 2001))])),
    ("modal title", lambda: View(**replace(VALID_MODAL, title=plain("x" * 25))).to_dict()),
    (
        "private_metadata",
        lambda: View(**replace(VALID_MODAL, private_metadata="x" * 3001)).to_dict(),
    ),
]


@pytest.mark.parametrize("build", [b for _, b in SDK_REJECTS], ids=[n for n, _ in SDK_REJECTS])
def test_slack_sdk_agrees_where_it_validates(build: Callable[[], object]) -> None:
    with pytest.raises(SlackObjectFormationError):
        build()


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        ([section("x" * 3001)], 1),
        ([{"type": "section", "fields": [md("x")] * 11}], 1),
        ([{"type": "header", "text": plain("x" * 151)}], 1),
        ([actions(*buttons(26))], 1),
        ([actions(button("x" * 76))], 1),
    ],
)
def test_the_checker_flags_what_slack_sdk_rejects(blocks: list[Json], expected: int) -> None:
    assert len(check_message(blocks)) == expected


def test_limits_are_exported_with_slacks_numbers() -> None:
    assert (bk.MAX_BLOCKS_MESSAGE, bk.MAX_BLOCKS_MODAL) == (50, 100)
    assert (bk.MAX_BUTTON_TEXT, bk.MAX_OPTION_TEXT, lim.MAX_OPTION_VALUE) == (75, 75, 150)
    assert (bk.MAX_OPTIONS, bk.MAX_CHECKBOX_OPTIONS, lim.MAX_ACTIONS_ELEMENTS) == (100, 10, 25)
    assert (bk.MAX_SECTION_TEXT, bk.MAX_HEADER_TEXT, bk.MAX_MARKDOWN_TOTAL) == (3000, 150, 12000)
    assert (bk.MAX_PRIVATE_METADATA, bk.MAX_MODAL_TITLE, bk.MAX_INPUT_LENGTH) == (3000, 24, 3000)
    assert bk.MESSAGE_TEXT_BUDGET == 12_000


# The check before a post (adapters.slack.blockkit): slack_sdk's models and the totals.


@pytest.mark.parametrize("blocks", [b for _, b in AT_LIMIT], ids=[n for n, _ in AT_LIMIT])
def test_the_check_before_a_post_passes_each_limit_met(blocks: list[Json]) -> None:
    assert bk.check_message(blocks) == []


@pytest.mark.parametrize(
    ("blocks", "path"),
    [
        ([section("x" * 3001)], "blocks[0]"),
        ([actions(button("x" * 76))], "blocks[0]"),
        ([actions(button(confirm=confirm(text=md("x" * 301))))], "blocks[0]"),
        ([actions(select(101))], "blocks[0]"),
        ([section(accessory=button("x" * 76))], "blocks[0]"),
        ([{"type": "context", "elements": [md("x")] * 11}], "blocks[0]"),
        ([section(), {"type": "header", "text": plain("x" * 151)}], "blocks[1]"),
        ([{"type": "divider"}] * 51, "blocks"),
        ([{"type": "markdown", "text": "x" * 6001}] * 2, "blocks"),
        ([section("x" * 3000)] * 4 + [section("x")], "blocks"),
    ],
)
def test_the_check_before_a_post_names_a_broken_limit(blocks: list[Json], path: str) -> None:
    problems = bk.check_message(blocks)  # markdown counts toward both totals
    assert problems and all(problem.startswith(f"{path}: ") for problem in problems)


def test_the_check_before_a_post_leaves_rich_text_and_the_rest_to_slack() -> None:
    rich = {"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": []}]}
    assert bk.check_message([rich, {"type": "section", "block_id": "a"}]) != []  # no text
    assert bk.check_message([rich, actions(button("a", "x"), button("b", "x"))]) == []
    assert bk.check_message([], "x" * 40_001) == [
        "text: 40001 characters, Slack allows at most 40000"
    ]
