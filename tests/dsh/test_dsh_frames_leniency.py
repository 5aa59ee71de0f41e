"""What the real host sends that the seam's own models would refuse, and what the client logs.

- The tool lets keys beyond the seam's through (§5.3: ``additionalProperties: true``, options
  passed on as the same array) and the host pushes ``request.questions`` verbatim (§6.1); its
  web client parses them with zod, which strips unknown keys. So a question, option or intent
  with an extra key is asked like any other, and only the keys the seam knows are kept.
- A frame whose ``type`` or ``streamId`` is not a string is a malformed frame like any other:
  skipped with one log line, the downlink kept (docs/dsh.md).
- A credential in the host URL's user part (``http://TOKEN@host``) never reaches a log record.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from adapters.dsh.client import DshHostClient
from adapters.dsh.mux import Waterfall, events_value, parse_mux
from adapters.urls import redact_url
from bot.logs import TextFormatter, redact
from bot.questions.models import (
    AskUserQuestionItem,
    AskUserQuestionOption,
    PlanReviewIntent,
)
from tests.dsh import test_dsh_client as _rig_module
from tests.dsh.test_dsh_client import (
    SESSION_A,
    TARGET,
    TIMEOUT,
    Rig,
    RigFactory,
    answer_of,
    envelope,
    eventually,
    interactive,
)

make_rig = _rig_module.make_rig  # the fixtures of the client's end-to-end tests
rig = _rig_module.rig

SKIPPED = "dsh host: skipped a malformed frame"

PACKAGE_MANAGER: dict[str, Any] = {
    "id": "pkg",
    "question": "Which package manager?",
    "header": "Setup",
    "priority": "high",  # a question-level key the seam lacks
    "options": [
        {"label": "pnpm", "recommended": True},  # as an LLM may write it
        {"label": "npm", "description": "The default.", "rank": 2},
    ],
}
PLAN_REVIEW: dict[str, Any] = {
    "id": "plan-review",
    "question": "Approve this plan and leave plan mode?",
    "detail": "# Plan\n\n1. do it",
    "options": [{"label": "Approve"}, {"label": "Keep planning"}],
    "intent": {"kind": "plan-review", "approve": "Approve", "style": "compact"},
}


def requested(*questions: dict[str, Any], event_id: str = "6f1c") -> Any:
    """A question waterfall carrying ``questions`` verbatim, as read off the mux."""
    value = {
        "type": "waterfall",
        "event": "user-questions/request",
        "eventId": event_id,
        "agentId": "sid",
        "request": {"questions": list(questions)},
    }
    return events_value(
        parse_mux(json.dumps({"type": "item", "streamId": "ev", "value": value})).value
    )


# --------------------------------------------------------------------------- parsing


def test_unknown_keys_at_every_level_of_a_question_are_ignored() -> None:
    request = requested(PACKAGE_MANAGER, PLAN_REVIEW)
    assert isinstance(request, Waterfall)
    questions = request.questions
    assert [type(question) for question in questions] == [AskUserQuestionItem] * 2
    assert [question.to_wire() for question in questions] == [
        {
            "id": "pkg",
            "question": "Which package manager?",
            "header": "Setup",
            "options": [{"label": "pnpm"}, {"label": "npm", "description": "The default."}],
        },
        {**PLAN_REVIEW, "intent": {"kind": "plan-review", "approve": "Approve"}},
    ]
    assert questions[0].option_labels == ["pnpm", "npm"]
    assert questions[1].intent == PlanReviewIntent(kind="plan-review", approve="Approve")


@pytest.mark.parametrize(
    "question, where",
    [
        (
            {**PACKAGE_MANAGER, "options": [{"label": 1, "recommended": True}]},
            r"^bad user-questions/request waterfall: questions\.0\.options\.0\.label: ",
        ),
        ({**PACKAGE_MANAGER, "multiSelect": "yes"}, r"questions\.0\.multiSelect"),
        ({**PACKAGE_MANAGER, "id": None}, r"questions\.0\.id"),
        (
            {**PLAN_REVIEW, "intent": {"kind": "poll", "approve": "Approve", "style": "x"}},
            r"questions\.0\.intent",  # an unknown kind still refuses the frame (§7)
        ),
    ],
)
def test_the_known_keys_are_still_checked(question: dict[str, Any], where: str) -> None:
    with pytest.raises(ValueError, match=where) as info:
        requested(question)
    for extra in ("priority", "recommended", "style", "Extra inputs"):
        assert extra not in str(info.value)


def wire_names(model: type[BaseModel]) -> dict[str, str | None]:
    """A model's fields by attribute name, with their wire names."""
    return {name: info.alias for name, info in model.model_fields.items()}


def test_the_host_schema_reads_every_key_the_seam_has() -> None:
    # A key of the seam's models the frame parsing left out would be dropped silently.
    option = {"label": "Approve", "description": "Leave plan mode."}
    intent = {"kind": "plan-review", "approve": "Approve"}
    question = {
        "id": "plan-review",
        "question": "Approve?",
        "detail": "# Plan",
        "header": "Plan",
        "options": [option],
        "multiSelect": False,
        "intent": intent,
    }
    for wire, seam_model in [
        (question, AskUserQuestionItem),
        (option, AskUserQuestionOption),
        (intent, PlanReviewIntent),
    ]:
        assert set(wire) == set(wire_names(seam_model).values())
    request = requested(question)
    assert isinstance(request, Waterfall)
    assert [item.to_wire() for item in request.questions] == [question]


