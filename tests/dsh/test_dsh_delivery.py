"""Responses the host must get: past an outage of ``$events/result`` alone, after a lost
reply, for requests Slack cannot show, and for host text with lone surrogates.

Same rig as ``test_dsh_client`` (the dsh host stand-in on its wire; Slack's stand-in).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web

from adapters.dsh.asks import DELIVERED_NOTE, RETRYING_NOTE
from adapters.dsh.mux import Waterfall, events_value, parse_mux
from adapters.dsh.session_log import SessionLog
from adapters.slack.render.outcomes import IN_FLIGHT
from bot.questions.errors import ASK_CANCELLED
from tests.dsh import test_dsh_client as _rig_module
from tests.dsh.test_dsh_approvals import BASH
from tests.dsh.test_dsh_client import (
    SESSION_A,
    TARGET,
    TIMEOUT,
    Rig,
    answer_of,
    eventually,
    failure_of,
    interactive,
    shown,
)
from tests.dsh_mux_host import MuxHost, new_session_id

make_rig = _rig_module.make_rig
rig = _rig_module.rig

Handler = Any


def _patch_respond(host: MuxHost, wrap: Any) -> None:
    original = host._result

    async def respond(request: web.Request) -> web.StreamResponse:
        return await wrap(original, request)  # type: ignore[no-any-return]

    host._result = respond  # type: ignore[method-assign]


async def _rebind(host: MuxHost) -> None:
    """The stand-in binds its routes at start: restart it (its state kept)."""
    await host.stop()
    await host.start(host.port, after_outage=True)
    await host.wait_for_connections(1)


def _notices(rig: Rig) -> list[str]:
    """Plain messages (no buttons) the bot posted in the channel."""
    return [
        m.text or ""
        for m in rig.slack.workspace.history(rig.channel)
        if m.thread_ts is None and not m.blocks
    ]


# ------------------------------------------------------------------ defect 1: POST outage


@pytest.mark.slow
async def test_an_answer_is_sent_for_as_long_as_the_downlink_stays_up(rig: Rig) -> None:
    """Only ``$events/result`` fails (a proxy's 503): the bot keeps sending while connected,
    the host gets the answer once the proxy recovers."""
    failing = {"on": True}

    async def wrap(original: Handler, request: web.Request) -> web.StreamResponse:
        if failing["on"]:
            return web.Response(status=503, text="upstream unavailable")
        return await original(request)  # type: ignore[no-any-return]

    _patch_respond(rig.host, wrap)
    await _rebind(rig.host)
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.click(message, "Docs")
        await eventually(lambda: RETRYING_NOTE in shown(message.blocks), "the retrying note")
        assert rig.client.in_flight == 1 and rig.client.status()["dshQuestions"] == 1
        assert rig.host.is_pending(rpc_id)
        failing["on"] = False
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        await eventually(lambda: DELIVERED_NOTE in shown(message.blocks), "the delivered note")
        assert "could not be reached" not in shown(message.blocks)
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")


async def test_an_answer_the_host_has_not_taken_says_so_at_once(rig: Rig) -> None:
    """The host cannot take the answer yet: the message says so within a second or two (it
    once showed a bare "Answered" for 120 s)."""
    failing = {"on": True}

    async def wrap(original: Handler, request: web.Request) -> web.StreamResponse:
        if failing["on"]:
            return web.Response(status=503, text="upstream unavailable")
        return await original(request)  # type: ignore[no-any-return]

    _patch_respond(rig.host, wrap)
    await _rebind(rig.host)
    async with asyncio.timeout(TIMEOUT):
        _rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.click(message, "Docs")
        await eventually(lambda: RETRYING_NOTE in shown(message.blocks), "the note", within=2)
        before = shown(message.blocks)
        assert "Answered" not in before and "Sent by" in before and IN_FLIGHT in before
        failing["on"] = False
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        await eventually(lambda: DELIVERED_NOTE in shown(message.blocks), "the delivered note")
        after = shown(message.blocks)
        assert "Answered by" in after and "Sent by" not in after and IN_FLIGHT not in after


@pytest.mark.slow
async def test_an_approval_decision_is_sent_for_as_long_as_the_downlink_stays_up(
    rig: Rig,
) -> None:
    failing = {"on": True}

    async def wrap(original: Handler, request: web.Request) -> web.StreamResponse:
        if failing["on"]:
            return web.Response(status=503, text="upstream unavailable")
        return await original(request)  # type: ignore[no-any-return]

    _patch_respond(rig.host, wrap)
    await _rebind(rig.host)
    async with asyncio.timeout(TIMEOUT):
        _, _, future = rig.host.request_approval(new_session_id(), "bash", BASH)
        message = await rig.message()
        await rig.click(message, "Allow once")
        await eventually(lambda: RETRYING_NOTE in shown(message.blocks), "the retrying note")
        assert rig.client.status()["dshApprovals"] == 1 and not future.done()
        assert "Allowed" not in shown(message.blocks) and "Sent by" in shown(message.blocks)
        failing["on"] = False
        assert await asyncio.wait_for(future, 5) == "allowed-once"
        await eventually(lambda: DELIVERED_NOTE in shown(message.blocks), "the delivered note")
        assert "Allowed" in shown(message.blocks) and "Sent by" not in shown(message.blocks)


@pytest.mark.slow
async def test_a_resend_after_a_replay_replaces_the_retrying_note(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        _, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.host.stop()
        await rig.click(message, "Docs")
        await eventually(lambda: RETRYING_NOTE in shown(message.blocks), "the note")
        await rig.host.start(rig.host.port, after_outage=True)
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        await eventually(lambda: DELIVERED_NOTE in shown(message.blocks), "the delivered note")
        assert RETRYING_NOTE not in shown(message.blocks)


# ------------------------------------------------------------ defect 4: a lost reply


def _drop_first_reply(host: MuxHost) -> None:
    state = {"dropped": False}

    async def wrap(original: Handler, request: web.Request) -> web.StreamResponse:
        response = await original(request)  # the host takes it ...
        if not state["dropped"]:
            state["dropped"] = True
            assert request.transport is not None
            request.transport.close()  # ... and its reply never reaches the bot
        return response  # type: ignore[no-any-return]

    _patch_respond(host, wrap)


async def test_an_answer_taken_with_its_reply_lost_is_not_called_unused(rig: Rig) -> None:
    _drop_first_reply(rig.host)
    await _rebind(rig.host)
    async with asyncio.timeout(TIMEOUT):
        _, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.click(message, "Docs")
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")
        assert not interactive(message)
        assert "not used" not in shown(message.blocks)


async def test_a_decision_taken_with_its_reply_lost_is_not_called_unused(rig: Rig) -> None:
    _drop_first_reply(rig.host)
    await _rebind(rig.host)
    async with asyncio.timeout(TIMEOUT):
        _, _, future = rig.host.request_approval(new_session_id(), "bash", BASH)
        message = await rig.message()
        await rig.click(message, "Allow once")
        assert await asyncio.wait_for(future, 5) == "allowed-once"
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")
        assert "not used" not in shown(message.blocks)


# -------------------------------------------------- defect 2: what Slack cannot show


async def test_a_question_slack_cannot_show_is_dismissed_in_the_host(rig: Rig) -> None:
    questions = [
        {
            "id": f"q{i}",
            "question": f"Question {i}?",
            "header": f"H{i}",
            "options": [{"label": "Yes", "description": "d"}, {"label": "No"}, {"label": "Maybe"}],
        }
        for i in range(25)
    ]
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask_raw(SESSION_A, questions)
        assert await failure_of(future) == ASK_CANCELLED
        assert not rig.host.is_pending(rpc_id)
        notice = await eventually(lambda: _notices(rig), "a notice in the channel")
        assert len(notice) == 1 and "session 3f2a9c1e" in notice[0]
        assert "SLACK_LIMIT" in notice[0] and "dismissed" in notice[0]
        assert [m for m in rig.questions() if m.blocks] == []  # no question message
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")


# ---------------------------------------- defect 3: lone surrogates, unexpected failures


async def test_a_lone_surrogate_in_host_text_is_shown_as_a_replacement_character(
    rig: Rig,
) -> None:
    questions = [{"id": "a", "question": "Deploy \ud83d now?", "options": [{"label": "Yes"}]}]
    async with asyncio.timeout(TIMEOUT):
        _, future = rig.host.ask_raw(SESSION_A, questions)
        message = await rig.message()
        assert "Deploy \ufffd now?" in shown(message.blocks)
        await rig.click(message, "Yes")
        assert await answer_of(future) == {"answers": [{"id": "a", "selected": ["Yes"]}]}


def test_lone_surrogates_are_replaced_in_every_host_string() -> None:
    value = {
        "type": "waterfall",
        "event": "user-questions/request",
        "eventId": "r\ud800",
        "agentId": "s\udfff",
        "request": {
            "questions": [
                {
                    "id": "i\ud83d",
                    "question": "q\ud83d",
                    "detail": "d\ud83d",
                    "header": "h\ud83d",
                    "options": [{"label": "l\ud83d", "description": "x\ud83d"}],
                }
            ],
        },
    }
    frame = json.dumps({"type": "item", "streamId": "ev", "value": value})
    parsed = events_value(parse_mux(frame).value)
    assert isinstance(parsed, Waterfall) and parsed.event_id == "r\ufffd"
    assert parsed.session_id == "s\ufffd"
    wire = json.dumps(parsed.questions[0].to_wire(), ensure_ascii=False)
    wire.encode()  # no surrogate left
    assert wire.count("\ufffd") == 6
    # a pair split in two escapes stays a real character
    paired = events_value(parse_mux(frame.replace("\\ud83d", "\\ud83d\\ude80")).value)
    assert isinstance(paired, Waterfall)
    assert paired.questions[0].question == "q\U0001f680"
    # a session log's tool call, its arguments a JSON string of their own
    arguments = json.dumps({"command": "echo \ud83d", "path": "/p\udc00"})
    data = {"callId": "c\ud800", "name": "b\udfff", "arguments": arguments}
    event = {"type": "event", "event": {"type": "tool/call", "data": data}}
    log = SessionLog()
    log.item(
        "s", parse_mux(json.dumps({"type": "item", "streamId": "log:s", "value": event})).value
    )
    call = log.call("s", "c\ufffd")
    assert call is not None and call.name == "b\ufffd"
    assert call.command == "echo \ufffd" and call.path == "/p\ufffd"


async def test_a_request_the_bot_fails_on_is_dismissed_in_the_host(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(request: object) -> object:
        raise RuntimeError("a bug")

    monkeypatch.setattr(rig.service, "ask", broken)
    async with asyncio.timeout(TIMEOUT):
        _, future = rig.host.ask(SESSION_A, [TARGET])
        assert await failure_of(future) == ASK_CANCELLED
        notice = await eventually(lambda: _notices(rig), "a notice in the channel")
        assert "session 3f2a9c1e" in notice[0] and "RuntimeError" in notice[0]
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")
