"""bolt_app.bolt_request: the request bolt would build from a body, a form's fields decoded in C.

Every body here goes through both ``bolt_request`` and bolt's own
``AsyncBoltRequest(body=..., query=..., headers=...)``; each field bolt's dispatch reads
must come out the same. The bodies are the ones Slack sends (clicks on rendered messages,
a modal submission, a slash command, Events API JSON) and the odd ones a form parser must
agree on (blank values, repeated names, ``+`` against ``%2B``, broken escapes, characters no
form encoder emits).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
import slack_bolt.request.internals
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_bolt.request.async_request import AsyncBoltRequest

from adapters.slack.clicks.bolt_app import bolt_request, form_fields
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.message import render_open
from adapters.slack.render.blocks.modals import render_text_modal
from adapters.slack.sandbox.signing import build_event_request, build_interaction_request
from bot.questions.models import AskUserQuestionItem
from tests.slack_payloads import click, state_after, submit_view

SECRET = "test-signing-secret"
FORM = {"content-type": "application/x-www-form-urlencoded"}


def _record(*questions: dict[str, Any]) -> PendingRecord:
    items = [
        AskUserQuestionItem.model_validate({"id": f"q{i}", "question": f"Question {i}?", **q})
        for i, q in enumerate(questions)
    ]
    return PendingRecord(id="0123456789abcdef0123", owner="p", channel="C1", questions=items)


PLAN = _record(
    {
        "question": "Approve the plan? ✅ & = + % \\ \" '",
        "detail": "# Plan\n1. *Build* `x & y`\n2. Deploy to <prod> 100%",
        "options": [{"label": "Keep planning"}, {"label": "Approve"}],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }
)
FORM_RECORD = _record(
    {"options": [{"label": "S"}, {"label": "M"}, {"label": "L"}]},
    {"options": [{"label": f"Tag {i}"} for i in range(30)], "multiSelect": True},
    {"question": "Anything else?"},
)


def _slack_bodies() -> list[tuple[str, dict[str, str]]]:
    plan = render_open(PLAN).blocks
    form = render_open(FORM_RECORD).blocks
    submit = click(form, action_id="aq1.submit", state_values=state_after(form, {0: ["M"]}))
    bodies = [
        build_interaction_request(click(plan, button_text="Approve"), SECRET),
        build_interaction_request(submit, SECRET),
        build_interaction_request(submit_view(render_text_modal(FORM_RECORD, 2), "a ✅"), SECRET),
        build_event_request(
            {"type": "app_home_opened", "user": "U1", "tab": "home"},
            SECRET,
            team_id="T1",
            api_app_id="A1",
        ),
    ]
    command = urlencode({"command": "/ask", "text": "a & b = c + 100%", "user_id": "U1"})
    bodies.append((command, FORM))
    return [(body, {k.lower(): v for k, v in headers.items()}) for body, headers in bodies]


ODD_FORMS = [
    "",
    "a=1&b=&c",
    "a=1&a=2",
    "a=1+2&b=%2B&c=%26%3D&d=%25",
    "d=%zz&e=%&f=%E2%9C&g==h&=i",
    "payload=%7B%22a%22%3A1%7D&payload=%7B%22b%22%3A2%7D",
    "xpayloadx=1",
    "a=%00&b=%C3%A9&c=%ED%A0%80",
    "a=b#c&d=e",
    "a=é&b=ü ü",
    ";a=1;b=2",
    "a=1&&&b=2&",
]


def _same(body: str, headers: dict[str, str], query: str = "") -> AsyncBoltRequest:
    ours = bolt_request(body, query, headers)
    bolts = AsyncBoltRequest(body=body, query=query, headers=headers)  # type: ignore[arg-type]
    assert ours.raw_body == bolts.raw_body == body
    assert ours.body == bolts.body
    assert dict(ours.context) == dict(bolts.context)
    assert (ours.query, ours.headers, ours.content_type) == (
        bolts.query,
        bolts.headers,
        bolts.content_type,
    )
    assert (ours.mode, ours.lazy_only, ours.lazy_function_name) == (
        bolts.mode,
        bolts.lazy_only,
        bolts.lazy_function_name,
    )
    return ours


@pytest.mark.parametrize("index", range(5))
def test_slacks_bodies_give_the_request_bolt_builds(index: int) -> None:
    body, headers = _slack_bodies()[index]
    request = _same(body, headers, query="x=1&y=%20")
    assert request.body  # each parsed to something
    if "payload=" in body:
        assert request.context["user_id"] and request.context["team_id"]


@pytest.mark.parametrize("body", ODD_FORMS)
def test_odd_forms_give_the_request_bolt_builds(body: str) -> None:
    _same(body, FORM)


@pytest.mark.parametrize("body", ["payload", "payload=", "payload=%7Bnot+json", "payload=%7B%22a"])
def test_a_payload_that_is_not_json_raises_value_error_as_bolt_does(body: str) -> None:
    with pytest.raises(ValueError):
        AsyncBoltRequest(body=body, query="", headers=FORM)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        bolt_request(body, "", FORM)


def test_a_form_sent_as_json_is_read_as_json_as_bolt_does() -> None:
    json_type = {"content-type": "application/json"}
    for body in ("payload=%7B%7D", "a=1"):
        with pytest.raises(ValueError):
            AsyncBoltRequest(body=body, query="", headers=json_type)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            bolt_request(body, "", json_type)


def test_a_form_without_a_content_type_and_json_either_way() -> None:
    _same("payload=%7B%22type%22%3A%22x%22%7D", {})
    _same('{"type": "url_verification", "challenge": "c"}', FORM)
    _same('{"type": "url_verification"}', {"content-type": "application/json; charset=utf-8"})


def test_a_clicks_form_is_decoded_without_urllib(monkeypatch: pytest.MonkeyPatch) -> None:
    # The point of the module: bolt's parser (urllib's parse_qsl) is not what decodes a
    # click; only a body outside a form encoder's alphabet falls back to it.
    body, headers = _slack_bodies()[0]
    expected = AsyncBoltRequest(body=body, query="", headers=headers)  # type: ignore[arg-type]

    def refused(*_: object, **__: object) -> list[tuple[str, str]]:
        raise AssertionError("urllib's parse_qsl was used")

    monkeypatch.setattr(slack_bolt.request.internals, "parse_qsl", refused)
    assert bolt_request(body, "", headers).body == expected.body
    with pytest.raises(AssertionError, match="parse_qsl"):
        bolt_request("a=b#c", "", FORM)


_FORM_TEXT = st.lists(
    st.sampled_from([*"abcXYZ019._~*%+&=-", "%2", "%2B", "%E2%9C%85", "%zz", "%00"]),
    max_size=40,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    fields=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=20)), max_size=5),
    raw=_FORM_TEXT,
)
def test_form_fields_agree_with_urllib(fields: list[tuple[str, str]], raw: str) -> None:
    from urllib.parse import parse_qsl

    for body in (urlencode(fields), raw, "payload=" + urlencode({"x": json.dumps(fields)})):
        assert form_fields(body) == dict(parse_qsl(body, keep_blank_values=True)), body
