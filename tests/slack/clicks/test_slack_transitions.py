"""transitions.py: what each interaction does to a record, and the answer encoding (§6.2).

Interactions are parsed from payloads built on the rendered message wherever the test is
about a person's action, so these tests follow a click from Slack's JSON to the record.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from adapters.slack.clicks.transitions import (
    Modal,
    Refuse,
    Save,
    decide,
    encode_answer,
)
from adapters.slack.model import ids
from adapters.slack.model.interactions import (
    ConfirmSkip,
    Dismiss,
    DraftChange,
    Interaction,
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
from adapters.slack.render.blocks.modals import render_skip_modal, render_text_modal
from adapters.slack.render.messages import ENTER_AN_ANSWER
from adapters.slack.render.outcomes import refusal
from adapters.slack.sandbox.blockcheck import check_view
from adapters.slack.stores import MemoryPendingStore, mutate
from bot.questions.models import AskUserQuestionItem
from tests.slack_payloads import ALICE, BOB, choose, click, state_after, submit_view

RID = "0123456789abcdef0123"
NOW = 1_700_000_123.0
LONG = "A very long option label " * 6  # 150 characters: shortened on the button


def item(**wire: Any) -> AskUserQuestionItem:
    wire.setdefault("id", "q")
    wire.setdefault("question", "Which?")
    return AskUserQuestionItem.model_validate(wire)


def opts(*labels: str) -> list[dict[str, str]]:
    return [{"label": label} for label in labels]


def record(*questions: dict[str, Any], **fields: Any) -> PendingRecord:
    items = [item(**{"id": f"q{i}", **q}) for i, q in enumerate(questions)]
    return PendingRecord(id=RID, owner="proc-1", channel="C0QUESTION", questions=items, **fields)


def interaction_of(payload: dict[str, Any]) -> Interaction:
    parsed = parse_block_actions(payload)
    assert parsed is not None, payload["actions"]
    return parsed


def finish(decision: object) -> PendingRecord:
    assert isinstance(decision, Save) and decision.rerender, decision
    assert not decision.record.is_open
    return decision.record


def wire(rec: PendingRecord) -> list[dict[str, Any]]:
    assert rec.answer is not None
    return rec.answer.to_wire()["answers"]  # type: ignore[no-any-return]


TAP = record({"options": opts("Red", "Green", LONG)})
MENU = record({"options": [{"label": f"City {i}"} for i in range(7)] + [{"label": LONG}]})
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
    {"question": "Anything else?"},
)


# --- encoding (§6.2) -------------------------------------------------------------------


def test_encoding_single_select() -> None:
    questions = [item(options=opts("A", "B"))]
    assert encode_answer(questions, [Draft(selected=[1])]).to_wire() == {
        "answers": [{"id": "q", "selected": ["B"]}]
    }


def test_single_select_custom_replaces_the_choice() -> None:
    questions = [item(options=opts("A", "B"))]
    answer = encode_answer(questions, [Draft(selected=[1], custom="  something else \n")])
    assert answer.to_wire() == {
        "answers": [{"id": "q", "selected": [], "custom": "something else"}]
    }


def test_multi_select_custom_is_added_and_labels_follow_option_order() -> None:
    questions = [item(options=opts("A", "B", "C"), multiSelect=True)]
    answer = encode_answer(questions, [Draft(selected=[2, 0, 2], custom="and D")])
    assert answer.to_wire() == {"answers": [{"id": "q", "selected": ["A", "C"], "custom": "and D"}]}


def test_skip_has_no_custom_key() -> None:
    questions = [item(options=opts("A")), item(id="r"), item(id="s", multiSelect=True)]
    answer = encode_answer(questions, [Draft(), Draft(custom="   ")])
    assert answer.to_wire() == {
        "answers": [
            {"id": "q", "selected": []},
            {"id": "r", "selected": []},
            {"id": "s", "selected": []},
        ]
    }
    for entry in answer.to_wire()["answers"]:
        assert "custom" not in entry


def test_answers_follow_question_order_one_per_question_even_with_duplicate_ids() -> None:
    questions = [item(id="z", options=opts("1")), item(id="a"), item(id="z", options=opts("2"))]
    drafts = [Draft(selected=[0]), Draft(custom="text"), Draft(selected=[0])]
    assert [a.id for a in encode_answer(questions, drafts).answers] == ["z", "a", "z"]
    assert encode_answer(questions, drafts).to_wire()["answers"] == [
        {"id": "z", "selected": ["1"]},
        {"id": "a", "selected": [], "custom": "text"},
        {"id": "z", "selected": ["2"]},
    ]


def test_out_of_range_choices_are_dropped() -> None:
    questions = [item(options=opts("A", "B")), item(id="r", options=opts("C"), multiSelect=True)]
    answer = encode_answer(questions, [Draft(selected=[5, -1]), Draft(selected=[0, 3])])
    assert answer.to_wire()["answers"] == [
        {"id": "q", "selected": []},
        {"id": "r", "selected": ["C"]},
    ]


def test_labels_are_returned_exactly() -> None:
    label = "  <@U1> & *bold* 🎉 " + "x" * 200
    answer = encode_answer([item(options=[{"label": label}])], [Draft(selected=[0])])
    assert answer.answers[0].selected == [label]


# --- picks -----------------------------------------------------------------------------


def test_a_tap_answers_at_once_with_the_full_label() -> None:
    payload = click(render_open(TAP).blocks, value="2")
    shown = payload["actions"][0]["text"]["text"]
    assert len(shown) <= 75 and shown.startswith("3. ")  # shortened and numbered on the button
    written = finish(decide(TAP, interaction_of(payload), NOW))
    assert written.state == "answered" and written.version == TAP.version + 1
    assert written.answered_by == ALICE and written.finished_at == NOW
    assert wire(written) == [{"id": "q0", "selected": [LONG]}]


def test_a_menu_choice_answers_with_the_full_label() -> None:
    payload = choose(render_open(MENU).blocks, values=["7"])
    written = finish(decide(MENU, interaction_of(payload), NOW))
    assert wire(written) == [{"id": "q0", "selected": [LONG]}]


@pytest.mark.parametrize(("button", "label"), [("Ship it", "Ship it"), ("Not yet", "Not yet")])
def test_plan_buttons_answer_with_the_askers_label(button: str, label: str) -> None:
    payload = click(render_open(PLAN).blocks, button_text=button, user=BOB)
    written = finish(decide(PLAN, interaction_of(payload), NOW))
    assert wire(written) == [{"id": "q0", "selected": [label]}]
    assert written.answered_by == BOB


@pytest.mark.parametrize(
    "pick",
    [
        Pick(RID, 0, 3, Origin(ALICE)),  # option out of range
        Pick(RID, 0, 99_999, Origin(ALICE)),
        Pick(RID, 1, 0, Origin(ALICE)),  # question out of range
    ],
)
def test_a_pick_out_of_range_is_ignored(pick: Pick) -> None:
    assert decide(TAP, pick, NOW) is None


@pytest.mark.parametrize("rec", [FORM, TEXT], ids=["form", "text"])
def test_a_pick_where_the_layout_has_no_picks_is_ignored(rec: PendingRecord) -> None:
    assert decide(rec, Pick(RID, 0, 0, Origin(ALICE)), NOW) is None


# --- forms -----------------------------------------------------------------------------


def mine(*drafts: Draft, user: str = ALICE) -> PendingRecord:
    """FORM with ``user``'s own drafts."""
    return FORM.model_copy(update={"user_drafts": {user: list(drafts)}})


