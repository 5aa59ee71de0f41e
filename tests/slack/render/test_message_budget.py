"""The message's text budget: long details get what the rest of the message leaves.

Slack refuses a message whose block text passes ``MESSAGE_TEXT_BUDGET``
(``msg_blocks_too_long``), a post and an update alike. So a valid request with a long detail
must render however long its question, feedback or diff (the detail gives way, the rest of
it continuing in the thread), its re-renders (votes, drafts, notes) must fit, and so must
its final record, or ``chat.update`` is refused and the finished question keeps live
buttons. Everything here goes through the real renderers (``render_record`` as the
provider calls them) and the sandbox's Block Kit check, ``blockcheck.check_message``.
"""

from __future__ import annotations

import html
from typing import Any

import pytest

from adapters.slack.blockkit import MESSAGE_TEXT_BUDGET, block_text_length
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.model.tally import Revision, Vote
from adapters.slack.render.approval import render_record
from adapters.slack.render.blocks.overflow import CONTINUED, MAX_THREAD_REPLIES, continued
from adapters.slack.render.blocks.parts import Rendered
from adapters.slack.render.review_view import plan_diff
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.errors import ASK_TIMEOUT, SLACK_LIMIT, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.review import ReviewPolicy

RID = "0123456789abcdef0123"
ALICE = "U0ALICE001"
FINISHED = 1_700_000_000.0
PARA = "Step: update the service config and redeploy the workers carefully.\n"
LINE = "Some context line for the question at hand.\n"


# --- helpers ---------------------------------------------------------------------------


def record(*questions: dict[str, Any], **fields: Any) -> PendingRecord:
    items = [
        AskUserQuestionItem.model_validate({"id": "q", "question": "Which one?", **q})
        for q in questions
    ]
    fields.setdefault("id", RID)
    fields.setdefault("owner", "proc-1")
    fields.setdefault("channel", "C0QUESTION")
    return PendingRecord(questions=items, **fields)


def plan(detail: str, question: str = "Approve this plan and leave plan mode?") -> dict[str, Any]:
    return {
        "id": "plan-review",
        "header": "Plan review",
        "question": question,
        "detail": detail,
        "options": [
            {"label": "Approve", "description": "Leave plan mode; the plan is carried out."},
            {"label": "Keep planning", "description": "Stay in plan mode; feedback goes back."},
        ],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }


def problems(rendered: Rendered) -> list[str]:
    """Every limit the message or any of its thread replies breaks (empty: Slack takes it)."""
    found = check_message(rendered.blocks, rendered.text)
    for n, part in enumerate(rendered.thread):
        found += [f"thread[{n}] {p}" for p in check_message(part, "(continued)")]
    return found


def shown_details(rendered: Rendered) -> list[str]:
    """The markdown blocks of details and plans (not quoted feedback) of a message, as sent."""
    feedback = ("**Feedback**\n", "> ")
    return [
        b["text"]
        for b in rendered.blocks
        if b["type"] == "markdown" and not b["text"].startswith(feedback)
    ]


def rebuilt(rendered: Rendered) -> list[str]:
    """Each detail as a reader gets it back: the message's part, then the thread's or file's."""
    texts = [
        "" if t.startswith("_In full") else html.unescape(CONTINUED.sub("", t))
        for t in shown_details(rendered)
    ]
    for part in rendered.thread:
        caption = part[0]["elements"][0]["text"]
        if not caption.startswith(("Plan, continued", "Detail")):
            continue  # the diff's or the options' replies
        index = int(caption.split("question ")[1].split(",")[0]) - 1 if "question" in caption else 0
        texts[index] += html.unescape(part[1]["text"])
    for attached in rendered.files:
        if attached.filename.startswith(("plan", "detail")) and attached.filename.endswith(".md"):
            index = int(attached.filename.split("-")[1][:-3]) - 1 if "-" in attached.filename else 0
            texts[index] = attached.content
    return texts


