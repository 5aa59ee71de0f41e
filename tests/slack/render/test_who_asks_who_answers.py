"""Every question says who asked and who may answer (issue 39, item 3): an API question
without a label names its token, an allow-list or a review's reviewers are named."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.render.approval import render_record
from bot.questions.review import ReviewerSet, ReviewPolicy
from tests.slack.render.test_message_budget import plan, record

pytestmark = pytest.mark.timeout(30)

ASK = {"question": "Deploy?", "options": [{"label": "Yes"}, {"label": "No"}]}


def byline(**fields: Any) -> list[str]:
    rendered = render_record(record(fields.pop("question", ASK), **fields))
    first = rendered.blocks[0]
    assert first["type"] == "context", rendered.blocks[:2]
    return [e["text"] for e in first["elements"]]


@pytest.mark.parametrize(
    ("asked_by", "shown"),
    [("api:ci-bot", "Asked by ci-bot (HTTP API)"), ("api", "Asked by the HTTP API")],
)
def test_an_api_question_without_a_label_names_who_asked(asked_by: str, shown: str) -> None:
    assert shown in byline(asked_by=asked_by)
    assert "Asked by session 3f" in byline(asked_by=asked_by, label="session 3f")


def test_an_allow_list_is_named_on_the_message() -> None:
    line = byline(allowed_users=["U0ALICE1", "U0BOB001"], allowed_usergroups=["S0LEADS1"])
    assert "Who may answer: <@U0ALICE1>, <@U0BOB001> or members of <!subteam^S0LEADS1>" in line


def test_a_reviews_reviewers_are_named_and_anyone_says_so() -> None:
    review = ReviewPolicy(reviewers=ReviewerSet(users=["U0BOB001"]))
    assert "Who may answer: <@U0BOB001>" in byline(question=plan("1. Go"), review=review)
    assert "Anyone here may answer" in byline()
