"""The seam's vocabulary: exact JSON round trips, field-naming rejections, and the errors."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.questions import (
    AskUserQuestionAnswer,
    AskUserQuestionAnswerItem,
    AskUserQuestionItem,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    PlanReviewIntent,
)
from bot.questions.abort import AbortController
from bot.questions.errors import HarnessError, UserQuestionError


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def errors_of(wire: Any) -> list[tuple[tuple[str | int, ...], str, str]]:
    with pytest.raises(ValidationError) as caught:
        AskUserQuestionRequest.model_validate(wire)
    return [(tuple(e["loc"]), e["type"], e["msg"]) for e in caught.value.errors()]


FULL: dict[str, Any] = {
    "questions": [
        {
            "id": "plan-review",
            "question": "Approve this plan and leave plan mode?",
            "detail": "# Plan\n\n1. Ship it",
            "header": "Plan review",
            "options": [
                {
                    "label": "Approve",
                    "description": "Leave plan mode; the plan is carried out from the next step.",
                },
                {"label": "Keep planning"},
            ],
            "multiSelect": False,
            "intent": {"kind": "plan-review", "approve": "Approve"},
        },
        {"id": "targets", "question": "What should I update?", "multiSelect": True},
    ]
}


@pytest.mark.parametrize(
    "wire",
    [
        FULL,
        {"questions": [{"id": "confirm", "question": "Proceed?"}]},
        {"questions": [{"id": "", "question": "", "options": []}]},
        {"questions": []},
        {
            "questions": [
                {"id": "x", "question": "工程落地型？", "options": [{"label": "是 (推荐)"}]}
            ]
        },
    ],
    ids=["every-field", "minimal", "blank-strings-empty-options", "empty-batch", "non-ascii"],
)
def test_a_request_round_trips_exactly(wire: dict[str, Any]) -> None:
    request = AskUserQuestionRequest.model_validate(wire)

    assert dump(request) == wire
    assert request.to_wire() == wire


def test_the_minimal_request_gets_no_defaults_injected() -> None:
    item = AskUserQuestionRequest.model_validate(
        {"questions": [{"id": "confirm", "question": "Proceed?"}]}
    ).questions[0]

    assert item.model_fields_set == {"id", "question"}
    assert item.is_multi_select is False
    assert item.option_labels == []


@pytest.mark.parametrize(
    "wire",
    [
        {"answers": []},
        {"answers": [{"id": "confirm", "selected": ["yes"]}]},
        {
            "answers": [
                {"id": "targets", "selected": ["tests", "docs"], "custom": "release notes"},
                {"id": "skipped", "selected": []},
                {"id": "notes", "selected": [], "custom": "ship today\nand tomorrow"},
                {"id": "blank", "selected": ["x"], "custom": ""},
            ]
        },
    ],
    ids=["empty", "single", "custom-skip-multiline"],
)
def test_an_answer_round_trips_exactly(wire: dict[str, Any]) -> None:
    answer = AskUserQuestionAnswer.model_validate(wire)

    assert dump(answer) == wire
    assert answer.to_wire() == wire


def test_an_answer_item_built_in_python_has_custom_only_when_given() -> None:
    assert AskUserQuestionAnswerItem(id="a", selected=[]).to_wire() == {"id": "a", "selected": []}
    assert AskUserQuestionAnswerItem(id="a", selected=["x"], custom="y").to_wire() == {
        "id": "a",
        "selected": ["x"],
        "custom": "y",
    }


def test_agent_and_signal_never_reach_the_wire() -> None:
    signal = AbortController().signal
    agent = object()
    request = AskUserQuestionRequest(
        questions=[AskUserQuestionItem(id="a", question="q")], agent=agent, signal=signal
    )

    assert request.to_wire() == {"questions": [{"id": "a", "question": "q"}]}
    assert request.agent is agent
    assert request.signal is signal


def test_multi_select_is_the_attribute_and_multiselect_the_wire_name() -> None:
    from_wire = AskUserQuestionItem.model_validate(
        {"id": "a", "question": "q", "multiSelect": True}
    )
    built = AskUserQuestionItem(id="a", question="q", multi_select=True)

    assert from_wire.multi_select is True
    assert from_wire.is_multi_select is True
    assert built.to_wire() == {"id": "a", "question": "q", "multiSelect": True}
    assert "multi_select" not in built.to_wire()
    assert "multi_select" in AskUserQuestionItem.model_fields


def test_an_intent_is_parsed_to_a_plan_review_intent() -> None:
    item = AskUserQuestionRequest.model_validate(FULL).questions[0]

    assert isinstance(item.intent, PlanReviewIntent)
    assert (item.intent.kind, item.intent.approve) == ("plan-review", "Approve")
    assert item.option_labels == ["Approve", "Keep planning"]


def test_an_unknown_intent_kind_is_rejected_at_the_intent() -> None:
    wire = {"questions": [{"id": "a", "question": "q", "intent": {"kind": "poll", "approve": "x"}}]}

    [(loc, kind, message)] = errors_of(wire)

    assert loc == ("questions", 0, "intent")
    assert kind == "union_tag_invalid"
    assert "'poll'" in message and "'plan-review'" in message


def test_a_plan_review_intent_without_approve_is_rejected_at_approve() -> None:
    wire = {"questions": [{"id": "a", "question": "q", "intent": {"kind": "plan-review"}}]}

    [(loc, kind, _)] = errors_of(wire)

    assert loc == ("questions", 0, "intent", "plan-review", "approve")
    assert kind == "missing"


def test_an_intent_without_kind_is_rejected_at_the_intent() -> None:
    wire = {"questions": [{"id": "a", "question": "q", "intent": {"approve": "x"}}]}

    [(loc, kind, message)] = errors_of(wire)

    assert loc == ("questions", 0, "intent")
    assert kind == "union_tag_not_found"
    assert "'kind'" in message


def test_a_non_string_label_is_rejected_at_the_label() -> None:
    wire = {"questions": [{"id": "a", "question": "q", "options": [{"label": "ok"}, {"label": 2}]}]}

    [(loc, kind, _)] = errors_of(wire)

    assert loc == ("questions", 0, "options", 1, "label")
    assert kind == "string_type"


@pytest.mark.parametrize(
    ("question", "loc", "kind"),
    [
        ({"question": "q"}, ("questions", 0, "id"), "missing"),
        ({"id": "a"}, ("questions", 0, "question"), "missing"),
        ({"id": 1, "question": "q"}, ("questions", 0, "id"), "string_type"),
        (
            {"id": "a", "question": "q", "multiSelect": "yes"},
            ("questions", 0, "multiSelect"),
            "bool_type",
        ),
        (
            {"id": "a", "question": "q", "multiSelect": 1},
            ("questions", 0, "multiSelect"),
            "bool_type",
        ),
        ({"id": "a", "question": "q", "value": "x"}, ("questions", 0, "value"), "extra_forbidden"),
        (
            {"id": "a", "question": "q", "options": [{"label": "x", "recommended": True}]},
            ("questions", 0, "options", 0, "recommended"),
            "extra_forbidden",
        ),
    ],
    ids=[
        "no-id",
        "no-question",
        "int-id",
        "str-multi",
        "int-multi",
        "extra-key",
        "extra-option-key",
    ],
)
def test_malformed_questions_are_rejected_naming_the_field(
    question: dict[str, Any], loc: tuple[str | int, ...], kind: str
) -> None:
    [(got_loc, got_kind, _)] = errors_of({"questions": [question]})

    assert (got_loc, got_kind) == (loc, kind)


def test_an_answer_without_selected_is_rejected() -> None:
    with pytest.raises(ValidationError) as caught:
        AskUserQuestionAnswer.model_validate({"answers": [{"id": "a", "custom": "x"}]})

    assert [e["loc"] for e in caught.value.errors()] == [("answers", 0, "selected")]


def test_an_option_needs_a_label() -> None:
    with pytest.raises(ValidationError) as caught:
        AskUserQuestionOption.model_validate({"description": "no label"})

    assert [e["loc"] for e in caught.value.errors()] == [("label",)]


# --- errors -----------------------------------------------------------------------------------


def test_harness_error_carries_message_code_and_name() -> None:
    error = HarnessError("something failed", "SOME_CODE")

    assert isinstance(error, Exception)
    assert error.message == "something failed"
    assert str(error) == "something failed"
    assert error.code == "SOME_CODE"
    assert error.name == "HarnessError"
    assert error.cause is None
    assert error.to_dict() == {
        "name": "HarnessError",
        "code": "SOME_CODE",
        "message": "something failed",
    }


def test_user_question_error_is_a_harness_error_named_after_its_class() -> None:
    error = UserQuestionError("no user-questions provider is registered", "NO_PROVIDER")

    assert isinstance(error, HarnessError)
    assert error.name == "UserQuestionError"
    assert error.code == "NO_PROVIDER"
    assert repr(error) == (
        "UserQuestionError('no user-questions provider is registered', 'NO_PROVIDER')"
    )
    with pytest.raises(HarnessError):
        raise error


def test_a_cause_is_chained() -> None:
    cause = ConnectionError("socket closed")

    error = UserQuestionError("delivery failed", "DELIVERY_FAILED", cause=cause)

    assert error.__cause__ is cause
    assert error.cause is cause


def test_raise_from_chains_the_same_way() -> None:
    cause = TimeoutError("slow")
    with pytest.raises(UserQuestionError) as caught:
        try:
            raise cause
        except TimeoutError as exc:
            raise UserQuestionError("timed out", "ASK_TIMEOUT") from exc

    assert caught.value.__cause__ is cause
    assert caught.value.cause is cause


def test_a_key_sent_as_null_is_read_as_absent_and_left_out_of_the_wire() -> None:
    request = AskUserQuestionRequest.model_validate(
        {
            "questions": [
                {
                    "id": "a",
                    "question": "q",
                    "header": None,
                    "detail": None,
                    "options": None,
                    "multiSelect": None,
                    "intent": None,
                }
            ]
        }
    )
    assert request.to_wire() == {"questions": [{"id": "a", "question": "q"}]}
    answer = AskUserQuestionAnswer.model_validate(
        {"answers": [{"id": "a", "selected": [], "custom": None}]}
    )
    assert answer.to_wire() == {"answers": [{"id": "a", "selected": []}]}
