"""Questions and plan reviews of the real dsh host, answered in Slack, end to end.

The real ``dsh web`` (0.2, the scripted model asking), the bot's dsh client, the Slack
provider, a real bolt app and the Slack stand-in. What the agent got is read where the host
records it: the session log's ``tool/result`` (the host sends no receipts).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.dsh.test_dsh_client import eventually, shown
from tests.dsh_model import ask, exit_plan
from tests.dsh_real import live_host, real_host
from tests.dsh_real_rig import RealRig, RealRigFactory, make_real_rig
from tests.slack.render.test_review_wording import diff_rows

__all__ = ["live_host", "make_real_rig", "real_host"]  # the fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

TARGET = {
    "id": "target",
    "question": "Which one ships first?",
    "options": [{"label": "Code"}, {"label": "Docs"}],
}
TARGETS = {
    "id": "targets",
    "question": "Which targets?",
    "multi_select": True,
    "options": [{"label": "Code"}, {"label": "Docs"}, {"label": "Tests"}],
}
PLAN = "# Plan\n\n1. Add the column.\n2. Backfill it.\n3. Ship."
REVISED = "# Plan\n\n1. Add the column.\n2. Backfill it in batches.\n3. Ship."


@pytest.fixture
async def rig(make_real_rig: RealRigFactory) -> RealRig:
    return await make_real_rig()


async def answers(rig: RealRig, sid: str, call: str) -> Any:
    """What the agent's tool returned, as JSON (the log's ``tool/result``)."""
    result = await rig.driver.tool_result(sid, call)
    assert result["isError"] is False, result
    return json.loads(result["text"])


async def test_a_single_select_question(rig: RealRig) -> None:
    sid, call = await rig.turn(ask(TARGET))
    message = await rig.message()
    assert "Which one ships first?" in shown(message.blocks)
    await rig.click(message, "Docs")
    assert await answers(rig, sid, call) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
    assert "Docs" in await rig.final(message)
    assert rig.posts == 1


async def test_a_multi_select_question_with_other(rig: RealRig) -> None:
    sid, call = await rig.turn(ask(TARGETS))
    message = await rig.message()
    await rig.click(message, "Other…")
    await rig.submit_modal("Release notes")
    await eventually(lambda: not rig.slack.workspace.stacks.get(rig.alice), "the modal to close")
    await rig.click(message, "Submit", values={"aq1.draft": ["0", "2"]})
    expected = {"id": "targets", "selected": ["Code", "Tests"], "custom": "Release notes"}
    assert await answers(rig, sid, call) == {"answers": [expected]}
    assert "Release notes" in await rig.final(message)


async def test_a_batch_of_two_questions_in_one_form(rig: RealRig) -> None:
    sid, call = await rig.turn(ask(TARGET, TARGETS))
    message = await rig.message()
    blocks = {
        b["block_id"].rsplit(":", 2)[-2]: b["block_id"]
        for b in message.blocks
        if "c0" in b.get("block_id", "")
    }
    values = {(blocks["0"], "aq1.draft"): "1", (blocks["1"], "aq1.draft"): ["1"]}
    await rig.click(message, "Submit", values=values)
    assert await answers(rig, sid, call) == {
        "answers": [
            {"id": "target", "selected": ["Docs"]},
            {"id": "targets", "selected": ["Docs"]},
        ]
    }
    await rig.final(message)
    assert rig.posts == 1


async def test_dismiss_cancels_the_question_in_the_host(rig: RealRig) -> None:
    sid, call = await rig.turn(ask(TARGET))
    message = await rig.message()
    await rig.click(message, "Dismiss")
    result = await rig.driver.tool_result(sid, call)
    assert result["error"] == {"name": "UserQuestionError", "code": "ASK_CANCELLED"}
    await rig.final(message)


async def test_an_aborted_turn_closes_the_question(rig: RealRig) -> None:
    sid, call = await rig.turn(ask(TARGET))
    message = await rig.message()
    await rig.driver.cancel(sid)
    result = await rig.driver.tool_result(sid, call)
    assert result["error"] == {"name": "UserQuestionError", "code": "ASK_ABORTED"}
    assert "Cancelled in the harness" in await rig.final(message)


async def test_a_question_answered_in_another_client_closes_in_slack(rig: RealRig) -> None:
    await rig.driver.listen()  # the other client: the host's own web page, say
    sid, call = await rig.turn(ask(TARGET))
    message = await rig.message()
    frame = await rig.driver.waterfall(sid)
    value = {"answers": [{"id": "target", "selected": ["Code"]}]}
    await rig.driver.answer(frame["eventId"], {"kind": "result", "value": value})
    assert "Answered in another client" in await rig.final(message)
    assert await answers(rig, sid, call) == value


async def test_a_plan_approved(rig: RealRig) -> None:
    sid, call = await rig.turn(exit_plan(PLAN), plan=True)
    message = await rig.message()
    assert "Backfill it." in shown(message.blocks)
    await rig.click(message, "Approve")
    result = await rig.driver.tool_result(sid, call)
    assert result["isError"] is False and result["text"].startswith("Plan approved")
    assert await rig.driver.log_event(sid, "plan/mode", lambda d: not d["active"])
    assert "Approved by" in await rig.final(message)


async def test_a_plan_declined_with_feedback_then_revised_and_approved(rig: RealRig) -> None:
    sid, call = await rig.turn(exit_plan(PLAN), exit_plan(REVISED), plan=True)
    message = await rig.message()
    await rig.click(message, "Decline with feedback…")
    await rig.submit_modal("Backfill in batches.")
    declined = await rig.driver.tool_result(sid, call)
    assert "Backfill in batches." in declined["text"]
    assert "Backfill in batches." in await rig.final(message)
    again = await rig.message(2)
    text = shown(again.blocks)
    assert "Revises" in text and "+ 2. Backfill it in batches." in diff_rows(again.blocks)
    await rig.click(again, "Approve")
    second = await rig.driver.tool_result(sid, call[:-1] + "1")
    assert second["text"].startswith("Plan approved")
    assert rig.posts == 2