def test_the_seam_itself_still_refuses_unknown_keys() -> None:
    # The HTTP API validates with the seam's models: an unknown key is an error there.
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        AskUserQuestionItem.model_validate(PACKAGE_MANAGER)


@pytest.mark.parametrize("stream", [["ev"], {"a": 1}, 7, None])
def test_a_stream_id_that_is_not_a_string_is_a_value_error(stream: Any) -> None:
    frame = {"type": "item", "streamId": stream, "value": {}}
    with pytest.raises(ValueError, match=r"^not a mux item: .*streamId"):
        parse_mux(json.dumps(frame))


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
async def test_a_question_with_extra_keys_is_asked_once_and_its_answer_reaches_the_host(
    rig: Rig,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask_raw(SESSION_A, [PACKAGE_MANAGER])
        message = await rig.message()
        # The host replays the same verbatim frame on a new downlink: still one message.
        await rig.host.drop()
        await rig.host.wait_for_total_connections(2)
        await asyncio.sleep(1.2)  # past the replay window
        assert rig.posts == 1 and interactive(message)

        await rig.click(message, "pnpm")

        assert await answer_of(future) == {"answers": [{"id": "pkg", "selected": ["pnpm"]}]}
        assert rig.host.responses == [envelope(rpc_id, {"id": "pkg", "selected": ["pnpm"]})]
        await eventually(lambda: not interactive(message), "the message to close")
        assert rig.posts == 1


async def test_a_frame_whose_stream_id_is_not_a_string_is_skipped_and_the_downlink_kept(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        for stream in (["ev"], {"name": "ev"}):
            frame = {"type": "item", "streamId": stream, "value": {"type": "ready"}}
            await rig.host.push_raw(json.dumps(frame))
        _rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.click(message, "Code")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.total_connections == 1 and rig.client.state == "connected"
        assert rig.posts == 1
    dsh = [r for r in caplog.records if r.name == "adapters.dsh"]
    skipped = [r for r in dsh if r.getMessage() == SKIPPED]
    assert len(skipped) == 1 and rig.client.skips.counts["malformed_frame"] == 2  # throttled
    assert all("streamId" in r.__dict__["error"] and r.exc_info is None for r in skipped)
    assert [r.getMessage() for r in dsh if r.levelno >= logging.WARNING] == [SKIPPED]


# --------------------------------------------------------------------------- credentials


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://ghp_T0ken@host", "http://***@host"),
        ("http://ghp_T0ken@host:13080/base", "http://***@host:13080/base"),
        ("https://user:pa55@host:8443/x", "https://***:***@host:8443/x"),
        ("https://ghp_T0ken:x-oauth-basic@host", "https://***:***@host"),
        ("redis://:pa55@cache:6380/2", "redis://:***@cache:6380/2"),
        ("http://to%40ken@host", "http://***@host"),
        ("http://ghp_T0ken@[::1]:13080/", "http://***@[::1]:13080/"),
        ("http://[::1]:13080", "http://[::1]:13080"),
        ("http://host:13080/base", "http://host:13080/base"),
        ("http://host", "http://host"),
        ("https://host/x?token=abc", "https://host/x?…"),
    ],
)
def test_redact_url_masks_any_userinfo(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_masks_a_url_user_in_free_text() -> None:
    text = redact("cannot reach http://ghp_T0ken@host:13080/api and https://u:pa55@h/")
    assert "ghp_T0ken" not in text and "pa55" not in text
    assert "http://[redacted]@host:13080/api" in text


@pytest.mark.parametrize(
    "url", ["redis://:s3cr?t@10.0.0.5:6379/0", "redis://user:s3c#t@10.0.0.5:6379/0"]
)
def test_redact_masks_a_url_password_holding_a_question_mark_or_hash(url: str) -> None:
    shown = redact(f"cannot connect to {url}")
    assert "s3c" not in shown and "@10.0.0.5:6379/0" in shown, shown


@pytest.mark.parametrize("userinfo", ["ghp_T0ken", "ghp_T0ken:x-oauth-basic"])
async def test_the_client_logs_no_credential_given_in_the_url(
    make_rig: RigFactory, caplog: pytest.LogCaptureFixture, userinfo: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        built = await make_rig()
        await built.host.wait_for_connections(1)
        port = built.host.port
        client = DshHostClient(
            f"http://{userinfo}@127.0.0.1:{port}",
            built.service,
            provider=built.provider,
            backoff_initial=0.05,
            backoff_max=0.2,
            heartbeat=None,
        )
        await client.start()
        await built.host.wait_for_total_connections(2)
        await eventually(lambda: client.state == "connected", "the second client to connect")
        await client.stop()
    records = [r for r in caplog.records if r.name == "adapters.dsh"]
    mine = [r for r in records if r.__dict__.get("url", "").startswith("http://***")]
    masked = "***:***" if ":" in userinfo else "***"
    assert {r.getMessage(): r.__dict__["url"] for r in mine} == {
        message: f"http://{masked}@127.0.0.1:{port}"
        for message in ("dsh host: connecting", "dsh host: connected", "dsh host: stopped")
    }
    formatter = TextFormatter()
    for record in caplog.records:
        assert "ghp_T0ken" not in repr(vars(record))
        assert "ghp_T0ken" not in formatter.format(record)
