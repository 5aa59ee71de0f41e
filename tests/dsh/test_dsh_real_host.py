"""The real dsh host fixture itself: ``dsh web`` 0.2 with the scripted model, and the driver.

Each case is one the bot's client relies on, seen on the real host: a question and an
approval reach an answering client as waterfall frames; its answer is what the session log's
``tool/result`` shows; ``session/cancel`` sends ``cancel`` and aborts the tool; a restart
keeps the session (same ``DSH_HOME``) under a new launch token; a reconnect replays a
pending request with the same ``eventId`` under a new ``clientId``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.dsh_driver import HostDriver, RpcError
from tests.dsh_model import ScriptedModel, ask, bash, exit_plan, say
from tests.dsh_model import call_id as first_call
from tests.dsh_real import RealHost, live_host, real_host, started_host

__all__ = ["live_host", "real_host"]  # the fixtures

pytestmark = pytest.mark.slow  # the real host starts once per module (~8 s)

COLOR = {
    "id": "color",
    "question": "Which color do you prefer?",
    "header": "Pick one",
    "options": [{"label": "Blue", "description": "A cool hue."}, {"label": "Green"}],
}


ANSWERS = {"answers": [{"id": "color", "selected": ["Green"]}]}


async def test_a_question_reaches_an_answering_client_and_its_answer_the_model(
    live_host: RealHost,
) -> None:
    async with HostDriver(live_host) as driver:
        sid, call, frame = await driver.ask_turn(ask(COLOR))
        assert frame["event"] == "user-questions/request"
        assert frame["request"] == {"questions": [COLOR]}
        logged = await driver.log_event(sid, "tool/call", lambda d: d["callId"] == call)
        assert logged["name"] == "ask_user_question"
        assert await driver.answer(frame["eventId"], {"kind": "result", "value": ANSWERS}) is None
        result = await driver.tool_result(sid, call)
        assert (json.loads(result["text"]), result["isError"]) == (ANSWERS, False)
        said = await driver.log_event(sid, "assistant/message", lambda d: d["step"] == 2)
        assert said["message"]["content"][0]["text"] == f"DONE {result['text']}"


async def test_an_approval_carries_the_call_id_the_log_pairs_with_its_command(
    live_host: RealHost,
) -> None:
    async with HostDriver(live_host) as driver:
        sid, call, frame = await driver.ask_turn(bash("cat /etc/hostname"))
        assert frame["event"] == "approval/request" and frame["request"]["callId"] == call
        logged = await driver.log_event(sid, "tool/call", lambda d: d["callId"] == call)
        assert json.loads(logged["arguments"])["command"] == "cat /etc/hostname"
        asked = await driver.log_event(sid, "approval/asked", lambda d: d["callId"] == call)
        assert asked["toolName"] == "bash" and "approvalId" not in frame["request"]
        await driver.answer(frame["eventId"], {"kind": "result", "value": "rejected"})
        decided = await driver.log_event(sid, "approval/decided", lambda d: d["id"] == asked["id"])
        assert decided["outcome"] == "rejected"
        result = await driver.tool_result(sid, call)
        assert result["isError"] is True and "denied" in result["text"]


async def test_a_plan_review_is_a_question_whose_intent_names_the_call(
    live_host: RealHost,
) -> None:
    async with HostDriver(live_host) as driver:
        sid, call, frame = await driver.ask_turn(
            exit_plan("# Add a flag\n\n- Parse it."), plan=True
        )
        (question,) = frame["request"]["questions"]
        assert question["detail"] == "# Add a flag\n\n- Parse it."
        assert question["intent"] == {"kind": "plan-review", "approve": "Approve", "callId": call}
        answers = {"answers": [{"id": "plan-review", "selected": ["Approve"]}]}
        await driver.answer(frame["eventId"], {"kind": "result", "value": answers})
        assert await driver.log_event(sid, "plan/mode", lambda d: not d["active"])


async def test_session_cancel_sends_cancel_and_aborts_the_question(live_host: RealHost) -> None:
    async with HostDriver(live_host) as driver:
        sid, call, frame = await driver.ask_turn(ask(COLOR))
        await driver.cancel(sid)
        cancel = await driver.streams["$events"].wait_for(lambda i: i.get("type") == "cancel")
        assert cancel == {"type": "cancel", "eventId": frame["eventId"]}
        result = await driver.tool_result(sid, call)
        assert result["error"] == {"name": "UserQuestionError", "code": "ASK_ABORTED"}


async def test_a_reconnect_replays_the_pending_request_under_a_new_client_id(
    live_host: RealHost,
) -> None:
    async with HostDriver(live_host) as driver, HostDriver(live_host) as other:
        sid, call, first = await driver.ask_turn(ask(COLOR))
        old_client = driver.client_id
        await driver.disconnect()
        await driver.listen()
        assert await driver.waterfall(sid) == first and driver.client_id != old_client
        # Another answering client holds the same event; the first answer wins.
        await other.listen()
        assert (await other.waterfall(sid))["eventId"] == first["eventId"]
        await other.answer(first["eventId"], {"kind": "result", "value": ANSWERS})
        cancel = await driver.streams["$events"].wait_for(lambda i: i.get("type") == "cancel")
        assert cancel["eventId"] == first["eventId"]
        assert json.loads((await driver.tool_result(sid, call))["text"]) == ANSWERS


@pytest.mark.slow
async def test_a_restart_keeps_the_session_and_the_browser_cookie_not_the_token(
    live_host: RealHost,
) -> None:
    async with HostDriver(live_host) as driver:
        sid = await driver.create_session()
        tag = live_host.model.script(say("hello"))
        await driver.prompt(sid, f"greet {tag}")
        said = await driver.log_event(sid, "turn/end")
        assert said["reason"] == {"kind": "completed"}
        old_token, url = live_host.token, live_host.url
        await asyncio.to_thread(live_host.restart)
        assert live_host.url == url and live_host.token != old_token
        # The browser cookie (``/?token=``) outlives the restart; the old launch token does not.
        kinds = [e["type"] for e in await driver.page(sid)]
        assert "turn/end" in kinds and "assistant/message" in kinds
        assert await driver.connect_as_operator(old_token) == 401
        assert await driver.connect_as_operator(live_host.token) == 302


async def test_a_frozen_host_answers_nothing_until_it_is_thawed(live_host: RealHost) -> None:
    async with HostDriver(live_host) as driver:
        live_host.freeze()
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1):
                    await driver.create_session()
        finally:
            live_host.thaw()
        assert (await driver.create_session()).startswith("session-")


async def test_without_a_cookie_the_host_refuses_rpcs(live_host: RealHost) -> None:
    driver = HostDriver(live_host)
    try:
        with pytest.raises(RpcError, match="HTTP 401"):
            await driver.create_session()
    finally:
        await driver.close()


def test_the_model_answers_each_step_once_then_done() -> None:
    model = ScriptedModel()
    tag = model.script(ask(COLOR), bash("ls"))
    prompt = {"role": "user", "content": [{"type": "text", "text": f"go {tag}"}]}
    system = {"role": "system", "content": "You are an agent."}
    call_id, step = model.next_step([system, prompt])
    assert (call_id, step.tool) == (first_call(tag), "ask_user_question")
    used = {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "content": "answered"}]}
    assert model.next_step([prompt, used, result, system])[1].tool == "bash"
    assert model.next_step([prompt, used, result, used, result])[1].text == "DONE answered"
    assert model.next_step([system])[1].text == "OK"


def test_without_dsh_it_skips_but_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("tests.dsh_real.dsh_command", lambda: None)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="dsh is not installed"), started_host(tmp_path):
        pass
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"), started_host(tmp_path):
        pass
    assert os.environ["CI"] == "true"