def ended(rec: PendingRecord, state: str) -> PendingRecord:
    """``rec`` finished in ``state``, with everything the final record can show at its longest."""
    note = "No answer within 600 seconds. " + "n" * 3000
    if state == "answered":
        answers = [
            {"id": q.id, "selected": [], "custom": "Yes, go ahead <&> " + "a" * 3000}
            for q in rec.questions
        ]
        answer = AskUserQuestionAnswer.model_validate({"answers": answers})
        return rec.next(
            state=state, answer=answer, answered_by=ALICE, note=note, finished_at=FINISHED
        )
    if state == "failed":
        return rec.next(state=state, error_code=ASK_TIMEOUT, note=note, finished_at=FINISHED)
    if state == "cancelled":
        return rec.next(state=state, answered_by=ALICE, note=note, finished_at=FINISHED)
    return rec.next(state=state, note="Cancelled: " + "r" * 3000, finished_at=FINISHED)


STATES = [("answered", "Answered"), ("failed", "Timed out"), ("aborted", "Cancelled"),
          ("cancelled", "Dismissed")]  # fmt: skip


def assert_finals_fit(rec: PendingRecord) -> None:
    """Every ending of ``rec`` fits, keeps the outcome line and the detail part shown open."""
    opened = render_record(rec)
    assert problems(opened) == []
    for state, verb in STATES:
        final = render_record(ended(rec, state))
        assert check_message(final.blocks, final.text) == [], state
        outcome = final.blocks[-1]["elements"][0]["text"]
        if rec.questions[0].intent is not None and state == "answered":
            verb = "Declined"  # a plan answered with free text is declined
        assert verb in outcome and "<!date^1700000000^" in outcome, state
        assert shown_details(final) == shown_details(opened), state


def revised_plan() -> PendingRecord:
    """Evidence 1: a 9.5k-character plan revised after 600 characters of feedback, 15
    changed lines (12,035 characters of block text with a fixed 9,000 for the plan)."""
    old = "# Plan\n\n" + PARA * 140
    new = old.replace(PARA, PARA.replace("carefully", "quickly"), 15)
    feedback = ("Please go faster. " * 40)[:600]
    revision = Revision(previous_id="aaaaaaaabbbb", previous_plan=old, feedback=feedback)
    return record(plan(new), revision=revision)


def long_question_plan() -> PendingRecord:
    """Evidence 2: a plan whose question is 2,990 characters (12,203 with the fixed 9,000)."""
    return record(plan("# Plan\n\n" + PARA * 400, question="Q" * 2990))


def long_form() -> PendingRecord:
    """Evidence 3: three questions of 1,400 characters with long details (~13,400)."""
    questions = [
        {
            "id": f"q{i}",
            "header": f"Part {i}",
            "question": "Q" * 1400,
            "detail": "# Notes\n\n" + LINE * 300,
            "options": [{"label": f"Option {j}"} for j in range(4)],
        }
        for i in range(3)
    ]
    return record(*questions)


def exact_open() -> PendingRecord:
    """The reviewer's case: a question and detail that filled the message to exactly
    12,000 characters with the fixed 9,000 (its finals were 12,022 to 12,042)."""
    return record({"question": "Q" * 2887, "detail": "# Notes\n\n" + LINE * 600})


EVIDENCE = {
    "revised plan": revised_plan,
    "plan with a long question": long_question_plan,
    "form of long questions": long_form,
    "open at 12,000": exact_open,
}


# --- every valid request renders -------------------------------------------------------


@pytest.mark.parametrize("case", list(EVIDENCE))
def test_a_long_request_renders_whole_within_the_budget(case: str) -> None:
    rec = EVIDENCE[case]()
    rendered = render_record(rec)
    assert problems(rendered) == []
    assert block_text_length(rendered.blocks) <= MESSAGE_TEXT_BUDGET
    assert rebuilt(rendered) == [q.detail for q in rec.questions]  # every character, in order
    assert all(CONTINUED.search(text) for text in shown_details(rendered))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(EVIDENCE))
