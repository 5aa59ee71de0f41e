"""What the real dsh host sent (``shared/reference/dsh-captured``) against our parser and stand-in.

Every captured frame must parse (or be tolerated as a push); approvals must pair with the
command they are for; the stand-in must send the same frames in the same order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from adapters.dsh.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    OtherPayload,
    QuestionRequested,
    QuestionResolved,
    ServerRequest,
    parse_frame,
)
from adapters.dsh.session_log import SessionLog, session_event
from bot.questions.models import AskUserQuestionItem
from tests.dsh_captures import captured_frames, captured_lines
from tests.dsh_host import DshHostStandIn, new_session_id

PUSHES = {
    "session/event",
    "session/subscribed",
    "session/projection",
    "session/queue",
    "session/jobs",
    "stream/error",
}
COMMAND = "echo escalated-ok > /srv/outside.txt && cat /srv/outside.txt"


def test_every_captured_frame_parses_or_is_a_push() -> None:
    lines = captured_lines()
    assert len(lines) > 1000
    kinds: dict[str, int] = {}
    for name, number, record in lines:
        if "frame" not in record:
            assert record["downlink"] in ("connected", "closed", "error"), (name, number)
            continue
        text = json.dumps(record["frame"])
        frame = parse_frame(text)
        payload = frame.payload
        expected = {
            "question/requested": QuestionRequested,
            "question/resolved": QuestionResolved,
            "approval/requested": ApprovalRequested,
            "approval/resolved": ApprovalResolved,
        }.get(frame.method, OtherPayload)
        assert isinstance(payload, expected), (name, number, frame.method)
        if expected is OtherPayload:
            assert frame.method in PUSHES, (name, number, frame.method)
        kinds[frame.method] = kinds.get(frame.method, 0) + 1
    assert kinds["question/requested"] >= 17 and kinds["approval/requested"] == 3
    assert kinds["approval/resolved"] == 3 and kinds["session/subscribed"] >= 18


def test_captured_session_ids_are_session_dash_uuid() -> None:
    ids = {
        frame["payload"]["sessionId"]
        for name in ("questions.jsonl", "approvals.jsonl", "reconnect.jsonl")
        for frame in captured_frames(name)
        if "sessionId" in frame["payload"]
    }
    assert ids and all(sid.startswith("session-") and len(sid) == 44 for sid in ids)


def test_each_captured_approval_pairs_with_the_latest_tool_call_before_it() -> None:
    log = SessionLog()
    paired = []
    for frame in captured_frames("approvals.jsonl"):
        parsed = parse_frame(json.dumps(frame))
        if parsed.method == "session/event":
            event = session_event(frame["payload"])
            assert event is not None
            log.observe(event)
        elif isinstance(parsed.payload, ApprovalRequested):
            sid, aid = parsed.payload.session_id, parsed.payload.approval_id
            assert log.knows(sid, aid)
            call = log.call_for(sid, aid)
            assert call is not None and call.name == parsed.payload.tool_name
            paired.append((call.command, call.description))
    assert paired == [(COMMAND, "Write a file outside the workspace")] * 3


def test_a_captured_reconnect_sends_subscriptions_first_then_the_replay() -> None:
    frames = captured_frames("reconnect.jsonl")
    methods = [frame["method"] for frame in frames]
    first_request = methods.index("question/requested")
    assert first_request > 0
    assert set(methods[:first_request]) == {"session/subscribed"}


# --------------------------------------------------------------------------- the stand-in


@pytest.fixture
async def host() -> AsyncIterator[DshHostStandIn]:
    """A running stand-in."""
    async with DshHostStandIn() as stand_in:
        yield stand_in


def _shape(frame: dict[str, Any]) -> tuple[str, str | None, tuple[str, ...]]:
    """A frame's method, event type and the keys that matter (payload or event data)."""
    payload = frame["payload"]
    if frame["method"] == "session/event":
        event = payload["event"]
        return ("session/event", event["type"], tuple(sorted(event["data"])))
    return (frame["method"], None, tuple(sorted(payload)))


RELEVANT_EVENTS = {"tool/call", "approval/asked", "approval/decided", "tool/result"}


def _approval_shapes(frames: list[dict[str, Any]]) -> list[tuple[str, str | None, tuple[str, ...]]]:
    shapes = []
    for frame in frames:
        shape = _shape(frame)
        if shape[0].startswith("approval/") or shape[1] in RELEVANT_EVENTS:
            shapes.append(shape)
    return shapes


async def test_the_stand_ins_approvals_look_like_the_captured_ones(
    host: DshHostStandIn,
) -> None:
    captured = _approval_shapes(captured_frames("approvals.jsonl"))
    sid = new_session_id()
    arguments = {
        "command": COMMAND,
        "description": "Write a file outside the workspace",
        "sandbox_permissions": "danger-full-access",
        "justification": "The user asked for a file under /srv, which is outside the workspace.",
    }
    for outcome in ("allowed-once", "rejected", "cancelled"):
        rpc_id, _, _ = host.request_approval(sid, "bash", arguments)
        if outcome == "cancelled":
            assert host.cancel_turn(sid) == 1
        else:
            assert host.approve_elsewhere(rpc_id, outcome)
    ours = _approval_shapes(host.frames)
    assert ours == captured
    for frame, theirs in zip(
        (f for f in host.frames if f["method"] == "approval/resolved"),
        (f for f in captured_frames("approvals.jsonl") if f["method"] == "approval/resolved"),
        strict=True,
    ):
        assert frame["payload"]["outcome"] == theirs["payload"]["outcome"]


async def test_a_new_downlink_gets_what_the_captured_reconnect_got(
    host: DshHostStandIn,
) -> None:
    question = AskUserQuestionItem.model_validate(
        {"id": "color", "question": "Which color?", "options": [{"label": "Blue"}]}
    )
    idle = new_session_id()
    host.attach(idle)
    asking = new_session_id()
    rpc_id, _ = host.ask(asking, [question])
    async with aiohttp.ClientSession() as http, http.ws_connect(host.ws_url) as ws:
        received: list[ServerRequest] = []
        for _ in range(3):
            message = await asyncio.wait_for(ws.receive(), 5)
            received.append(parse_frame(message.data))
    theirs = [f["method"] for f in captured_frames("reconnect.jsonl")]
    ours = [frame.method for frame in received]
    # The same order: a session/subscribed per attached session, then the replayed request.
    assert ours == ["session/subscribed", "session/subscribed", "question/requested"]
    assert theirs[-1] == "question/requested" and set(theirs[:-1]) == {"session/subscribed"}
    assert received[2].rpc_id == rpc_id
    subscribed = [frame.payload for frame in received[:2]]
    assert all(isinstance(p, OtherPayload) for p in subscribed)
    assert [(p.model_extra or {})["sessionId"] for p in subscribed] == [idle, asking]
    captured_keys = set(captured_frames("reconnect.jsonl")[0]["payload"])
    assert all(set(p.model_extra or {}) == captured_keys for p in subscribed)