def test_draft_change_is_saved_not_answered() -> None:
    payload = choose(render_open(FORM).blocks, question=1, labels=["Egg", "Cheese"])
    decision = decide(FORM, interaction_of(payload), NOW)
    assert isinstance(decision, Save) and decision.record.is_open
    assert decision.rerender is False  # Slack already shows the person's ticks
    assert decision.record.state == "pending" and decision.record.version == FORM.version + 1
    assert decision.record.draft(1, ALICE).selected == [2, 0]
    assert decision.record.draft(1, BOB).selected == []  # drafts are per person
    assert decision.record.answer is None


def test_unticking_everything_is_an_empty_draft() -> None:
    rec = mine(Draft(), Draft(selected=[1]))
    payload = choose(render_open(rec).blocks, question=1, labels=[])
    decision = decide(rec, interaction_of(payload), NOW)
    assert isinstance(decision, Save) and decision.record.draft(1, ALICE).selected == []


def test_a_single_select_choice_clears_earlier_free_text() -> None:
    rec = mine(Draft(custom="XL"))
    payload = choose(render_open(rec).blocks, question=0, labels=["M"])
    decision = decide(rec, interaction_of(payload), NOW)
    assert isinstance(decision, Save) and decision.record.is_open
    assert decision.rerender is False  # the shared message never shows a draft
    assert decision.record.draft(0, ALICE) == Draft(selected=[1], custom=None)


