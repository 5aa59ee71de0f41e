"""The dsh host stand-in speaks the real host's protocol, seen through a real aiohttp client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from adapters.dsh.protocol import (
    EVENTS_MUX_PATH,
    RESPOND_PATH,
    ApprovalRequested,
    ApprovalResolved,
    OtherPayload,
    QuestionRequested,
    QuestionResolved,
    ServerRequest,
    answer_response,
    approval_response,
    cancel_response,
    parse_frame,
)
from bot.questions.errors import ASK_ABORTED, ASK_CANCELLED, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from tests.dsh_host import DshHostStandIn, new_session_id

TARGETS = AskUserQuestionItem.model_validate(
    {
        "id": "targets",
        "question": "What should the release cover?",
        "options": [{"label": "Code"}, {"label": "Docs"}],
        "multiSelect": True,
    }
)
TARGET = AskUserQuestionItem.model_validate(
    {"id": "target", "question": "Which one?", "options": [{"label": "Code"}, {"label": "Docs"}]}
)


def answer(*wire: dict[str, Any]) -> AskUserQuestionAnswer:
    """An answer batch from wire JSON."""
    return AskUserQuestionAnswer.model_validate({"answers": list(wire)})


@pytest.fixture
async def host() -> AsyncIterator[DshHostStandIn]:
    """A running stand-in, stopped after the test."""
    stand_in = DshHostStandIn()
    await stand_in.start()
    yield stand_in
    await stand_in.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session."""
    async with aiohttp.ClientSession() as session:
        yield session


SETUP_EVENTS = {"permission/preset", "sandbox/mode", "approval/policy"}


async def receive(ws: aiohttp.ClientWebSocketResponse) -> ServerRequest:
    """The next downlink frame, parsed, past subscriptions, queue baselines and set-up events."""
    while True:
        message = await asyncio.wait_for(ws.receive(), timeout=5)
        assert message.type is aiohttp.WSMsgType.TEXT, message
        frame = parse_frame(message.data)
        if frame.method in ("session/subscribed", "session/queue"):
            continue
        extra = frame.payload.model_extra if isinstance(frame.payload, OtherPayload) else None
        if extra and extra.get("event", {}).get("type") in SETUP_EVENTS:
            continue
        return frame


async def receive_question_frame(ws: aiohttp.ClientWebSocketResponse) -> ServerRequest:
    """The next question/requested or question/resolved frame, skipping the others."""
    while isinstance((frame := await receive(ws)).payload, OtherPayload):
        pass
    return frame


async def post(
    http: aiohttp.ClientSession, host: DshHostStandIn, body: Any, **kwargs: Any
) -> dict[str, Any]:
    """POST a client response; the receipt (always HTTP 200)."""
    async with http.post(host.base_url + RESPOND_PATH, json=body, **kwargs) as response:
        assert response.status == 200
        receipt: dict[str, Any] = await response.json()
        return receipt


