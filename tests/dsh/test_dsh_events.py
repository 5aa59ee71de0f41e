"""What a session's log gives: the call an approval is for, outcomes, nesting limits: units."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.dsh.mux import MAX_DEPTH, ApprovalRequested, Waterfall, load_json, parse_mux
from adapters.dsh.session_log import SessionLog, tool_call_of

SID = "session-3f2a9c1e-5d7b-4e1a-9c2f-0b6d8e4a1c3f"


def call(call_id: str, command: str, name: str = "bash") -> dict[str, Any]:
    """A tool/call event."""
    data = {"callId": call_id, "name": name, "arguments": json.dumps({"command": command})}
    return {"type": "tool/call", "seq": 0, "data": data}


def approval(event_id: str, call_id: str) -> Waterfall:
    """An approval request for the call ``call_id``."""
    asked = ApprovalRequested(tool_name="bash", call_id=call_id)
    return Waterfall(event_id, SID, approval=asked, call_id=call_id)


def test_an_approval_pairs_with_the_latest_call_of_its_call_id() -> None:
    log = SessionLog()
    log.observe(SID, call("mock-call-1", "first"))
    assert log.call(SID, "mock-call-1") == tool_call_of(call("mock-call-1", "first")["data"])
    log.observe(SID, call("mock-call-1", "second"))  # callIds repeat across turns
    assert log.call(SID, "mock-call-1").command == "second"  # type: ignore[union-attr]
    assert log.call("another-session", "mock-call-1") is None
    log.unreadable(SID, "mock-call-1")  # a newer call too big to read: none stands in
    assert log.call(SID, "mock-call-1") is None


def test_an_approvals_outcome_is_its_decision_of_its_call() -> None:
    log = SessionLog()
    log.observe(SID, call("c1", "ls"))
    log.asked(approval("e1", "c1"))
    assert log.outcome("e1") is None
    log.observe(SID, {"type": "approval/asked", "data": {"id": "a1", "callId": "c1"}})
    log.observe(SID, {"type": "approval/decided", "data": {"id": "a1", "outcome": "rejected"}})
    assert log.outcome("e1") == "rejected"
    assert log.verdict("e1", {"kind": "result", "value": "rejected"}) is True
    assert log.verdict("e1", {"kind": "result", "value": "allowed-once"}) is False
    log.observe(SID, call("c1", "ls again"))  # the next turn's call of the same id
    assert log.outcome("e1") is None


def test_the_log_forgets_the_oldest_past_its_size() -> None:
    log = SessionLog(remembered=2)
    for n in range(3):
        log.observe(SID, call(f"c{n}", f"cmd {n}"))
    assert log.call(SID, "c0") is None
    assert [log.call(SID, f"c{n}").command for n in (1, 2)] == ["cmd 1", "cmd 2"]  # type: ignore[union-attr]


def test_a_snapshot_gives_its_records_and_says_so() -> None:
    log = SessionLog()
    snapshot = {"type": "snapshot", "records": [{"type": "event", "event": call("c", "ls")}, 3]}
    assert log.item(SID, snapshot) is True
    assert log.item(SID, {"type": "event", "event": call("d", "pwd")}) is False
    assert log.item(SID, "no") is False
    assert [log.call(SID, c).command for c in "cd"] == ["ls", "pwd"]  # type: ignore[union-attr]


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


def test_depth_is_checked_without_deep_recursion() -> None:
    nested: object = 1
    for _ in range(MAX_DEPTH):
        nested = [nested]
    assert load_json(json.dumps(nested), "frame") == nested
    with pytest.raises(ValueError, match=f"^frame is nested more than {MAX_DEPTH} levels deep$"):
        load_json(json.dumps([nested]), "frame")
    with pytest.raises(ValueError, match=f"^frame is nested more than {MAX_DEPTH} levels deep$"):
        load_json("[" * 500 + "]" * 500, "frame")  # decodes, and is refused without recursing
    with pytest.raises(ValueError, match="nested"):
        parse_mux(json.dumps({"type": "item", "streamId": "ev", "value": {"deep": [nested]}}))
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_mux("[" * 100_000 + "]" * 100_000)
