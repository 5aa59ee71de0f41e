"""``ask_tool_approval`` over MCP: the HTTP API's approval (``POST /v1/approvals``) asked
through the MCP server, decided in Slack, its decision returned; bad arguments refused as
the bot refuses the body.

The MCP server runs in process (``tests.mcp.test_mcp_endings.session``) asking the real bot.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.api.body import ApprovalPost
from bot.mcp import APPROVAL_TOOL_NAME, TOOL_NAME
from tests.api.test_api_approvals import HOSTILE, RM, WRITE, decide, post
from tests.api.test_api_body_checks import PLAN
from tests.api.test_gateway import API_TOKEN, DEPLOY, running
from tests.mcp.test_mcp_endings import error_of, session, text_of
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "button", "decision"),
    [
        (RM, "Allow once", "allowed-once"),
        (WRITE, "Reject", "rejected"),
        (
            {"tool": "bash", "command": HOSTILE, "reason": "<!here> clean up"},
            "Allow once",
            "allowed-once",
        ),
    ],
    ids=["command", "path", "long hostile command"],
)
async def test_an_approval_asked_over_mcp_returns_the_decision(
    body: dict[str, Any], button: str, decision: str
) -> None:
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        call = asyncio.ensure_future(client.call_tool(APPROVAL_TOOL_NAME, body))
        await until(lambda: bed.messages(), within=20, what="the panel")
        (message,) = bed.messages()
        asked = {"message": {"channel": message.channel, "ts": message.ts}}
        await decide(bed, asked, button)
        result = await asyncio.wait_for(call, 20)
    assert not result.is_error, text_of(result)
    shown = json.loads(text_of(result))
    assert shown["decision"] == decision  # and when, for its executor to consume it once
    assert shown["expiresAt"] == pytest.approx(shown["decidedAt"] + 900) and shown["id"]


@pytest.mark.slow
async def test_a_plan_review_over_mcp_carries_when_it_was_decided_and_until_when() -> None:
    """An approved plan, like a tool approval, says when it was decided and until when its
    executor may act on it, with the id that consumes it; a plain question's answer does not."""
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, PLAN))
        await until(lambda: bed.messages(), within=20, what="the plan review")
        (message,) = bed.messages()
        await decide(bed, {"message": {"channel": message.channel, "ts": message.ts}}, "Approve")
        result = await asyncio.wait_for(call, 20)
        assert not result.is_error, text_of(result)
        shown = json.loads(text_of(result))
        assert shown["answers"] == [{"id": "plan", "selected": ["Approve"]}]
        assert shown["expiresAt"] == pytest.approx(shown["decidedAt"] + 900)
        assert result.structured_content == shown
        async with bed.http.post(f"/v1/questions/{shown['id']}/consume") as reply:
            assert reply.status == 200, await reply.text()
        plain = asyncio.ensure_future(client.call_tool(TOOL_NAME, DEPLOY))
        await until(lambda: len(bed.messages()) == 2, within=20, what="the question")
        message = bed.messages()[1]
        await decide(bed, {"message": {"channel": message.channel, "ts": message.ts}}, "Deploy")
        assert json.loads(text_of(await asyncio.wait_for(plain, 20))).keys() == {"answers"}


async def test_the_tool_is_listed_with_the_approval_body_as_its_schema() -> None:
    async with session("http://127.0.0.1:9") as client:
        (_, tool) = (await client.list_tools()).tools
    assert tool.name == APPROVAL_TOOL_NAME
    posted = ApprovalPost.model_json_schema(by_alias=True)
    assert tool.input_schema["properties"] == posted["properties"]
    assert tool.input_schema["additionalProperties"] is False
    assert set(tool.input_schema["required"]) == {"tool", "reason"}


@pytest.mark.parametrize(
    "arguments",
    [{"tool": "bash", "reason": "why"}, {**RM, "comand": "ls"}, {**RM, "link": "ftp://x"}],
    ids=["neither command nor path", "unknown argument", "bad link"],
)
async def test_bad_arguments_are_refused_as_the_bot_refuses_the_body(
    arguments: dict[str, Any],
) -> None:
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        status, refused = await asyncio.wait_for(post(bed, arguments), 30)
        assert status == 422, refused
        result = await asyncio.wait_for(client.call_tool(APPROVAL_TOOL_NAME, arguments), 20)
        assert bed.slack.calls.count("chat.postMessage") == 0
    error = error_of(result)
    assert error["code"] == refused["code"] == "INVALID_REQUEST"
    assert [e["loc"] for e in error["errors"]] == [e["loc"] for e in refused["errors"]]