def test_a_multi_select_tick_keeps_free_text() -> None:
    rec = mine(Draft(), Draft(custom="Bacon"))
    payload = choose(render_open(rec).blocks, question=1, labels=["Ham"])
    decision = decide(rec, interaction_of(payload), NOW)
    assert isinstance(decision, Save) and decision.rerender is False
    assert decision.record.draft(1, ALICE) == Draft(selected=[1], custom="Bacon")


def test_submit_uses_state_values_over_drafts() -> None:
    rec = mine(Draft(selected=[0]), Draft(selected=[0, 1]), Draft(custom="hi"))
    blocks = render_open(rec).blocks
    # The person changed question 0 and unticked question 1 without the drafts being saved
    # (say the draft writes were lost): what the message showed them wins.
    state = state_after(blocks, {0: ["L"], 1: []})
    written = finish(
        decide(rec, interaction_of(click(blocks, button_text="Submit", state_values=state)), NOW)
    )
    assert wire(written) == [
        {"id": "q0", "selected": ["L"]},
        {"id": "q1", "selected": []},
        {"id": "q2", "selected": [], "custom": "hi"},
    ]


def test_two_people_filling_the_form_do_not_overwrite_each_other() -> None:
    blocks = render_open(FORM).blocks
    rec = FORM
    for user, labels in ((ALICE, ["Egg"]), (BOB, ["Ham", "Cheese"]), (ALICE, ["Egg", "Ham"])):
        payload = choose(blocks, question=1, labels=labels, user=user)
        decision = decide(rec, interaction_of(payload), NOW)
        assert isinstance(decision, Save) and decision.record.is_open
        rec = decision.record
    text = decide(rec, _text(rec, 2, "Bob's note", BOB), NOW)
    assert isinstance(text, Save) and text.record.draft(2, BOB).custom == "Bob's note"
    rec = text.record
    assert rec.draft(1, ALICE).selected == [2, 1] and rec.draft(1, BOB).selected == [1, 0]
    # Alice submits: her own choices only, none of Bob's ticks or text.
    state = state_after(blocks, {1: ["Egg", "Ham"]})
    payload = click(blocks, button_text="Submit", state_values=state)
    written = finish(decide(rec, interaction_of(payload), NOW))
    assert wire(written) == [
        {"id": "q0", "selected": []},
        {"id": "q1", "selected": ["Ham", "Egg"]},
        {"id": "q2", "selected": []},
    ]
    assert written.answered_by == ALICE


def test_an_empty_submit_asks_first_and_the_confirmation_skips() -> None:
    blocks = render_open(FORM).blocks
    rec = decide(FORM, interaction_of(choose(blocks, question=1, labels=["Egg"], user=BOB)), NOW)
    # Bob's picks do not make Alice's Submit non-empty
    assert isinstance(rec, Save) and rec.record.is_open
    submit = click(blocks, button_text="Submit")
    decision = decide(rec.record, interaction_of(submit), NOW)
    # the Submit click's response_url rides along: the confirmation's note goes there
    same_modal(decision, render_skip_modal(rec.record, submit["response_url"]))
    assert isinstance(decision, Modal) and check_view(decision.view) == []
    assert "Submit with nothing selected?" in json.dumps(decision.view)
    confirmed = parse_view_submission(submit_view(decision.view, None, ALICE, values={}))
    assert isinstance(confirmed, ConfirmSkip)
    assert confirmed.origin.response_url == submit["response_url"]
    assert (confirmed.request_id, confirmed.origin.user) == (RID, ALICE)
    written = finish(decide(rec.record, confirmed, NOW))
    assert wire(written) == [{"id": f"q{i}", "selected": []} for i in range(3)]
    assert written.answered_by == ALICE


def test_a_confirmed_skip_on_an_answered_form_is_refused() -> None:
    answered = finish(decide(FORM, Submit(RID, Origin(BOB), {0: (1,)}), NOW))
    decision = decide(answered, ConfirmSkip(RID, Origin(ALICE)), NOW)
    assert isinstance(decision, Refuse) and f"<@{BOB}>" in decision.text


