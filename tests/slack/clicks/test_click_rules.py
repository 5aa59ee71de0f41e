"""Every way a click can point at the wrong question or option, single-select answers,
and every vote kind of a team review (issue 41)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.clicks.transitions import (
    Refuse,
    Save,
    decide,
    encode_answer,
)
from adapters.slack.model.interactions import (
    ConfirmSkip,
    Dismiss,
    DraftChange,
    Origin,
    Pick,
    ReadPlan,
    Submit,
    TextAnswer,
)
from adapters.slack.model.record import ApprovalView, Draft, PendingRecord
from adapters.slack.render.messages import ENTER_AN_ANSWER
from bot.questions import ReviewPolicy
from bot.questions.models import AskUserQuestionItem
from tests.slack_payloads import ALICE, BOB

pytestmark = pytest.mark.timeout(30)
RID = "0123456789abcdef0123"
NOW = 1_700_000_123.0
CAROL = "U0CAROL001"


def record(*questions: dict[str, Any], **fields: Any) -> PendingRecord:
    items = [
        AskUserQuestionItem.model_validate({"id": f"q{i}", "question": "Which?", **q})
        for i, q in enumerate(questions)
    ]
    return PendingRecord(id=RID, owner="p", channel="C0QUESTION", questions=items, **fields)


def opts(*labels: str) -> list[dict[str, str]]:
    return [{"label": label} for label in labels]


FORM = record(
    {"options": opts("A", "B", "C")},
    {"options": opts("X", "Y"), "multiSelect": True},
)
TAP = record({"options": opts("A", "B")})


def answer_of(decision: object) -> list[dict[str, Any]]:
    assert isinstance(decision, Save) and decision.rerender, decision
    assert not decision.record.is_open
    assert decision.record.answer is not None
    wire: list[dict[str, Any]] = decision.record.answer.to_wire()["answers"]
    return wire


@pytest.mark.parametrize("question", [2, 3, 99, -1])
def test_submit_naming_a_question_past_the_last_is_refused_cleanly(question: int) -> None:
    decision = decide(FORM, Submit(RID, Origin(ALICE), {0: (1,), question: (0,)}), NOW)
    assert answer_of(decision) == [{"id": "q0", "selected": ["B"]}, {"id": "q1", "selected": []}]


@pytest.mark.parametrize("question", [2, -1])
def test_a_pick_draft_or_text_for_a_question_that_does_not_exist_is_ignored(
    question: int,
) -> None:
    assert decide(TAP, Pick(RID, question, 0, Origin(ALICE)), NOW) is None
    assert decide(FORM, DraftChange(RID, question, (0,), Origin(ALICE)), NOW) is None
    text = TextAnswer(RID, question, "hi", Origin(ALICE), "b")
    assert decide(FORM, text, NOW) is None


@pytest.mark.parametrize("option", [2, -1, 10**6])
def test_a_pick_of_an_option_that_does_not_exist_is_ignored(option: int) -> None:
    assert decide(TAP, Pick(RID, 0, option, Origin(ALICE)), NOW) is None


def test_the_last_question_and_option_are_still_reachable() -> None:
    assert answer_of(decide(TAP, Pick(RID, 0, 1, Origin(ALICE)), NOW)) == [
        {"id": "q0", "selected": ["B"]}
    ]
    decision = decide(FORM, Submit(RID, Origin(ALICE), {1: (0, 1)}), NOW)
    assert answer_of(decision)[1] == {"id": "q1", "selected": ["X", "Y"]}


def test_a_single_select_answer_never_carries_two_labels() -> None:
    assert encode_answer(
        FORM.questions, [Draft(selected=[2, 0]), Draft(selected=[1, 0])]
    ).to_wire()["answers"] == [
        {"id": "q0", "selected": ["A"]},
        {"id": "q1", "selected": ["X", "Y"]},
    ]
    decision = decide(FORM, Submit(RID, Origin(ALICE), {0: (0, 2)}), NOW)
    assert answer_of(decision)[0] == {"id": "q0", "selected": ["A"]}


def test_selections_outside_the_options_are_dropped() -> None:
    wire = encode_answer(FORM.questions, [Draft(selected=[-1, 7, 1]), Draft(selected=[5, -2])])
    assert wire.to_wire()["answers"] == [
        {"id": "q0", "selected": ["B"]},
        {"id": "q1", "selected": []},
    ]


def test_a_single_select_choice_replaces_earlier_free_text_and_text_replaces_it() -> None:
    text = decide(FORM, TextAnswer(RID, 0, "my own", Origin(ALICE), "b"), NOW)
    assert isinstance(text, Save) and text.record.is_open
    chose = decide(text.record, DraftChange(RID, 0, (1,), Origin(ALICE)), NOW)
    assert isinstance(chose, Save) and chose.record.is_open
    assert chose.record.user_drafts[ALICE][0] == Draft(selected=[1])
    again = decide(chose.record, TextAnswer(RID, 0, "mine again", Origin(ALICE), "b"), NOW)
    assert isinstance(again, Save) and again.record.is_open
    assert again.record.user_drafts[ALICE][0] == Draft(selected=[], custom="mine again")
    # A multi-select question keeps both its ticks and its free text.
    ticked = decide(FORM, DraftChange(RID, 1, (0,), Origin(ALICE)), NOW)
    assert isinstance(ticked, Save) and ticked.record.is_open
    noted = decide(ticked.record, TextAnswer(RID, 1, "and Z", Origin(ALICE), "b"), NOW)
    assert isinstance(noted, Save) and noted.record.is_open
    assert noted.record.user_drafts[ALICE][1] == Draft(selected=[0], custom="and Z")
    assert answer_of(decide(noted.record, Submit(RID, Origin(ALICE)), NOW))[1] == {
        "id": "q1",
        "selected": ["X"],
        "custom": "and Z",
    }


# --- team review votes -------------------------------------------------------------------


def review(labels: tuple[str, ...] = ("Approve", "Keep planning"), **policy: Any) -> PendingRecord:
    plan = {
        "id": "plan",
        "question": "Approve this plan?",
        "detail": "1. Ship it",
        "options": opts(*labels),
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }
    return record(plan, review=ReviewPolicy.model_validate(policy))


def pick(rec: PendingRecord, user: str, option: int) -> object:
    return decide(rec, Pick(RID, 0, option, Origin(user)), NOW)


def test_an_option_neither_approve_nor_decline_is_no_vote() -> None:
    rec = review(approvals=2)
    for option in (2, -1, 99):  # a stale or forged option index
        assert pick(rec, ALICE, option) is None
    lone = review(("Approve",), approvals=2)  # a review with no decline option
    assert pick(lone, ALICE, 1) is None
    assert pick(rec, ALICE, 0) is not None  # while the real options are votes


def test_one_decline_ends_a_review_declined_by_default() -> None:
    decision = pick(review(approvals=2), ALICE, 1)
    assert answer_of(decision) == [{"id": "plan", "selected": ["Keep planning"]}]


def test_declines_end_a_review_at_their_count_not_before() -> None:
    rec = review(approvals=3, declines=2)
    first = pick(rec, ALICE, 1)
    assert isinstance(first, Save) and first.record.is_open
    assert answer_of(pick(first.record, BOB, 1)) == [{"id": "plan", "selected": ["Keep planning"]}]


def test_approvals_end_a_review_at_their_count_not_before() -> None:
    first = pick(review(approvals=2), ALICE, 0)
    assert isinstance(first, Save) and first.record.is_open
    assert answer_of(pick(first.record, BOB, 0)) == [{"id": "plan", "selected": ["Approve"]}]


def test_a_required_set_is_waited_for_whatever_the_count() -> None:
    rec = review(approvals=1, required=[{"users": [CAROL], "count": 1}])
    first = pick(rec, ALICE, 0)
    assert isinstance(first, Save) and first.record.is_open
    assert answer_of(pick(first.record, CAROL, 0)) == [{"id": "plan", "selected": ["Approve"]}]


def test_the_same_vote_twice_is_refused_and_a_changed_vote_counts_once() -> None:
    rec = review(approvals=2, declines=2)
    first = pick(rec, ALICE, 0)
    assert isinstance(first, Save) and first.record.is_open
    assert isinstance(pick(first.record, ALICE, 0), Refuse)
    changed = pick(first.record, ALICE, 1)
    assert isinstance(changed, Save) and changed.record.is_open
    assert [v.approve for v in changed.record.votes] == [False]


def test_a_decline_with_feedback_is_answered_with_it_and_blank_text_is_no_vote() -> None:
    rec = review(approvals=2)
    blank = decide(rec, TextAnswer(RID, 0, "  ", Origin(ALICE), "fb"), NOW)
    assert blank == Refuse(ENTER_AN_ANSWER)
    approved = pick(rec, BOB, 0)
    assert isinstance(approved, Save) and approved.record.is_open
    said = decide(
        approved.record, TextAnswer(RID, 0, "Stage it", Origin(ALICE, name="alice"), "fb"), NOW
    )
    assert answer_of(said) == [{"id": "plan", "selected": [], "custom": "alice: Stage it"}]


@pytest.mark.parametrize("kind", ["submit", "skip", "dismiss", "draft", "read"])
def test_a_questions_click_naming_an_approval_decides_nothing(kind: str) -> None:
    """An approval ends only by Allow once or Reject: a forged form or Dismiss click naming
    its id (an empty question list reads as a form) neither answers nor cancels it."""
    approval = PendingRecord(
        id="0123456789abcdef0123",
        questions=[],
        channel="C0Q",
        approval=ApprovalView(tool_name="bash", headline="escalate", command="rm -rf /srv/x"),
    )
    origin = Origin(user=ALICE)
    interaction = {
        "submit": Submit(approval.id, origin),
        "skip": ConfirmSkip(approval.id, origin),
        "dismiss": Dismiss(approval.id, origin),
        "draft": DraftChange(approval.id, 0, (0,), origin),
        "read": ReadPlan(approval.id, origin),
    }[kind]
    assert decide(approval, interaction, 1.0) is None
