"""interactions.py: Slack payloads (built from the rendered messages) -> typed interactions.

Every payload here is what Slack would send for a click on the blocks ``render_open``
produced (tests/slack_payloads.py), so a renaming on either side breaks these tests.
Anything that is not ours parses to ``None``, and nothing ever raises.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.slack.model import ids
from adapters.slack.model.interactions import (
    Dismiss,
    DraftChange,
    OpenText,
    Origin,
    Pick,
    Submit,
    TextAnswer,
    parse_block_actions,
    parse_view_submission,
)
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.render.blocks.message import render_open
from adapters.slack.render.blocks.modals import render_text_modal
from bot.questions.models import AskUserQuestionItem
from tests.slack_payloads import (
    ALICE,
    BOB,
    CHANNEL,
    MESSAGE_TS,
    choose,
    click,
    state_after,
    submit_view,
)

RID = "0123456789abcdef0123"
OTHER_RID = "fedcba9876543210fedc"


def record(*questions: dict[str, Any], **fields: Any) -> PendingRecord:
    items = []
    for i, q in enumerate(questions):
        q.setdefault("id", f"q{i}")
        q.setdefault("question", f"Question {i}?")
        items.append(AskUserQuestionItem.model_validate(q))
    fields.setdefault("id", RID)
    return PendingRecord(owner="proc-1", channel=CHANNEL, questions=items, **fields)


def opts(*labels: str) -> list[dict[str, str]]:
    return [{"label": label} for label in labels]


def numbered(n: int, prefix: str = "Option") -> list[dict[str, str]]:
    return [{"label": f"{prefix} {i}"} for i in range(n)]


TAP = record({"options": opts("Red", "Green", "Blue")})
MENU = record({"options": numbered(40)})
BIG_MENU = record({"options": numbered(250)})
TEXT = record({"question": "Why?"})
PLAN = record(
    {
        "question": "Approve?",
        "detail": "# Plan",
        "options": opts("Not yet", "Ship it"),
        "intent": {"kind": "plan-review", "approve": "Ship it"},
    }
)
FORM = record(
    {"options": opts("S", "M", "L")},
    {"options": opts("Cheese", "Ham", "Egg"), "multiSelect": True},
    {"options": numbered(12, "City")},
    {"options": numbered(30, "Tag"), "multiSelect": True},
    {"question": "Anything else?"},
)


def blocks_of(rec: PendingRecord) -> list[dict[str, Any]]:
    return render_open(rec).blocks


def origin(user: str = ALICE, **payload_fields: Any) -> Origin:
    return Origin(user=user, channel=CHANNEL, message_ts=MESSAGE_TS, **payload_fields)


def parsed_origin(payload: dict[str, Any]) -> Origin:
    user = payload["user"]
    return origin(trigger_id=payload["trigger_id"], user=user["id"], name=user["name"])


# --- block_actions ---------------------------------------------------------------------


@pytest.mark.parametrize(("label", "index"), [("Red", 0), ("Green", 1), ("Blue", 2)])
def test_a_tap_button_is_a_pick(label: str, index: int) -> None:
    payload = click(blocks_of(TAP), button_text=label)
    assert parse_block_actions(payload) == Pick(RID, 0, index, parsed_origin(payload))


def test_origin_names_the_person_the_message_and_the_trigger() -> None:
    payload = click(blocks_of(TAP), button_text="Red", user=BOB, channel="D0DM", ts="17.5")
    parsed = parse_block_actions(payload)
    assert isinstance(parsed, Pick)
    assert parsed.origin == Origin(
        BOB, "D0DM", "17.5", payload["trigger_id"], payload["user"]["name"]
    )


def test_origin_falls_back_to_channel_and_message_when_container_lacks_them() -> None:
    payload = click(blocks_of(TAP), button_text="Red")
    payload["container"] = {"type": "message"}
    parsed = parse_block_actions(payload)
    assert isinstance(parsed, Pick)
    assert (parsed.origin.channel, parsed.origin.message_ts) == (CHANNEL, MESSAGE_TS)


@pytest.mark.parametrize("rec", [MENU, BIG_MENU], ids=["options", "option_groups"])
def test_a_menu_choice_is_a_pick(rec: PendingRecord) -> None:
    payload = choose(blocks_of(rec), labels=["Option 37"])
    assert payload["actions"][0]["type"] == "static_select"
    assert parse_block_actions(payload) == Pick(RID, 0, 37, parsed_origin(payload))


def test_clearing_a_menu_is_not_a_pick() -> None:
    payload = choose(blocks_of(MENU), labels=[])
    assert payload["actions"][0]["selected_option"] is None
    assert parse_block_actions(payload) is None


def test_plan_buttons() -> None:
    blocks = blocks_of(PLAN)
    approve = click(blocks, button_text="Ship it")
    assert approve["actions"][0]["style"] == "primary"
    assert parse_block_actions(approve) == Pick(RID, 0, 1, parsed_origin(approve))
    decline = click(blocks, button_text="Not yet")
    assert parse_block_actions(decline) == Pick(RID, 0, 0, parsed_origin(decline))
    feedback = click(blocks, button_text="Decline with feedback…")
    assert parse_block_actions(feedback) == OpenText(RID, 0, parsed_origin(feedback))
    dismiss = click(blocks, button_text="Dismiss")
    assert parse_block_actions(dismiss) == Dismiss(RID, parsed_origin(dismiss))


@pytest.mark.parametrize(("rec", "text"), [(TAP, "Other…"), (MENU, "Other…"), (TEXT, "Answer…")])
def test_other_and_answer_open_the_text_modal(rec: PendingRecord, text: str) -> None:
    payload = click(blocks_of(rec), button_text=text)
    assert parse_block_actions(payload) == OpenText(RID, 0, parsed_origin(payload))


def test_form_other_buttons_name_their_question() -> None:
    blocks = blocks_of(FORM)
    for question in range(4):
        payload = click(blocks, button_text="Other…", question=question)
        assert parse_block_actions(payload) == OpenText(RID, question, parsed_origin(payload))
    payload = click(blocks, button_text="Answer…", question=4)
    assert parse_block_actions(payload) == OpenText(RID, 4, parsed_origin(payload))


@pytest.mark.parametrize(
    ("question", "kind", "labels", "expected"),
    [
        (0, "radio_buttons", ["M"], (1,)),
        (1, "checkboxes", ["Cheese", "Egg"], (0, 2)),
        (1, "checkboxes", ["Egg", "Cheese"], (2, 0)),  # the order Slack reports
        (1, "checkboxes", [], ()),  # every box unticked
        (2, "static_select", ["City 11"], (11,)),
        (2, "static_select", [], ()),
        (3, "multi_static_select", ["Tag 29", "Tag 3"], (29, 3)),
        (3, "multi_static_select", [], ()),
    ],
)
def test_form_widgets_are_draft_changes(
    question: int, kind: str, labels: list[str], expected: tuple[int, ...]
) -> None:
    payload = choose(blocks_of(FORM), question=question, labels=labels)
    assert payload["actions"][0]["type"] == kind
    assert parse_block_actions(payload) == DraftChange(
        RID, question, expected, parsed_origin(payload)
    )


def test_submit_reads_every_question_from_state_values() -> None:
    blocks = blocks_of(FORM)
    state = state_after(blocks, {0: ["L"], 1: ["Egg", "Cheese"], 3: ["Tag 7"]})
    payload = click(blocks, button_text="Submit", state_values=state)
    parsed = parse_block_actions(payload)
    assert isinstance(parsed, Submit)
    assert (parsed.request_id, parsed.origin) == (RID, parsed_origin(payload))
    assert dict(parsed.selections) == {0: (2,), 1: (2, 0), 2: (), 3: (7,)}


def test_submit_state_reflects_the_drafts_shown_as_initial_options() -> None:
    rec = FORM.model_copy(update={"drafts": [Draft(selected=[1]), Draft(selected=[0, 1])]})
    payload = click(blocks_of(rec), button_text="Submit")
    parsed = parse_block_actions(payload)
    assert isinstance(parsed, Submit)
    assert dict(parsed.selections) == {0: (1,), 1: (0, 1), 2: (), 3: ()}


def test_submit_ignores_other_apps_and_other_requests_in_the_state() -> None:
    blocks = blocks_of(FORM)
    foreign: dict[str, dict[str, dict[str, Any]]] = {
        "XTkTR": {"a": {"type": "static_select", "selected_option": {"value": "1"}}},
        ids.block_id(OTHER_RID, 0, "c0"): {
            ids.action_id("draft"): {"type": "radio_buttons", "selected_option": {"value": "2"}}
        },
        ids.block_id(RID, 4, "c0"): {"other": {"type": "checkboxes", "selected_options": []}},
        ids.block_id(RID, None, "s0"): {
            ids.action_id("draft"): {"type": "checkboxes", "selected_options": []}
        },
    }
    state = state_after(blocks, {0: ["S"]})
    state.update(foreign)
    parsed = parse_block_actions(click(blocks, button_text="Submit", state_values=state))
    assert isinstance(parsed, Submit)
    assert dict(parsed.selections) == {0: (0,), 1: (), 2: (), 3: ()}


def test_submit_drops_malformed_and_duplicate_option_values() -> None:
    blocks = blocks_of(FORM)
    state = state_after(blocks, {1: ["Cheese"]})
    (block_id,) = [b for b in state if (r := ids.parse_block_id(b)) and r.question == 1]
    state[block_id][ids.action_id("draft")]["selected_options"] = [
        {"value": "2"},
        {"value": "x"},
        {"value": "-1"},
        {"value": "2"},
        "junk",
        None,
        {"value": "0"},
    ]
    parsed = parse_block_actions(click(blocks, button_text="Submit", state_values=state))
    assert isinstance(parsed, Submit)
    assert parsed.selections[1] == (2, 0)


def test_dismiss_is_a_dismissal() -> None:
    for rec in (TAP, MENU, TEXT, FORM):
        payload = click(blocks_of(rec), button_text="Dismiss")
        assert parse_block_actions(payload) == Dismiss(RID, parsed_origin(payload))


def test_payload_shape_is_slacks() -> None:
    payload = click(blocks_of(TAP), button_text="Green")
    assert payload["type"] == "block_actions"
    assert set(payload["user"]) == {"id", "username", "name", "team_id"}
    assert payload["container"] == {
        "type": "message",
        "message_ts": MESSAGE_TS,
        "channel_id": CHANNEL,
        "is_ephemeral": False,
    }
    assert payload["channel"]["id"] == CHANNEL and payload["message"]["ts"] == MESSAGE_TS
    (action,) = payload["actions"]
    assert set(action) == {"action_id", "block_id", "text", "value", "type", "action_ts"}
    assert payload["message"]["blocks"][0]["block_id"]  # Slack fills in missing block ids


# --- view_submission -------------------------------------------------------------------


@pytest.mark.parametrize("question", [0, 4])
def test_modal_submission_is_a_text_answer(question: int) -> None:
    view = render_text_modal(FORM, question)
    payload = submit_view(view, "  my answer\nsecond line ")
    (input_block,) = [b for b in view["blocks"] if b["type"] == "input"]
    assert parse_view_submission(payload) == TextAnswer(
        RID,
        question,
        "  my answer\nsecond line ",
        Origin(ALICE, name=payload["user"]["name"]),
        input_block["block_id"],
    )


def test_an_empty_modal_submission_is_empty_text() -> None:
    payload = submit_view(render_text_modal(TEXT, 0), None, BOB)
    parsed = parse_view_submission(payload)
    assert isinstance(parsed, TextAnswer)
    assert (parsed.text, parsed.origin.user) == ("", BOB)


def test_plan_feedback_submission() -> None:
    parsed = parse_view_submission(submit_view(render_text_modal(PLAN, 0), "Add tests first"))
    assert isinstance(parsed, TextAnswer)
    assert (parsed.request_id, parsed.question, parsed.text) == (RID, 0, "Add tests first")


# --- not ours: None, never an exception -------------------------------------------------

BOLT_EXAMPLE: dict[str, Any] = {
    "type": "block_actions",
    "user": {"id": "W111", "username": "primary-owner", "name": "primary-owner", "team_id": "T111"},
    "api_app_id": "A111",
    "token": "verification_token",
    "container": {
        "type": "message", "message_ts": "111.222", "channel_id": "C111", "is_ephemeral": True
    },
    "trigger_id": "111.222.valid",
    "team": {"id": "T111", "domain": "workspace-domain"},
    "channel": {"id": "C111", "name": "test-channel"},
    "response_url": "https://hooks.slack.com/actions/T111/111/random-value",
    "actions": [
        {
            "action_id": "a",
            "block_id": "b",
            "text": {"type": "plain_text", "text": "Button", "emoji": True},
            "value": "click_me_123",
            "type": "button",
            "action_ts": "1596530385.194939",
        }
    ],
}  # fmt: skip


def _tap_click() -> dict[str, Any]:
    return click(blocks_of(TAP), button_text="Red")


def _with(payload: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    target = changed
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return changed


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("type",), "block_suggestion"),
        (("type",), "view_submission"),
        (("type",), None),
        (("user",), _DELETE),
        (("user",), None),
        (("user",), "U0ALICE001"),
        (("user", "id"), _DELETE),
        (("user", "id"), ""),
        (("user", "id"), 42),
        (("actions",), _DELETE),
        (("actions",), []),
        (("actions",), {"action_id": "aq1.pick.0"}),
        (("actions", 0), None),
        (("actions", 0), "aq1.pick.0"),
        (("actions", 0, "action_id"), "approve_button"),
        (("actions", 0, "action_id"), "aq2.pick.0"),
        (("actions", 0, "action_id"), None),
        (("actions", 0, "block_id"), "XTkTR"),
        (("actions", 0, "block_id"), f"aq2:{RID}:0:c0"),
        (("actions", 0, "block_id"), f"aq1:{RID}:0"),
        (("actions", 0, "block_id"), None),
        (("actions", 0, "value"), "abc"),
        (("actions", 0, "value"), "-1"),
        (("actions", 0, "value"), ""),
        (("actions", 0, "value"), None),
        (("actions", 0, "value"), 0),
    ],
)
def test_foreign_or_malformed_block_actions_are_not_ours(path: tuple[Any, ...], value: Any) -> None:
    assert parse_block_actions(_with(_tap_click(), path, value)) is None


def test_another_apps_click_is_not_ours() -> None:
    assert parse_block_actions(BOLT_EXAMPLE) is None


def test_a_question_widget_in_a_block_without_a_question_is_not_ours() -> None:
    payload = _with(_tap_click(), ("actions", 0, "block_id"), ids.block_id(RID, None, "c0"))
    assert parse_block_actions(payload) is None


@pytest.mark.parametrize("selected", ["2", ["2"], 2, {"text": "x"}, {"value": "x"}])
def test_a_malformed_menu_choice_is_not_ours(selected: Any) -> None:
    payload = choose(blocks_of(MENU), labels=["Option 2"])
    payload["actions"][0]["selected_option"] = selected
    assert parse_block_actions(payload) is None


@pytest.mark.parametrize("selected", ["2", None, {"value": "2"}, 7])
def test_malformed_selected_options_count_as_nothing_chosen(selected: Any) -> None:
    payload = choose(blocks_of(FORM), question=1, labels=["Ham"])
    payload["actions"][0]["selected_options"] = selected
    assert parse_block_actions(payload) == DraftChange(RID, 1, (), parsed_origin(payload))


def test_a_draft_action_without_any_selection_field_is_not_ours() -> None:
    payload = choose(blocks_of(FORM), question=0, labels=["S"])
    del payload["actions"][0]["selected_option"]
    assert parse_block_actions(payload) is None


@pytest.mark.parametrize(
    "junk",
    [None, [], "block_actions", 7, [("type", "block_actions")], {"type": "block_actions"}],
)
def test_junk_is_not_ours(junk: Any) -> None:
    assert parse_block_actions(cast(Any, junk)) is None
    assert parse_view_submission(cast(Any, junk)) is None


def _submission() -> dict[str, Any]:
    return submit_view(render_text_modal(FORM, 1), "hello")


def _input_block_id() -> str:
    return str(next(iter(_submission()["view"]["state"]["values"])))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("type",), "view_closed"),
        (("type",), "block_actions"),
        (("view",), _DELETE),
        (("view",), "V123"),
        (("view", "callback_id"), "view-id"),
        (("view", "callback_id"), "aq1.textx"),
        (("view", "callback_id"), None),
        (("view", "private_metadata"), "This is for you!"),
        (("view", "private_metadata"), f"aq2:{RID}:1"),
        (("view", "private_metadata"), f"aq1:{RID}:x"),
        (("view", "private_metadata"), _DELETE),
        (("view", "private_metadata"), f"aq1:{OTHER_RID}:1"),  # metadata and input disagree
        (("view", "state"), _DELETE),
        (("view", "state"), "values"),
        (("view", "state", "values"), {}),
        (("view", "state", "values"), ["x"]),
        (("user",), _DELETE),
        (("user", "id"), None),
    ],
)
def test_foreign_or_malformed_view_submissions_are_not_ours(
    path: tuple[Any, ...], value: Any
) -> None:
    assert parse_view_submission(_with(_submission(), path, value)) is None


def test_a_submission_whose_input_is_not_ours_is_not_ours() -> None:
    payload = _submission()
    values = payload["view"]["state"]["values"]
    (block_id,) = values
    values["hspI"] = {"maBWU": {"type": "plain_text_input", "value": "test"}}
    values[block_id] = {"maBWU": values[block_id][ids.action_id("text")]}
    assert parse_view_submission(payload) is None


@pytest.mark.parametrize("value", [None, 5, ["a"], {"text": "a"}])
def test_a_non_text_input_value_reads_as_empty_text(value: Any) -> None:
    payload = _submission()
    state = payload["view"]["state"]["values"][_input_block_id()]
    state[ids.action_id("text")]["value"] = value
    parsed = parse_view_submission(payload)
    assert isinstance(parsed, TextAnswer) and parsed.text == ""


# --- fuzz: nothing raises --------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)

_PAYLOAD_PATHS: list[tuple[Any, ...]] = [
    ("user",), ("user", "id"), ("container",), ("container", "channel_id"), ("channel",),
    ("message",), ("state",), ("state", "values"), ("actions",), ("actions", 0),
    ("actions", 0, "action_id"), ("actions", 0, "block_id"), ("actions", 0, "value"),
    ("actions", 0, "selected_option"), ("actions", 0, "selected_options"), ("trigger_id",),
]  # fmt: skip
_VIEW_PATHS: list[tuple[Any, ...]] = [
    ("user",), ("view",), ("view", "callback_id"), ("view", "private_metadata"),
    ("view", "state"), ("view", "state", "values"),
]  # fmt: skip


def _graft(payload: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``payload`` with ``value`` at ``path``, wherever the path still exists."""
    changed = copy.deepcopy(payload)
    target = changed
    for key in path[:-1]:
        try:
            target = target[key]
        except (KeyError, IndexError, TypeError):
            return changed
    with contextlib.suppress(IndexError, TypeError):
        target[path[-1]] = value
    return changed


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["tap", "menu", "draft", "submit"]),
    st.lists(st.tuples(st.sampled_from(_PAYLOAD_PATHS), json_values), max_size=4),
)
def test_mangled_block_actions_never_raise(kind: str, grafts: list[tuple[Any, Any]]) -> None:
    if kind == "tap":
        payload = click(blocks_of(TAP), button_text="Red")
    elif kind == "menu":
        payload = choose(blocks_of(MENU), labels=["Option 3"])
    elif kind == "draft":
        payload = choose(blocks_of(FORM), question=1, labels=["Ham"])
    else:
        payload = click(blocks_of(FORM), button_text="Submit")
    for path, value in grafts:
        payload = _graft(payload, path, value)
    result = parse_block_actions(payload)
    assert result is None or isinstance(result, Pick | DraftChange | OpenText | Submit | Dismiss)


@pytest.mark.slow
@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(_VIEW_PATHS), json_values), max_size=4))
def test_mangled_view_submissions_never_raise(grafts: list[tuple[Any, Any]]) -> None:
    payload: Any = _submission()
    for path, value in grafts:
        payload = _graft(payload, path, value)
    result = parse_view_submission(payload)
    assert result is None or isinstance(result, TextAnswer)


@pytest.mark.slow
@given(json_values)
def test_arbitrary_json_never_raises(value: Any) -> None:
    parse_block_actions(
        value if isinstance(value, dict) else {"type": "block_actions", "actions": value}
    )
    parse_view_submission(
        value if isinstance(value, dict) else {"type": "view_submission", "view": value}
    )