def test_submit_ignores_selections_of_questions_that_do_not_exist() -> None:
    submit = Submit(RID, Origin(ALICE), {0: (2,), 7: (0,), -1: (1,)})
    written = finish(decide(FORM, submit, NOW))
    assert wire(written)[0] == {"id": "q0", "selected": ["L"]}


@pytest.mark.parametrize("rec", [TAP, MENU, TEXT, PLAN], ids=["tap", "menu", "text", "plan"])
def test_submit_or_draft_outside_a_form_is_ignored(rec: PendingRecord) -> None:
    assert decide(rec, Submit(RID, Origin(ALICE), {0: (0,)}), NOW) is None
    assert decide(rec, DraftChange(RID, 0, (0,), Origin(ALICE)), NOW) is None


def test_draft_change_for_a_question_that_does_not_exist_is_ignored() -> None:
    assert decide(FORM, DraftChange(RID, 3, (0,), Origin(ALICE)), NOW) is None


# --- free text -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rec", "button", "question"),
    [(TAP, "Other…", 0), (TEXT, "Answer…", 0), (PLAN, "Decline with feedback…", 0)],
)
def test_open_text_is_the_modal(rec: PendingRecord, button: str, question: int) -> None:
    payload = click(render_open(rec).blocks, button_text=button)
    decision = decide(rec, interaction_of(payload), NOW)
    same_modal(decision, render_text_modal(rec, question, None, payload["response_url"]))
    assert isinstance(decision, Modal) and check_view(decision.view) == []


def test_open_text_in_a_form_names_its_question() -> None:
    payload = click(render_open(FORM).blocks, button_text="Answer…")
    modal = render_text_modal(FORM, 2, None, payload["response_url"])
    same_modal(decide(FORM, interaction_of(payload), NOW), modal)


def same_modal(decision: object, expected: dict[str, Any]) -> None:
    """``decision`` opens the modal ``expected``: its ``external_id`` is fresh each time
    (Slack wants it unique per team), so only the reply URL it carries must match; the
    ``private_metadata`` stays in the three-field form every release parses."""
    assert isinstance(decision, Modal)
    got, want = dict(decision.view), dict(expected)
    carried = ids.parse_external_id(got.pop("external_id", None))
    assert carried == ids.parse_external_id(want.pop("external_id", None))
    assert carried is not None
    assert got == want
    assert re.fullmatch(r"aq1:[a-z0-9]{8,40}:[0-9]+", got["private_metadata"])


def _text(rec: PendingRecord, question: int, text: str | None, user: str = ALICE) -> TextAnswer:
    parsed = parse_view_submission(submit_view(render_text_modal(rec, question), text, user))
    assert isinstance(parsed, TextAnswer)
    return parsed


@pytest.mark.parametrize("text", [None, "", "   ", "\n\t "])
def test_blank_text_is_invalid_on_the_input_block(text: str | None) -> None:
    answer = _text(TAP, 0, text)
    decision = decide(TAP, answer, NOW)
    # the handler shows it on the modal's input (answer.input_block_id)
    assert decision == Refuse(ENTER_AN_ANSWER)


@pytest.mark.parametrize("rec", [TAP, MENU, TEXT], ids=["tap", "menu", "text"])
def test_text_answers_a_one_question_request_at_once(rec: PendingRecord) -> None:
    written = finish(decide(rec, _text(rec, 0, "  mine \n", BOB), NOW))
    assert wire(written) == [{"id": "q0", "selected": [], "custom": "mine"}]
    assert written.answered_by == BOB


def test_plan_feedback_is_a_custom_answer() -> None:
    written = finish(decide(PLAN, _text(PLAN, 0, "Add a rollback step"), NOW))
    assert wire(written) == [{"id": "q0", "selected": [], "custom": "Add a rollback step"}]


def test_text_in_a_form_is_a_draft_then_part_of_the_submission() -> None:
    rec = mine(Draft(selected=[1]), Draft(selected=[2]))
    single = decide(rec, _text(rec, 0, "XXL"), NOW)
    assert isinstance(single, Save) and single.rerender is False
    assert single.record.draft(0, ALICE) == Draft(selected=[], custom="XXL")  # replaces
    multi = decide(single.record, _text(single.record, 1, "Bacon"), NOW)
    assert isinstance(multi, Save) and multi.record.is_open
    assert multi.record.draft(1, ALICE) == Draft(selected=[2], custom="Bacon")  # adds
    rec = multi.record
    blocks = render_open(rec).blocks
    state = state_after(blocks, {1: ["Egg"]})
    payload = click(blocks, button_text="Submit", state_values=state)
    written = finish(decide(rec, interaction_of(payload), NOW))
    assert wire(written) == [
        {"id": "q0", "selected": [], "custom": "XXL"},
        {"id": "q1", "selected": ["Egg"], "custom": "Bacon"},
        {"id": "q2", "selected": []},
    ]