def test_the_final_record_fits_whenever_the_open_message_fit(case: str) -> None:
    assert_finals_fit(EVIDENCE[case]())


def test_a_plan_review_with_a_long_question_feedback_and_diff_still_shows_its_plan() -> None:
    """The largest a revised plan review's other parts get: a 3,000-character question,
    3,000 of feedback, a diff of about 2,500 (shown in the message), long option texts."""
    old = "# Plan\n\n" + PARA * 200
    new = old.replace(PARA, PARA.replace("carefully", "with care"), 17)
    revision = Revision(previous_id="aaaaaaaabbbb", previous_plan=old, feedback="F" * 3000)
    rec = record(plan(new, question="Q" * 3000), revision=revision)
    rendered = render_record(rec)
    assert problems(rendered) == []
    assert "What changed" in str(rendered.blocks)
    assert rebuilt(rendered) == [new]
    assert_finals_fit(rec)


# --- the exact boundary ----------------------------------------------------------------


def _menu(extra: int) -> PendingRecord:
    """A menu question whose message is ``MESSAGE_TEXT_BUDGET + extra`` characters."""
    labels = [f"Option {i:03d} " for i in range(170)]
    base = block_text_length(
        render_record(record({"options": [{"label": x} for x in labels]})).blocks
    )
    missing = MESSAGE_TEXT_BUDGET + extra - base
    for i in range(len(labels)):  # pad labels up to the 75 a menu option shows
        pad = min(missing, 75 - len(labels[i]))
        labels[i] += "p" * pad
        missing -= pad
    assert missing == 0
    return record({"options": [{"label": x} for x in labels]})


def test_a_message_exactly_at_the_budget_is_posted_and_its_finals_fit() -> None:
    rec = _menu(0)
    rendered = render_record(rec)
    assert block_text_length(rendered.blocks) == MESSAGE_TEXT_BUDGET
    assert check_message(rendered.blocks, rendered.text) == []
    for state, _ in STATES:
        final = render_record(ended(rec, state))
        assert check_message(final.blocks, final.text) == [], state


def test_a_message_one_character_over_the_budget_is_refused() -> None:
    with pytest.raises(UserQuestionError) as caught:
        render_record(_menu(1))
    assert caught.value.code == SLACK_LIMIT
    assert "12001 characters of text in all blocks" in caught.value.message
    assert "msg_blocks_too_long" in caught.value.message


def _room(question: str) -> int:
    """How many characters of a plan the message with this question shows at most."""
    rendered = render_record(record(plan("x" * 30_000, question=question)))
    (shown,) = shown_details(rendered)
    return len(CONTINUED.sub("", shown))


@pytest.mark.slow
@pytest.mark.parametrize("question", ["Approve?", "Q" * 2990])
def test_a_plan_exactly_the_room_left_is_whole_and_one_more_continues(question: str) -> None:
    room = _room(question)
    assert room > 0
    whole = record(plan("x" * room, question=question))
    rendered = render_record(whole)
    assert problems(rendered) == []
    assert shown_details(rendered) == ["x" * room] and rendered.thread == []
    assert_finals_fit(whole)
    over = record(plan("x" * (room + 1), question=question))
    rendered = render_record(over)
    assert problems(rendered) == []
    assert shown_details(rendered) == ["x" * room + continued("x")]
    assert rebuilt(rendered) == ["x" * (room + 1)]
    assert_finals_fit(over)


# --- re-renders: votes, drafts, notes, a long label ------------------------------------


@pytest.mark.slow
def test_a_team_review_keeps_fitting_and_showing_the_same_plan_as_votes_come() -> None:
    policy = ReviewPolicy(approvals=50, declines=50)
    rec = record(plan("# Plan\n\n" + PARA * 400, question="Q" * 2990), review=policy)
    first = render_record(rec)
    assert problems(first) == []
    votes = [
        Vote(user=f"U{i:09d}", approve=i % 2 == 0, feedback="f <&> " * 100, at=FINISHED)
        for i in range(40)
    ]
    again = render_record(rec.next(votes=votes, note="N" * 3000, label="L" * 3000))
    assert problems(again) == []
    assert shown_details(again) == shown_details(first)
    assert_finals_fit(rec.next(votes=votes, label="L" * 3000))


