"""Tool approvals of the real dsh host, decided in Slack, end to end.

The scripted model runs ``bash`` asking for ``danger-full-access``; the real host asks for an
approval; the message must show the command (read from the session log's ``tool/call``,
paired by ``callId``), and the decision must reach the tool (the log's ``approval/decided``
and ``tool/result``).
"""

from __future__ import annotations

import pytest

from tests.dsh.test_dsh_client import shown
from tests.dsh_model import bash
from tests.dsh_real import live_host, real_host
from tests.dsh_real_rig import RealRig, RealRigFactory, make_real_rig

__all__ = ["live_host", "make_real_rig", "real_host"]  # the fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

COMMAND = "echo escalated-ok"


@pytest.fixture
async def rig(make_real_rig: RealRigFactory) -> RealRig:
    return await make_real_rig()


async def decision(rig: RealRig, sid: str, call: str) -> str:
    """The outcome the host logged for the approval of ``call``."""
    asked = await rig.driver.log_event(sid, "approval/asked", lambda d: d["callId"] == call)
    decided = await rig.driver.log_event(sid, "approval/decided", lambda d: d["id"] == asked["id"])
    return str(decided["outcome"])


async def test_an_approval_allowed_once_runs_the_command_it_showed(rig: RealRig) -> None:
    sid, call = await rig.turn(bash(COMMAND))
    message = await rig.message()
    assert COMMAND in shown(message.blocks)
    await rig.click(message, "Allow once")
    assert await decision(rig, sid, call) == "allowed-once"
    result = await rig.driver.tool_result(sid, call)
    assert (result["text"], result["isError"]) == ("escalated-ok\n", False)
    final = await rig.final(message)
    assert f"Allowed once by <@{rig.alice}>" in final and "not used" not in final
    assert rig.posts == 1


async def test_an_approval_rejected_stops_the_command(rig: RealRig) -> None:
    sid, call = await rig.turn(bash(COMMAND))
    message = await rig.message()
    await rig.click(message, "Reject")
    assert await decision(rig, sid, call) == "rejected"
    result = await rig.driver.tool_result(sid, call)
    assert result["isError"] is True and "escalated-ok" not in result["text"]
    final = await rig.final(message)
    assert f"Rejected by <@{rig.alice}>" in final and "not used" not in final


async def test_an_approval_withdrawn_by_session_cancel_closes_the_message(rig: RealRig) -> None:
    sid, call = await rig.turn(bash(COMMAND))
    message = await rig.message()
    await rig.driver.cancel(sid)
    result = await rig.driver.tool_result(sid, call)
    assert result["isError"] is True
    final = await rig.final(message)
    assert "Cancelled" in final and "Allowed" not in final and "Rejected by" not in final


async def test_an_approval_decided_in_another_client(rig: RealRig) -> None:
    await rig.driver.listen()
    sid, call = await rig.turn(bash(COMMAND))
    message = await rig.message()
    frame = await rig.driver.waterfall(sid)
    await rig.driver.answer(frame["eventId"], {"kind": "result", "value": "allowed-once"})
    assert await decision(rig, sid, call) == "allowed-once"
    final = await rig.final(message)
    assert "Allowed" in final and "another client" in final and f"<@{rig.alice}>" not in final
