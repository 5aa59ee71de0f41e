"""Pairing approvals with the calls they are for, history shapes, nesting limits: pure units."""

from __future__ import annotations

import json

import pytest

from adapters.dsh.protocol import parse_frame
from adapters.dsh.session_log import (
    SessionEvent,
    SessionLog,
    history_events,
    pair_from_history,
    tool_call_of,
)
from adapters.dsh.wire import MAX_DEPTH, depth_problem

SID = "session-3f2a9c1e-5d7b-4e1a-9c2f-0b6d8e4a1c3f"


def call(seq: int, call_id: str, command: str, name: str = "bash") -> SessionEvent:
    """A tool/call event."""
    data = {"callId": call_id, "name": name, "arguments": json.dumps({"command": command})}
    return SessionEvent(SID, "tool/call", seq, data)


def asked(seq: int, approval_id: str, call_id: str) -> SessionEvent:
    """An approval/asked event."""
    return SessionEvent(SID, "approval/asked", seq, {"id": approval_id, "callId": call_id})


def test_an_approval_pairs_with_the_latest_call_of_its_call_id_before_it() -> None:
    events = [
        call(1, "mock-call-1", "first"),
        asked(2, "a1", "mock-call-1"),
        call(3, "mock-call-1", "second"),  # callIds repeat across turns
        asked(4, "a2", "mock-call-1"),
        call(5, "mock-call-1", "third"),  # after a2's ask: not a2's
    ]
    log = SessionLog()
    for event in events:
        log.observe(event)
    assert [log.call_for(SID, a).command for a in ("a1", "a2")] == ["first", "second"]  # type: ignore[union-attr]
    assert pair_from_history(events, "a2") == log.call_for(SID, "a2")
    assert pair_from_history(events, "unknown") is None
    assert not log.knows(SID, "unknown")


def test_the_log_forgets_the_oldest_past_its_size() -> None:
    log = SessionLog(remembered=2)
    for n in range(3):
        log.observe(call(2 * n, f"c{n}", f"cmd {n}"))
        log.observe(asked(2 * n + 1, f"a{n}", f"c{n}"))
    assert not log.knows(SID, "a0") and log.knows(SID, "a1") and log.knows(SID, "a2")
    log.forget(SID, "a2")
    assert not log.knows(SID, "a2")


@pytest.mark.parametrize(
    "arguments, command, path",
    [
        ({"command": "ls /srv"}, "ls /srv", None),
        ({"path": "/srv/a.txt", "content": "x"}, None, "/srv/a.txt"),
        ({"file_path": "/srv/b.txt"}, None, "/srv/b.txt"),
        ({"command": "  "}, None, None),
    ],
)
def test_what_a_call_will_do(
    arguments: dict[str, str], command: str | None, path: str | None
) -> None:
    found = tool_call_of({"callId": "c", "name": "t", "arguments": json.dumps(arguments)})
    assert found is not None and (found.command, found.path) == (command, path)


@pytest.mark.parametrize("arguments", ["not json", "[1, 2]", "[" * 5000 + "]" * 5000, 7])
def test_arguments_that_are_no_object_give_no_command(arguments: object) -> None:
    found = tool_call_of({"callId": "c", "name": "bash", "arguments": arguments})
    assert found is not None and found.command is None and found.path is None
    assert tool_call_of({"name": "bash"}) is None


@pytest.mark.parametrize(
    "body",
    [
        {"events": [{"event": {"type": "tool/call", "seq": 0, "data": {"callId": "c"}}}]},
        [{"event": {"type": "tool/call", "seq": 0, "data": {"callId": "c"}}}],
        {"items": [{"type": "tool/call", "seq": 0, "data": {"callId": "c"}}]},
    ],
)
def test_history_shapes(body: object) -> None:
    (event,) = history_events(SID, body)
    assert (event.session_id, event.kind, event.seq, dict(event.data)) == (
        SID,
        "tool/call",
        0,
        {"callId": "c"},
    )


@pytest.mark.parametrize("body", [None, "text", {"events": "no"}, [1, "x", {"event": 3}]])
def test_history_of_unknown_shapes_is_empty(body: object) -> None:
    assert history_events(SID, body) == []


def test_depth_is_checked_without_recursion() -> None:
    nested: object = 1
    for _ in range(MAX_DEPTH):
        nested = [nested]
    assert depth_problem(nested) is None
    assert depth_problem([nested]) == f"nested more than {MAX_DEPTH} levels deep"
    with pytest.raises(ValueError, match="nested"):
        parse_frame(
            json.dumps(
                {
                    "type": "server-request",
                    "rpcId": "r",
                    "method": "x",
                    "payload": {"deep": [nested]},
                }
            )
        )
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_frame("[" * 100_000 + "]" * 100_000)