async def test_a_plain_get_of_the_downlink_is_426(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    async with http.get(host.base_url + EVENTS_MUX_PATH) as response:
        assert response.status == 426
        assert response.headers["Upgrade"] == "websocket"
    assert host.connections == 0


async def test_an_ask_arrives_between_the_real_hosts_session_events(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    async with http.ws_connect(host.ws_url) as ws:
        await host.wait_for_connections(1)
        rpc_id, future = host.ask("sid", [TARGETS])
        call = await receive(ws)
        assert call.method == "session/event"
        assert isinstance(call.payload, OtherPayload)
        assert call.payload.model_extra is not None
        assert call.payload.model_extra["event"]["type"] == "tool/call"

        requested = await receive(ws)
        assert requested.rpc_id == rpc_id
        assert isinstance(requested.payload, QuestionRequested)
        assert requested.payload.session_id == "sid"
        assert requested.payload.questions == [TARGETS]
        assert requested.to_wire()["payload"]["questions"] == [TARGETS.to_wire()]

        batch = answer({"id": "targets", "selected": ["Code", "Docs"], "custom": "Release notes"})
        assert await post(http, host, answer_response(rpc_id, "sid", batch)) == {"accepted": True}
        assert (await asyncio.wait_for(future, 5)).to_wire() == batch.to_wire()
        assert host.responses == [answer_response(rpc_id, "sid", batch)]

        resolved = await receive(ws)
        assert isinstance(resolved.payload, QuestionResolved)
        assert resolved.rpc_id not in (rpc_id, call.rpc_id)  # a fresh rpcId
        assert resolved.payload.question_rpc_id == rpc_id
        assert resolved.payload.outcome == "answered"
        assert resolved.payload.session_id == "sid"

        result = await receive(ws)
        assert isinstance(result.payload, OtherPayload)
        assert result.payload.model_extra is not None
        assert result.payload.model_extra["event"]["type"] == "tool/result"
        assert not host.is_pending(rpc_id)


async def test_a_repeated_answer_is_not_pending(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    body = answer_response(rpc_id, "sid", answer({"id": "target", "selected": ["Docs"]}))
    assert await post(http, host, body) == {"accepted": True}
    assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}
    assert (await future).to_wire() == {"answers": [{"id": "target", "selected": ["Docs"]}]}
    unknown = answer_response("no-such-rpc", "sid", answer({"id": "target", "selected": []}))
    assert await post(http, host, unknown) == {"accepted": False, "reason": "not-pending"}


@pytest.mark.parametrize(
    "bad",
    [
        {
            "answers": [{"id": "target", "selected": ["Code"], "custom": "also this"}]
        },  # single-select
        {"answers": [{"id": "target", "selected": ["Code", "Docs"]}]},
        {"answers": [{"id": "target", "selected": ["Tests"]}]},
        {"answers": [{"id": "target", "selected": [], "custom": "  "}]},
        {"answers": [{"id": "other", "selected": []}]},
        {"answers": []},
    ],
)
async def test_a_bad_answer_is_refused_and_stays_pending(
    host: DshHostStandIn, http: aiohttp.ClientSession, bad: dict[str, Any]
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    assert await post(http, host, answer_response(rpc_id, "sid", answer(*bad["answers"]))) == {
        "accepted": False,
        "reason": "bad-response",
    }
    assert host.is_pending(rpc_id) and not future.done()
    # The client may retry with a good answer: single-select custom goes with selected [].
    good = answer({"id": "target", "selected": [], "custom": "also this"})
    assert await post(http, host, answer_response(rpc_id, "sid", good)) == {"accepted": True}
    assert (await future).to_wire() == good.to_wire()


@pytest.mark.parametrize(
    "result",
    [
        {
            "ok": True,
            "value": {
                "sessionId": "other-session",
                "answer": {"answers": [{"id": "target", "selected": []}]},
            },
        },
        {
            "ok": True,
            "value": {
                "sessionId": "sid",
                "answer": {"answers": [{"id": "target", "selected": [], "custom": None}]},
            },
        },
        {"ok": True, "value": {"sessionId": "sid"}},
        {"ok": True, "value": "yes"},
        {"ok": False, "error": {"code": "boom", "message": "something else", "details": {}}},
        {"ok": "yes"},
    ],
)
async def test_malformed_or_foreign_responses_are_bad_responses(
    host: DshHostStandIn, http: aiohttp.ClientSession, result: dict[str, Any]
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    body = {"type": "client-response", "rpcId": rpc_id, "result": result}
    assert await post(http, host, body) == {"accepted": False, "reason": "bad-response"}
    assert host.is_pending(rpc_id) and not future.done()
    assert host.responses == [body]


async def test_a_body_that_is_no_client_response_is_a_bad_response(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    bodies: list[Any] = [
        [],
        {"rpcId": "x"},
        {"type": "client-response", "rpcId": 3, "result": {"ok": True, "value": 1}},
    ]
    for body in bodies:
        assert await post(http, host, body) == {"accepted": False, "reason": "bad-response"}


async def test_a_cancelled_response_dismisses_the_ask(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    async with http.ws_connect(host.ws_url) as ws:
        await host.wait_for_connections(1)
        rpc_id, future = host.ask("sid", [TARGET])
        assert (await receive_question_frame(ws)).rpc_id == rpc_id
        assert await post(http, host, cancel_response(rpc_id)) == {"accepted": True}
        with pytest.raises(UserQuestionError) as info:
            await future
        assert info.value.code == ASK_CANCELLED
        assert info.value.message == "the user cancelled ask_user_question"
        resolved = await receive_question_frame(ws)
        assert isinstance(resolved.payload, QuestionResolved)
        assert (resolved.payload.question_rpc_id, resolved.payload.outcome) == (rpc_id, "cancelled")
    assert await post(http, host, cancel_response(rpc_id)) == {
        "accepted": False,
        "reason": "not-pending",
    }
    assert host.responses == [cancel_response(rpc_id), cancel_response(rpc_id)]


async def test_abort_and_resolve_elsewhere_broadcast_resolved(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    async with http.ws_connect(host.ws_url) as ws:
        await host.wait_for_connections(1)
        aborted, aborted_future = host.ask("s1", [TARGET])
        elsewhere, elsewhere_future = host.ask("s2", [TARGET])
        assert host.abort(aborted)
        assert not host.abort(aborted)
        batch = answer({"id": "target", "selected": ["Code"]})
        assert host.resolve_elsewhere(elsewhere, batch)
        assert not host.resolve_elsewhere(elsewhere, batch)

        with pytest.raises(UserQuestionError) as info:
            await aborted_future
        assert (info.value.code, info.value.message) == (
            ASK_ABORTED,
            "ask_user_question was aborted before the user answered",
        )
        assert await elsewhere_future == batch
        frames = [await receive_question_frame(ws) for _ in range(4)]
        assert [(f.method, f.rpc_id) for f in frames[:2]] == [
            ("question/requested", aborted),
            ("question/requested", elsewhere),
        ]
        outcomes = [
            (f.payload.question_rpc_id, f.payload.outcome)
            for f in frames[2:]
            if isinstance(f.payload, QuestionResolved)
        ]
        assert outcomes == [(aborted, "cancelled"), (elsewhere, "answered")]
    body = answer_response(elsewhere, "s2", batch)
    assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}


async def test_every_new_downlink_gets_the_pending_questions_with_the_same_rpc_id(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    first_rpc, _ = host.ask("sid", [TARGET])
    second_rpc, _ = host.ask("sid", [TARGETS])
    async with http.ws_connect(host.ws_url) as first:
        replayed = [await receive(first), await receive(first)]  # replays only the questions
        assert [f.rpc_id for f in replayed] == [first_rpc, second_rpc]
        async with http.ws_connect(host.ws_url) as second:
            await host.wait_for_connections(2)
            again = [await receive(second), await receive(second)]
            assert [f.to_wire() for f in again] == [f.to_wire() for f in replayed]
            # Both downlinks get every broadcast.
            body = answer_response(first_rpc, "sid", answer({"id": "target", "selected": ["Code"]}))
            assert await post(http, host, body) == {"accepted": True}
            for ws in (first, second):
                resolved = await receive_question_frame(ws)
                assert isinstance(resolved.payload, QuestionResolved)
                assert resolved.payload.question_rpc_id == first_rpc
        async with http.ws_connect(host.ws_url) as third:
            frame = await receive(third)
            assert frame.rpc_id == second_rpc
            assert isinstance(frame.payload, QuestionRequested)
    assert host.total_connections == 3


async def test_after_an_outage_on_the_same_port_pending_questions_are_replayed(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    port = host.port
    async with http.ws_connect(host.ws_url) as ws:
        assert (await receive(ws)).rpc_id == rpc_id
        await host.stop()
        while (closing := await asyncio.wait_for(ws.receive(), timeout=5)).type is (
            aiohttp.WSMsgType.TEXT
        ):
            pass  # the session/queue baseline
        assert closing.type in (
            aiohttp.WSMsgType.CLOSE,
            aiohttp.WSMsgType.CLOSED,
            aiohttp.WSMsgType.CLOSING,
        )
    assert host.connections == 0
    with pytest.raises(aiohttp.ClientConnectionError):
        async with http.get(host.base_url + EVENTS_MUX_PATH):
            pass

    assert await host.start(port=port, after_outage=True) == f"http://127.0.0.1:{port}"
    assert host.is_pending(rpc_id) and not future.done()
    async with http.ws_connect(host.ws_url) as ws:
        replayed = await receive(ws)
        assert replayed.rpc_id == rpc_id
        body = answer_response(rpc_id, "sid", answer({"id": "target", "selected": []}))
        assert await post(http, host, body) == {"accepted": True}
    assert (await future).to_wire() == {"answers": [{"id": "target", "selected": []}]}


async def test_a_restart_without_state_disposes_pending_questions(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    port = host.port
    await host.stop()
    await host.start(port=port)
    assert host.port == port and not host.is_pending(rpc_id)
    with pytest.raises(UserQuestionError) as info:
        await future
    assert (info.value.code, info.value.message) == (
        ASK_ABORTED,
        "web user-questions provider was disposed",
    )
    body = answer_response(rpc_id, "sid", answer({"id": "target", "selected": []}))
    assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}


async def test_force_receipt_overrides_the_next_response_only(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    body = answer_response(rpc_id, "sid", answer({"id": "target", "selected": ["Docs"]}))
    host.force_receipt("bad-response")
    assert await post(http, host, body) == {"accepted": False, "reason": "bad-response"}
    assert host.is_pending(rpc_id)
    host.force_receipt("not-pending", times=2)
    assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}
    assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}
    assert await post(http, host, body) == {"accepted": True}
    assert (await future).to_wire() == {"answers": [{"id": "target", "selected": ["Docs"]}]}
    assert host.responses == [body] * 4


async def test_respond_needs_a_json_content_type(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    rpc_id, _ = host.ask("sid", [TARGET])
    text = json.dumps(cancel_response(rpc_id))
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {},
    ):
        async with http.post(
            host.base_url + RESPOND_PATH, data=text.encode(), headers=headers
        ) as response:
            assert response.status == 415
    async with http.post(
        host.base_url + RESPOND_PATH,
        data=text,
        headers={"Content-Type": "application/json; charset=utf-8"},
    ) as response:
        assert response.status == 200
        assert await response.json() == {"accepted": True}


@pytest.mark.parametrize("data", [b"", b"not json", b'{"type": ', b"\xff\xfe\x00"])
async def test_respond_refuses_a_body_that_is_not_json(
    host: DshHostStandIn, http: aiohttp.ClientSession, data: bytes
) -> None:
    rpc_id, future = host.ask("sid", [TARGET])
    headers = {"Content-Type": "application/json"}
    async with http.post(host.base_url + RESPOND_PATH, data=data, headers=headers) as response:
        assert response.status == 400
    assert host.responses == [] and host.is_pending(rpc_id) and not future.done()


async def test_a_token_guards_both_endpoints(http: aiohttp.ClientSession) -> None:
    async with DshHostStandIn(token="s3cret") as host:
        rpc_id, _ = host.ask("sid", [TARGET])
        async with http.post(
            host.base_url + RESPOND_PATH, json=cancel_response(rpc_id)
        ) as response:
            assert response.status == 401
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            async with http.ws_connect(host.ws_url):
                pass
        assert info.value.status == 401
        wrong = {"Authorization": "Bearer nope"}
        async with http.post(
            host.base_url + RESPOND_PATH, json=cancel_response(rpc_id), headers=wrong
        ) as response:
            assert response.status == 401
        auth = {"Authorization": "Bearer s3cret"}
        async with http.ws_connect(host.ws_url, headers=auth) as ws:
            assert (await receive(ws)).rpc_id == rpc_id
        assert await post(http, host, cancel_response(rpc_id), headers=auth) == {"accepted": True}


# --------------------------------------------------------------------------- approvals


BASH = {"command": "rm -rf /srv/cache", "justification": "clean the cache"}


async def test_an_approval_comes_after_its_tool_call_and_asked_events(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    sid = new_session_id()
    async with http.ws_connect(host.ws_url) as ws:
        await host.wait_for_connections(1)
        rpc_id, approval_id, outcome = host.request_approval(sid, "bash", BASH)
        call, asked, requested = await receive(ws), await receive(ws), await receive(ws)
        assert isinstance(call.payload, OtherPayload) and isinstance(asked.payload, OtherPayload)
        call_event = (call.payload.model_extra or {})["event"]
        asked_event = (asked.payload.model_extra or {})["event"]
        assert call_event["type"] == "tool/call" and asked_event["type"] == "approval/asked"
        assert json.loads(call_event["data"]["arguments"]) == BASH
        assert asked_event["data"]["id"] == approval_id
        assert asked_event["seq"] == call_event["seq"] + 1
        assert isinstance(requested.payload, ApprovalRequested)
        assert requested.rpc_id == rpc_id and requested.payload.session_id == sid

        # No dismissal for approvals: ok:false, even "cancelled", is a bad response.
        assert await post(http, host, cancel_response(rpc_id)) == {
            "accepted": False,
            "reason": "bad-response",
        }
        wrong = approval_response(rpc_id, sid, "another-approval", "allowed-once")
        assert await post(http, host, wrong) == {"accepted": False, "reason": "bad-response"}
        body = approval_response(rpc_id, sid, approval_id, "rejected")
        body["result"]["value"]["note"] = "stripped"
        assert await post(http, host, body) == {"accepted": True}
        assert await asyncio.wait_for(outcome, 5) == "rejected"
        assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}
        resolved = await receive(ws)
        assert isinstance(resolved.payload, ApprovalResolved)
        assert (resolved.payload.approval_id, resolved.payload.outcome) == (approval_id, "rejected")


async def test_a_cancelled_turn_withdraws_its_approval(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    sid = new_session_id()
    rpc_id, approval_id, outcome = host.request_approval(sid, "write", {"path": "/srv/x"})
    assert host.cancel_turn(sid) == 1
    assert await asyncio.wait_for(outcome, 5) == "cancelled"
    body = approval_response(rpc_id, sid, approval_id, "allowed-once")
    assert await post(http, host, body) == {"accepted": False, "reason": "not-pending"}


async def test_pending_approvals_are_replayed_after_questions_on_a_new_downlink(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    sid = new_session_id()
    approval_rpc, _, _ = host.request_approval(sid, "bash", BASH)
    question_rpc, _ = host.ask(sid, [TARGET])
    async with http.ws_connect(host.ws_url) as ws:
        methods = []
        for _ in range(4):
            message = await asyncio.wait_for(ws.receive(), 5)
            methods.append(parse_frame(message.data).method)
        assert methods == [
            "session/subscribed",
            "question/requested",
            "approval/requested",
            "session/queue",
        ]
    assert host.is_pending(approval_rpc) and host.is_pending(question_rpc)


async def test_session_history_returns_the_sessions_events(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    sid = new_session_id()
    _, approval_id, _ = host.request_approval(sid, "bash", BASH)
    url = host.base_url + "/api/session.history"

    def request(session_id: str) -> dict[str, Any]:
        payload = {"type": "session.history", "sessionId": session_id}
        return {
            "type": "client-request",
            "rpcId": "h1",
            "method": "session.history",
            "payload": payload,
        }

    async with http.post(url, json=request(sid)) as response:
        assert response.status == 200
        body = (await response.json())["result"]["value"]
    kinds = [item["event"]["type"] for item in body["events"]]
    assert kinds[-2:] == ["tool/call", "approval/asked"]
    assert [item["event"]["seq"] for item in body["events"]] == list(range(len(kinds)))
    assert body["events"][-1]["event"]["data"]["id"] == approval_id
    async with http.post(url, json=request(new_session_id())) as response:
        assert (await response.json())["result"]["ok"] is False
    # As the real 0.1.1-rc.2 host answers a bare body: HTTP 200 with a plain-text refusal.
    async with http.post(url, json={"sessionId": sid}) as response:
        assert response.status == 200
        assert await response.text() == "bad-request: invalid client-request message"
    async with http.post(url, data="x", headers={"Content-Type": "text/plain"}) as response:
        assert response.status == 415


async def test_anything_sent_on_the_downlink_closes_it_with_1008(
    host: DshHostStandIn, http: aiohttp.ClientSession
) -> None:
    async with http.ws_connect(host.ws_url) as ws:
        await host.wait_for_connections(1)
        await ws.send_str("{}")
        message = await asyncio.wait_for(ws.receive(), 5)
        assert message.type is aiohttp.WSMsgType.CLOSE
        assert ws.close_code == 1008
