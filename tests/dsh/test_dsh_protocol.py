"""The dsh 0.2 wire as the bot reads and writes it: mux frames, ``$events`` items, the
outcomes it sends, and ``answer_problem``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.dsh.mux import (
    DISMISSED,
    Cancel,
    Ready,
    Waterfall,
    answer_problem,
    events_value,
    parse_mux,
    result,
    result_body,
    split_host_url,
)
from adapters.urls import split_token
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

PLAN_REVIEW: dict[str, Any] = {
    "id": "plan-review",
    "question": "Approve this plan and leave plan mode?",
    "header": "Plan review",
    "detail": "# Plan\n\n1. do it",
    "options": [
        {"label": "Approve", "description": "Leave plan mode."},
        {"label": "Keep planning", "description": "Stay in plan mode."},
    ],
    "intent": {"kind": "plan-review", "approve": "Approve"},
}


def waterfall(event: str, request: Any, event_id: str = "6f1c") -> dict[str, Any]:
    """A waterfall item's value as the host sends it."""
    return {
        "type": "waterfall",
        "event": event,
        "eventId": event_id,
        "agentId": "session-1",
        "request": request,
    }


def requested(*questions: dict[str, Any]) -> Any:
    """A question waterfall, read as the client reads it off the mux."""
    value = waterfall("user-questions/request", {"questions": list(questions)})
    text = json.dumps({"type": "item", "streamId": "ev", "value": value})
    return events_value(parse_mux(text).value)


def items(*wire: dict[str, Any]) -> list[AskUserQuestionItem]:
    """Questions from wire JSON."""
    return [AskUserQuestionItem.model_validate(q) for q in wire]


def answer(*wire: dict[str, Any]) -> AskUserQuestionAnswer:
    """An answer batch from wire JSON."""
    return AskUserQuestionAnswer.model_validate({"answers": list(wire)})


# ---------------------------------------------------------------- frames


def test_a_question_waterfall_parses_verbatim() -> None:
    multi = {
        "id": "targets",
        "question": "Which?",
        "options": [{"label": "Code"}],
        "multiSelect": True,
    }
    call = {**PLAN_REVIEW, "intent": {**PLAN_REVIEW["intent"], "callId": "call-9"}}
    parsed = requested(call, multi)
    assert isinstance(parsed, Waterfall) and parsed.approval is None
    assert (parsed.event_id, parsed.session_id, parsed.call_id) == ("6f1c", "session-1", "call-9")
    assert [q.to_wire() for q in parsed.questions] == [PLAN_REVIEW, multi]
    assert parsed.questions[1].is_multi_select


def test_an_approval_waterfall_parses() -> None:
    request = {"toolName": "bash", "callId": "c1", "reason": "why", "displayReason": {"en": "x"}}
    parsed = events_value(waterfall("approval/request", request))
    assert isinstance(parsed, Waterfall) and parsed.approval is not None
    assert parsed.questions == [] and parsed.call_id == "c1"
    assert (parsed.approval.tool_name, parsed.approval.reason) == ("bash", "why")
    with pytest.raises(ValueError, match=r"^bad approval/request waterfall: toolName: Field"):
        events_value(waterfall("approval/request", {"callId": "c1"}))


def test_ready_cancel_and_other_items() -> None:
    assert events_value({"type": "ready", "clientId": "c", "host": {}}) == Ready("c")
    assert events_value({"type": "cancel", "eventId": "e"}) == Cancel("e")
    assert events_value({"type": "emit", "event": "api-session/x", "args": {}}) is None
    assert events_value(waterfall("future/request", {})) is None  # not ours to answer
    for bad, problem in [
        ({"type": "ready"}, "clientId must be a non-empty string"),
        ({"type": "cancel", "eventId": ""}, "eventId must be a non-empty string"),
        ({**waterfall("approval/request", {}), "agentId": 3}, "agentId must be"),
        (waterfall("approval/request", []), "waterfall request must be an object"),
        ([1], r"an \$events item must be an object"),
    ]:
        with pytest.raises(ValueError, match=problem):
            events_value(bad)


def test_bytes_and_unknown_keys_are_accepted() -> None:
    value = {**waterfall("user-questions/request", {"questions": [{"id": "q", "question": "Go?"}]})}
    value["seq"] = 7
    text = json.dumps({"type": "item", "streamId": "ev", "value": value, "extra": 1})
    frame = parse_mux(text.encode())
    assert (frame.kind, frame.stream_id) == ("item", "ev")
    assert isinstance(events_value(frame.value), Waterfall)


def test_empty_question_batch_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"questions: List should have at least 1 item"):
        requested()


@pytest.mark.parametrize(
    "intent",
    [
        {"kind": "plan-review"},  # no approve
        {"kind": "poll", "approve": "Approve"},  # unknown kind
        {"approve": "Approve"},  # no kind
    ],
)
def test_a_bad_intent_rejects_the_whole_request(intent: dict[str, Any]) -> None:
    question = {**PLAN_REVIEW, "intent": intent}
    with pytest.raises(
        ValueError, match=r"^bad user-questions/request waterfall: questions\.1\.intent"
    ):
        requested({"id": "ok", "question": "Fine?"}, question)