@pytest.mark.slow
def test_a_form_keeps_fitting_and_showing_the_same_details_as_drafts_come() -> None:
    questions = [
        {
            "id": f"q{i}",
            "question": "Q" * 1400,
            "detail": "# Notes\n\n" + LINE * 300,
            "multiSelect": True,
            "options": [
                {"label": f"Option {j} " + "o" * 60, "description": "d" * 70} for j in range(8)
            ],
        }
        for i in range(3)
    ]
    rec = record(*questions)
    first = render_record(rec)
    assert problems(first) == []
    drafts = [Draft(selected=list(range(8)), custom="<&>" * 2000) for _ in range(3)]
    again = render_record(rec.next(drafts=drafts, note="N" * 3000, label="L" * 3000))
    assert problems(again) == []
    assert shown_details(again) == shown_details(first)
    assert_finals_fit(rec.next(drafts=drafts, label="L" * 3000))


# --- the thread: one cap for the details and the diff ----------------------------------


def test_a_rewritten_long_plan_posts_at_most_the_cap_and_its_diff_as_a_file() -> None:
    old = "# Plan\n\n" + "".join(
        f"Old step {i}: configure subsystem {i} and verify it works.\n" for i in range(1000)
    )
    new = "# Plan\n\n" + "".join(
        f"New step {i}: configure subsystem {i} differently and verify.\n" for i in range(1000)
    )
    rec = record(plan(new), revision=Revision(previous_id="aaaaaaaabbbb", previous_plan=old))
    rendered = render_record(rec)
    assert problems(rendered) == []
    assert len(rendered.thread) <= MAX_THREAD_REPLIES
    diffs = [f for f in rendered.files if f.content == "\n".join(plan_diff(old, new).lines)]
    assert len(diffs) == 1, [f.filename for f in rendered.files]
    assert "in full" in diffs[0].comment
    assert rebuilt(rendered) == [new]  # the plan itself is still whole


def test_a_short_diff_within_the_cap_stays_thread_replies() -> None:
    old = "# Plan\n\n" + PARA * 140
    new = old.replace(PARA, PARA.replace("carefully", "quickly"), 60)
    rec = record(plan(new), revision=Revision(previous_id="aaaaaaaabbbb", previous_plan=old))
    rendered = render_record(rec)
    assert problems(rendered) == []
    captions = [part[0]["elements"][0]["text"] for part in rendered.thread]
    assert any("What changed" in c for c in captions)
    assert rendered.files == []
    assert len(rendered.thread) <= MAX_THREAD_REPLIES


def test_questions_that_leave_no_room_send_their_details_whole_to_the_thread() -> None:
    """Four questions of 2,900 characters fill the message: their details (a fixed 9,000
    share made it 20,000) are all in the thread, the message says so, and it and its
    finals fit."""
    rec = record(*[{"id": f"q{i}", "question": "Q" * 2900, "detail": LINE * 40} for i in range(4)])
    rendered = render_record(rec)
    assert problems(rendered) == []
    assert all(text.startswith("_In full in the thread") for text in shown_details(rendered))
    assert [html.unescape(part[1]["text"]) for part in rendered.thread] == [LINE * 40] * 4
    assert_finals_fit(rec)


@pytest.mark.slow
def test_a_final_record_at_the_last_version_a_block_id_holds_renders() -> None:
    """Sizing the final's details renders the open message's fixed parts: not with the
    final's version, which may be one past what a block id holds (999,999)."""
    rec = record(plan("# Plan\n\n" + PARA * 400), version=999_999)
    assert problems(render_record(rec)) == []
    assert_finals_fit(rec)