def test_text_for_a_question_that_does_not_exist_is_ignored() -> None:
    assert decide(TAP, TextAnswer(RID, 4, "x", Origin(ALICE), "b"), NOW) is None


# --- dismissal and finished records ----------------------------------------------------


def test_dismiss_cancels() -> None:
    payload = click(render_open(FORM).blocks, button_text="Dismiss", user=BOB)
    written = finish(decide(FORM, interaction_of(payload), NOW))
    assert written.state == "cancelled" and written.answered_by == BOB
    assert written.answer is None and written.finished_at == NOW


EVERY_KIND: list[Interaction] = [
    Pick(RID, 0, 0, Origin(BOB)),
    DraftChange(RID, 0, (0,), Origin(BOB)),
    OpenText(RID, 0, Origin(BOB)),
    Submit(RID, Origin(BOB), {}),
    Dismiss(RID, Origin(BOB)),
    TextAnswer(RID, 0, "late", Origin(BOB), "b"),
]


@pytest.mark.parametrize("late", EVERY_KIND, ids=lambda i: type(i).__name__)
def test_anything_on_an_answered_record_is_refused_naming_who_answered(late: Interaction) -> None:
    answered = finish(decide(TAP, Pick(RID, 0, 1, Origin(ALICE, name="alice")), NOW))
    decision = decide(answered, late, NOW + 1)
    assert decision == Refuse(
        f"This question was already answered by <@{ALICE}>.",
        "This question was already answered by @alice.",
    )


@pytest.mark.parametrize(
    ("state", "by", "text"),
    [
        ("answered", None, "This question was already answered."),
        ("cancelled", ALICE, f"This question was dismissed by <@{ALICE}>."),
        ("cancelled", None, "This question was dismissed."),
        ("aborted", None, "This question is no longer open."),
        ("failed", None, "This question is no longer open."),
    ],
)
def test_refusals(state: str, by: str | None, text: str) -> None:
    rec = TAP.next(state=state, answered_by=by)
    assert refusal(rec, mention=True) == text
    for late in EVERY_KIND:
        decision = decide(rec, late, NOW)
        assert isinstance(decision, Refuse) and decision.text == text


def test_a_double_click_is_refused_the_second_time() -> None:
    payload = click(render_open(TAP).blocks, button_text="Red")
    first = finish(decide(TAP, interaction_of(payload), NOW))
    again = decide(first, interaction_of(payload), NOW)
    assert isinstance(again, Refuse) and f"<@{ALICE}>" in again.text


class SlowReads(MemoryPendingStore):
    """A store whose reads yield to other tasks, so two clicks both see the open record."""

    async def get(self, request_id: str) -> PendingRecord | None:
        record = await super().get(request_id)
        await asyncio.sleep(0)
        return record


async def test_racing_answers_first_writer_wins_and_the_loser_is_refused() -> None:
    store = SlowReads()
    assert await store.create(TAP)
    blocks = render_open(TAP).blocks
    decisions: dict[str, list[object]] = {ALICE: [], BOB: []}

    async def answer(user: str, label: str) -> PendingRecord | None:
        interaction = interaction_of(click(blocks, button_text=label, user=user))

        def change(current: PendingRecord) -> PendingRecord | None:
            decision = decide(current, interaction, NOW)
            decisions[user].append(decision)
            return decision.record if isinstance(decision, Save) else None

        _, written = await mutate(store, RID, change)
        return written

    alice, bob = await asyncio.gather(answer(ALICE, "Red"), answer(BOB, "Green"))
    assert alice is not None and bob is None
    # Bob decided on the open record too, lost the compare-and-set, decided again: refused.
    first = decisions[BOB][0]
    assert isinstance(first, Save) and not first.record.is_open
    assert [d.text for d in decisions[BOB][1:]] == [
        f"This question was already answered by <@{ALICE}>."
    ]
    stored = await store.get(RID)
    assert stored is not None and wire(stored) == [{"id": "q0", "selected": ["Red"]}]
