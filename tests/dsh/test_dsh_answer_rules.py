"""The host's answer rules (``matchesQuestions``), one broken at a time (issue 41): what the
bot refuses to send, asking the person again instead."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dsh.mux import answer_problem
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

pytestmark = pytest.mark.timeout(10)
QUESTIONS = [
    AskUserQuestionItem.model_validate(q)
    for q in (
        {"id": "one", "question": "Which?", "options": [{"label": "A"}, {"label": "B"}]},
        {
            "id": "many",
            "question": "Which ones?",
            "options": [{"label": "X"}, {"label": "Y"}],
            "multiSelect": True,
        },
        {"id": "free", "question": "Say?"},
    )
]


def problem(*items: dict[str, Any]) -> str | None:
    return answer_problem(QUESTIONS, AskUserQuestionAnswer.model_validate({"answers": list(items)}))


GOOD = [
    {"id": "one", "selected": ["A"]},
    {"id": "many", "selected": ["X", "Y"], "custom": "and Z"},
    {"id": "free", "selected": [], "custom": "hello"},
]


def test_a_matching_answer_has_no_problem() -> None:
    assert problem(*GOOD) is None
    assert problem({"id": "one", "selected": []}, GOOD[1], {"id": "free", "selected": []}) is None
    assert problem({"id": "one", "selected": [], "custom": "mine"}, *GOOD[1:]) is None


@pytest.mark.parametrize(
    ("items", "words"),
    [
        (GOOD[:2], "expected 3 answer(s)"),
        ([*GOOD, GOOD[0]], "got 4"),
        ([GOOD[1], GOOD[0], GOOD[2]], "answer #1 has id 'many'"),
        ([{"id": "one", "selected": ["A", "A"]}, *GOOD[1:]], "selects 'A' more than once"),
        ([GOOD[0], {"id": "many", "selected": ["X", "X"]}, GOOD[2]], "'X' more than once"),
        ([GOOD[0], GOOD[1], {"id": "free", "selected": [], "custom": "\u3000\ufeff"}], "blank"),
        ([{"id": "one", "selected": ["A"], "custom": "c"}, *GOOD[1:]], "selected must be []"),
        ([{"id": "one", "selected": ["A", "B"]}, *GOOD[1:]], "single-select but 2 labels"),
        ([{"id": "one", "selected": ["C"]}, *GOOD[1:]], "'C', which is not one of"),
        ([GOOD[0], {"id": "many", "selected": ["X", "Q"]}, GOOD[2]], "'Q', which is not"),
        ([GOOD[0], GOOD[1], {"id": "free", "selected": ["A"]}], "has no options"),
    ],
)
def test_each_broken_rule_is_named(items: list[dict[str, Any]], words: str) -> None:
    found = problem(*items)
    assert found is not None and words in found


def test_custom_text_of_js_whitespace_only_is_blank_but_other_controls_are_text() -> None:
    assert problem(GOOD[0], GOOD[1], {"id": "free", "selected": [], "custom": "\u0085"}) is None
    assert problem(GOOD[0], GOOD[1], {"id": "free", "selected": [], "custom": " \t\n"}) is not None