@pytest.mark.parametrize(
    "question, where",
    [
        ({"question": "no id"}, r"questions\.0\.id: Field required"),
        ({"id": "q", "question": "?", "multiSelect": "yes"}, r"questions\.0\.multiSelect"),
        ({"id": "q", "question": "?", "options": [{"description": "x"}]}, r"options\.0\.label"),
    ],
)
def test_bad_questions_name_the_field(question: dict[str, Any], where: str) -> None:
    with pytest.raises(ValueError, match=where):
        requested(question)


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "frame is not JSON"),
        (b"\xff\xfe{", "frame is not JSON"),
        ("[1, 2]", "frame is not a JSON object but list"),
        ('{"type": "open", "streamId": "ev"}', "not a mux item: type 'open'"),
        ('{"type": "item"}', "not a mux item: type 'item', streamId 'None'"),
    ],
)
def test_bad_frames_raise_value_error_naming_the_problem(text: str | bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_mux(text)


# ---------------------------------------------------------------- outcomes


def test_the_outcomes_and_the_result_body_are_exact() -> None:
    batch = answer(
        {"id": "targets", "selected": ["Code", "Docs"], "custom": "Release notes"},
        {"id": "skipped", "selected": []},
        {"id": "explicit-none", "selected": ["x"], "custom": None},
    )
    assert result(batch.to_wire()) == {
        "kind": "result",
        "value": {
            "answers": [
                {"id": "targets", "selected": ["Code", "Docs"], "custom": "Release notes"},
                {"id": "skipped", "selected": []},
                {"id": "explicit-none", "selected": ["x"]},
            ]
        },
    }
    assert DISMISSED == {
        "kind": "rejected",
        "error": {
            "name": "UserQuestionError",
            "message": "the user cancelled ask_user_question",
            "code": "ASK_CANCELLED",
        },
    }
    assert result_body("r1", "client-1", "e1", result("allowed-once")) == {
        "type": "client-request",
        "rpcId": "r1",
        "method": "$events/result",
        "payload": {
            "args": {
                "clientId": "client-1",
                "eventId": "e1",
                "outcome": {"kind": "result", "value": "allowed-once"},
            }
        },
    }


# ---------------------------------------------------------------- answer_problem

SINGLE = {
    "id": "target",
    "question": "Which one?",
    "options": [{"label": "Code"}, {"label": "Docs"}],
}
MULTI = {**SINGLE, "id": "targets", "multiSelect": True}
FREE = {"id": "notes", "question": "Anything else?"}


def test_multi_select_with_custom_is_accepted() -> None:
    # api-proxy-question: accepts selected options with custom text for multi-select questions.
    assert (
        answer_problem(
            items(MULTI),
            answer({"id": "targets", "selected": ["Code", "Docs"], "custom": "Release notes"}),
        )
        is None
    )


def test_single_select_keeps_selected_and_custom_mutually_exclusive() -> None:
    problem = answer_problem(
        items(SINGLE), answer({"id": "target", "selected": ["Code"], "custom": "x"})
    )
    assert problem is not None
    assert "single-select" in problem and "custom" in problem and "'Code'" in problem
    assert (
        answer_problem(items(SINGLE), answer({"id": "target", "selected": [], "custom": "x"}))
        is None
    )


def test_skips_and_plain_answers_are_accepted() -> None:
    questions = items(SINGLE, MULTI, FREE, PLAN_REVIEW)
    assert (
        answer_problem(questions, answer(*({"id": q.id, "selected": []} for q in questions)))
        is None
    )
    good = answer(
        {"id": "target", "selected": ["Docs"]},
        {"id": "targets", "selected": ["Docs", "Code"]},
        {"id": "notes", "selected": [], "custom": "line one\nline two"},
        {"id": "plan-review", "selected": ["Approve"]},
    )
    assert answer_problem(questions, good) is None


def test_multi_select_with_custom_only_is_accepted() -> None:
    assert (
        answer_problem(items(MULTI), answer({"id": "targets", "selected": [], "custom": "x"}))
        is None
    )


def test_wrong_count_is_a_problem() -> None:
    assert answer_problem(items(SINGLE, FREE), answer({"id": "target", "selected": []})) == (
        "expected 2 answer(s), one per question in order, got 1"
    )
    assert (
        answer_problem(items(SINGLE), answer())
        == "expected 1 answer(s), one per question in order, got 0"
    )
    too_many = answer({"id": "target", "selected": []}, {"id": "target", "selected": []})
    assert (
        answer_problem(items(SINGLE), too_many)
        == "expected 1 answer(s), one per question in order, got 2"
    )


def test_answers_match_questions_by_position() -> None:
    swapped = answer({"id": "notes", "selected": []}, {"id": "target", "selected": []})
    assert answer_problem(items(SINGLE, FREE), swapped) == (
        "answer #1 has id 'notes' but question #1 is 'target'; answers go in question order"
    )
    # Positional matching: duplicate question ids are fine when answered in order.
    twice = items(FREE, FREE)
    assert (
        answer_problem(
            twice, answer({"id": "notes", "selected": []}, {"id": "notes", "selected": []})
        )
        is None
    )


def test_duplicate_labels_are_a_problem() -> None:
    problem = answer_problem(
        items(MULTI), answer({"id": "targets", "selected": ["Code", "Docs", "Code"]})
    )
    assert problem == "answer to 'targets' selects 'Code' more than once"


@pytest.mark.parametrize("blank", ["", "  ", "\n\t", "\u3000", "\ufeff", "\u00a0\u2028"])
def test_blank_custom_is_a_problem(blank: str) -> None:
    problem = answer_problem(items(FREE), answer({"id": "notes", "selected": [], "custom": blank}))
    assert problem == "answer to 'notes' has blank custom text; leave custom out instead"


@pytest.mark.parametrize("text", ["\x1c", "\x85", " x "])
def test_custom_is_blank_by_javascripts_trim_not_pythons(text: str) -> None:
    # U+001C and U+0085 are str.isspace() but not trimmed by String.prototype.trim.
    assert (
        answer_problem(items(FREE), answer({"id": "notes", "selected": [], "custom": text})) is None
    )


def test_single_select_allows_at_most_one_label() -> None:
    problem = answer_problem(items(SINGLE), answer({"id": "target", "selected": ["Code", "Docs"]}))
    assert (
        problem == "question 'target' is single-select but 2 labels are selected ('Code', 'Docs')"
    )
    explicit = {**SINGLE, "multiSelect": False}
    assert (
        answer_problem(items(explicit), answer({"id": "target", "selected": ["Code", "Docs"]}))
        is not None
    )


def test_labels_must_be_options() -> None:
    problem = answer_problem(items(SINGLE), answer({"id": "target", "selected": ["Tests"]}))
    assert (
        problem
        == "answer to 'target' selects 'Tests', which is not one of its options ('Code', 'Docs')"
    )
    # Labels match exactly: no trimming or case folding.
    assert answer_problem(items(MULTI), answer({"id": "targets", "selected": ["code"]})) is not None


def test_a_question_without_options_only_takes_an_empty_selection() -> None:
    problem = answer_problem(items(FREE), answer({"id": "notes", "selected": ["Code"]}))
    assert problem == "question 'notes' has no options, so selected must be []; got 'Code'"
    no_options = {**FREE, "options": [], "multiSelect": True}
    assert answer_problem(items(no_options), answer({"id": "notes", "selected": ["x"]})) is not None
    assert answer_problem(items(FREE), answer({"id": "notes", "selected": []})) is None


def test_the_first_broken_rule_is_reported() -> None:
    questions = items(SINGLE, FREE)
    batch = answer(
        {"id": "target", "selected": ["Nope", "Nope"]},  # duplicate before not-an-option
        {"id": "notes", "selected": [], "custom": " "},
    )
    assert answer_problem(questions, batch) == "answer to 'target' selects 'Nope' more than once"
    batch = answer(
        {"id": "target", "selected": ["Code"]}, {"id": "notes", "selected": [], "custom": " "}
    )
    assert (
        answer_problem(questions, batch)
        == "answer to 'notes' has blank custom text; leave custom out instead"
    )


def test_plan_review_answers() -> None:
    questions = items(PLAN_REVIEW)
    assert answer_problem(questions, answer({"id": "plan-review", "selected": ["Approve"]})) is None
    assert (
        answer_problem(
            questions, answer({"id": "plan-review", "selected": [], "custom": "shorter"})
        )
        is None
    )
    with_feedback = answer(
        {"id": "plan-review", "selected": ["Keep planning"], "custom": "shorter"}
    )
    assert answer_problem(questions, with_feedback) is not None  # single-select
    both = answer({"id": "plan-review", "selected": ["Approve", "Keep planning"]})
    assert answer_problem(questions, both) is not None


@pytest.mark.parametrize(
    ("url", "setting", "base", "token"),
    [
        ("http://127.0.0.1:80/?token=abc", "http://127.0.0.1:80/", "http://127.0.0.1:80", "abc"),
        ("http://h:1/x/?a=1&token=t#f", "http://h:1/x/?a=1#f", "http://h:1/x?a=1", "t"),
        ("http://h:1/?token=", "http://h:1/", "http://h:1", None),
        ("http://h:1/", "http://h:1/", "http://h:1", None),
    ],
)
def test_the_host_url_gives_up_its_token_once_for_the_settings_and_the_client(
    url: str, setting: str, base: str, token: str | None
) -> None:
    assert split_token(url) == (setting, token)  # DSH_HOST_URL as the settings keep it
    assert split_host_url(url) == (base, token)  # the base the client joins paths to
