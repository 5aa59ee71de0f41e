"""The dsh host's wire protocol: frames, client responses, receipts, ``answer_problem``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.dsh.mux import split_host_url
from adapters.dsh.protocol import (
    OtherPayload,
    Outcome,
    QuestionRequested,
    QuestionResolved,
    Receipt,
    answer_problem,
    answer_response,
    cancel_response,
    parse_frame,
)
from adapters.urls import split_token
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from tests.dsh_wire import (
    ErrorResult,
    OkResult,
    QuestionResponse,
    ResponseRejectedError,
    parse_client_response,
    question_requested_frame,
    question_resolved_frame,
    raise_if_rejected,
)

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


def envelope(method: str, payload: Any, rpc_id: str = "6f1c") -> str:
    """A server-request frame as the host sends it."""
    return json.dumps(
        {"type": "server-request", "rpcId": rpc_id, "method": method, "payload": payload}
    )


def requested(*questions: dict[str, Any], session_id: str = "sid") -> str:
    """A question/requested frame."""
    payload = {"type": "question/requested", "sessionId": session_id, "questions": list(questions)}
    return envelope("question/requested", payload)


def items(*wire: dict[str, Any]) -> list[AskUserQuestionItem]:
    """Questions from wire JSON."""
    return [AskUserQuestionItem.model_validate(q) for q in wire]


def answer(*wire: dict[str, Any]) -> AskUserQuestionAnswer:
    """An answer batch from wire JSON."""
    return AskUserQuestionAnswer.model_validate({"answers": list(wire)})


# ---------------------------------------------------------------- frames


def test_question_requested_frame_parses_verbatim() -> None:
    multi = {
        "id": "targets",
        "question": "Which?",
        "options": [{"label": "Code"}],
        "multiSelect": True,
    }
    frame = parse_frame(requested(PLAN_REVIEW, multi))
    assert frame.rpc_id == "6f1c"
    assert frame.method == "question/requested"
    assert isinstance(frame.payload, QuestionRequested)
    assert frame.payload.session_id == "sid"
    assert [q.to_wire() for q in frame.payload.questions] == [PLAN_REVIEW, multi]
    assert frame.payload.questions[1].is_multi_select
    assert frame.to_wire() == json.loads(requested(PLAN_REVIEW, multi))


@pytest.mark.parametrize("outcome", ["answered", "cancelled"])
def test_question_resolved_frame_parses(outcome: Outcome) -> None:
    payload = {
        "type": "question/resolved",
        "sessionId": "sid",
        "questionRpcId": "6f1c",
        "outcome": outcome,
    }
    frame = parse_frame(envelope("question/resolved", payload, rpc_id="fresh"))
    assert frame.rpc_id == "fresh"
    assert frame.payload == QuestionResolved(
        type="question/resolved", session_id="sid", question_rpc_id="6f1c", outcome=outcome
    )


def test_question_resolved_rejects_an_unknown_outcome() -> None:
    payload = {
        "type": "question/resolved",
        "sessionId": "s",
        "questionRpcId": "r",
        "outcome": "done",
    }
    with pytest.raises(ValueError, match=r"bad question/resolved frame: payload\.outcome"):
        parse_frame(envelope("question/resolved", payload))


@pytest.mark.parametrize(
    "method, payload",
    [
        (
            "session/event",
            {"type": "session/event", "sessionId": "s", "event": {"type": "tool/call"}},
        ),
        ("session/subscribed", {"type": "session/subscribed", "sessionId": "s", "lastSeq": 2}),
        ("session/jobs", {"type": "session/jobs", "anything": [1, 2]}),
        ("session/event", {"type": "question/requested", "questions": []}),  # read by method
        ("future/thing", {}),
    ],
)
def test_other_methods_parse_as_opaque_frames(method: str, payload: dict[str, Any]) -> None:
    frame = parse_frame(envelope(method, payload))
    assert frame.method == method
    assert isinstance(frame.payload, OtherPayload)
    assert frame.payload.model_extra == payload
    assert frame.payload.kind == payload.get("type")
    assert frame.to_wire() == json.loads(envelope(method, payload))


def test_bytes_and_unknown_envelope_keys_are_accepted() -> None:
    frame = json.loads(requested({"id": "q", "question": "Go?"}))
    frame["seq"] = 7
    frame["payload"]["agentId"] = "a1"
    parsed = parse_frame(json.dumps(frame).encode())
    assert isinstance(parsed.payload, QuestionRequested)


def test_empty_question_batch_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"payload\.questions: List should have at least 1 item"):
        parse_frame(requested())


@pytest.mark.parametrize(
    "intent",
    [
        {"kind": "plan-review"},  # no approve
        {"kind": "poll", "approve": "Approve"},  # unknown kind
        {"approve": "Approve"},  # no kind
    ],
)
def test_a_bad_intent_rejects_the_whole_frame(intent: dict[str, Any]) -> None:
    question = {**PLAN_REVIEW, "intent": intent}
    with pytest.raises(
        ValueError, match=r"^bad question/requested frame: payload\.questions\.1\.intent"
    ):
        parse_frame(requested({"id": "ok", "question": "Fine?"}, question))


@pytest.mark.parametrize(
    "question, where",
    [
        ({"question": "no id"}, r"payload\.questions\.0\.id: Field required"),
        ({"id": "q", "question": "?", "multiSelect": "yes"}, r"payload\.questions\.0\.multiSelect"),
        ({"id": "q", "question": "?", "options": [{"description": "x"}]}, r"options\.0\.label"),
    ],
)
def test_bad_questions_name_the_field(question: dict[str, Any], where: str) -> None:
    with pytest.raises(ValueError, match=where):
        parse_frame(requested(question))


def test_a_question_method_needs_its_own_payload_type() -> None:
    resolved = {
        "type": "question/resolved",
        "sessionId": "s",
        "questionRpcId": "r",
        "outcome": "answered",
    }
    with pytest.raises(
        ValueError,
        match="needs a payload of type 'question/requested', got type 'question/resolved'",
    ):
        parse_frame(envelope("question/requested", resolved))
    with pytest.raises(ValueError, match="got type None"):
        parse_frame(envelope("question/resolved", {"sessionId": "s"}))
    with pytest.raises(ValueError, match=r"got type \[\]"):
        parse_frame(envelope("question/requested", {"type": []}))


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "frame is not JSON"),
        (b"\xff\xfe{", "frame is not JSON"),
        ("[1, 2]", "frame is not a JSON object but list"),
        (
            '{"type": "server-request", "method": "x", "payload": {}}',
            r"envelope: rpcId: Field required",
        ),
        (
            '{"type": "client-response", "rpcId": "r", "method": "x", "payload": {}}',
            r"envelope: type: Input should be 'server-request'",
        ),
        (
            '{"type": "server-request", "rpcId": 1, "method": "x", "payload": {}}',
            r"rpcId: Input should be a valid string",
        ),
        ('{"type": "server-request", "rpcId": "r", "payload": {}}', r"method: Field required"),
        (
            '{"type": "server-request", "rpcId": "r", "method": "x", "payload": 3}',
            r"^bad server-request envelope: payload",
        ),
    ],
)
def test_bad_frames_raise_value_error_naming_the_problem(text: str | bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_frame(text)


def test_frame_builders_round_trip() -> None:
    built = question_requested_frame("r1", "s1", items(PLAN_REVIEW))
    assert built == json.loads(requested(PLAN_REVIEW, session_id="s1").replace('"6f1c"', '"r1"'))
    assert parse_frame(json.dumps(built)).to_wire() == built
    resolved = question_resolved_frame("r2", "s1", "r1", "cancelled")
    assert resolved == {
        "type": "server-request",
        "rpcId": "r2",
        "method": "question/resolved",
        "payload": {
            "type": "question/resolved",
            "sessionId": "s1",
            "questionRpcId": "r1",
            "outcome": "cancelled",
        },
    }
    assert parse_frame(json.dumps(resolved)).to_wire() == resolved


# ---------------------------------------------------------------- client responses


def test_answer_response_is_the_exact_ok_envelope() -> None:
    batch = answer(
        {"id": "targets", "selected": ["Code", "Docs"], "custom": "Release notes"},
        {"id": "skipped", "selected": []},
        {"id": "explicit-none", "selected": ["x"], "custom": None},
    )
    assert answer_response("6f1c", "sid", batch) == {
        "type": "client-response",
        "rpcId": "6f1c",
        "result": {
            "ok": True,
            "value": {
                "sessionId": "sid",
                "answer": {
                    "answers": [
                        {"id": "targets", "selected": ["Code", "Docs"], "custom": "Release notes"},
                        {"id": "skipped", "selected": []},
                        {"id": "explicit-none", "selected": ["x"]},
                    ]
                },
            },
        },
    }
    # Key order is id, selected, custom (compact JSON as the web client sends it).
    text = json.dumps(answer_response("r", "s", batch), separators=(",", ":"))
    assert '{"id":"targets","selected":["Code","Docs"],"custom":"Release notes"}' in text


def test_cancel_response_is_the_exact_cancelled_envelope() -> None:
    assert cancel_response("6f1c") == {
        "type": "client-response",
        "rpcId": "6f1c",
        "result": {
            "ok": False,
            "error": {
                "code": "cancelled",
                "message": "the user closed this question request",
                "details": {},
            },
        },
    }


def test_client_responses_parse_back() -> None:
    ok = parse_client_response(answer_response("r", "s", answer({"id": "q", "selected": []})))
    assert ok.rpc_id == "r"
    assert isinstance(ok.result, OkResult)
    value = QuestionResponse.model_validate(ok.result.value)
    assert value.session_id == "s"
    assert value.answer.to_wire() == {"answers": [{"id": "q", "selected": []}]}
    cancelled = parse_client_response(cancel_response("r"))
    assert isinstance(cancelled.result, ErrorResult)
    assert cancelled.result.error.code == "cancelled"
    assert cancelled.result.error.details == {}


@pytest.mark.parametrize(
    "body, message",
    [
        ([], "bad client-response"),
        (
            {
                "type": "server-request",
                "rpcId": "r",
                "result": {"ok": False, "error": {"code": "c", "message": "m"}},
            },
            "type",
        ),
        ({"type": "client-response", "result": {"ok": True, "value": 1}}, "rpcId: Field required"),
        (
            {"type": "client-response", "rpcId": "r", "result": {"ok": 1, "value": 1}},
            "result.ok must be true or false",
        ),
        (
            {"type": "client-response", "rpcId": "r", "result": {"ok": False}},
            r"result\.error: Field required",
        ),
        (
            {
                "type": "client-response",
                "rpcId": "r",
                "result": {"ok": False, "error": {"code": "c"}},
            },
            r"result\.error\.message",
        ),
    ],
)
def test_bad_client_responses_are_refused(body: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_client_response(body)


def test_the_question_response_schema() -> None:
    # rpc-schemas: an empty answers list parses at the schema level.
    assert (
        QuestionResponse.model_validate(
            {"sessionId": "s", "answer": {"answers": []}}
        ).answer.answers
        == []
    )
    for bad in (
        {"sessionId": "s"},
        {"sessionId": "s", "answer": {"answers": [{"id": "q"}]}},
        {"sessionId": "s", "answer": {"answers": [{"id": "q", "selected": "Code"}]}},
        {"sessionId": "s", "answer": {"answers": [{"id": "q", "selected": [], "custom": None}]}},
        {"sessionId": "s", "answer": {"answers": [{"id": "q", "selected": [], "extra": 1}]}},
    ):
        with pytest.raises(ValueError):
            QuestionResponse.model_validate(bad)


# ---------------------------------------------------------------- receipts


@pytest.mark.parametrize(
    "wire",
    [
        {"accepted": True},
        {"accepted": False, "reason": "not-pending"},
        {"accepted": False, "reason": "bad-response"},
    ],
)
def test_receipts_round_trip(wire: dict[str, Any]) -> None:
    assert Receipt.model_validate(wire).to_wire() == wire


def test_receipt_refuses_an_unknown_reason() -> None:
    with pytest.raises(ValueError):
        Receipt.model_validate({"accepted": False, "reason": "nope"})


def test_rejected_receipts_raise_with_the_web_clients_wording() -> None:
    raise_if_rejected(Receipt(accepted=True))
    with pytest.raises(
        ResponseRejectedError, match=r"^question response rejected: not-pending$"
    ) as info:
        raise_if_rejected(Receipt(accepted=False, reason="not-pending"))
    assert info.value.reason == "not-pending"
    assert not info.value.cancellation
    with pytest.raises(
        ResponseRejectedError, match=r"^question cancellation rejected: bad-response$"
    ):
        raise_if_rejected(Receipt(accepted=False, reason="bad-response"), cancellation=True)


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
