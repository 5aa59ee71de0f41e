"""Every per-question option of ``POST /v1/questions`` over MCP: each one given to the tool
reaches the question as the HTTP API sets it, and each bad value is refused with the code
and error locations the bot's own 422 (or its seam error) gives for the same body.

The MCP server runs in process (``tests.mcp.test_mcp_endings.session``) asking the real bot
(``tests.api.test_gateway.running``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from adapters.slack import QuestionStatus
from bot.mcp import TOOL_NAME
from tests.api.test_api_body_checks import PLAN
from tests.api.test_gateway import API_TOKEN, DEPLOY, Bed, running
from tests.mcp.test_mcp_endings import error_of, session
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)

Check = Callable[[QuestionStatus, Bed], bool]

# option -> (extra arguments, what the question then holds, an extra the bot refuses)
OPTIONS: dict[str, tuple[dict[str, Any], Check, dict[str, Any]]] = {
    "destination": (
        {"destination": {"channel": "C0OPS"}},
        lambda q, bed: q.channel == "C0OPS",
        {"destination": {"channel": "#ops"}},
    ),
    "label": (
        {"label": "release bot"},
        lambda q, bed: q.label == "release bot",
        {"label": "x" * 121},
    ),
    "timeout": (
        {"timeout": 600},
        lambda q, bed: q.deadline is not None and 590 < q.deadline - q.created_at <= 600,
        {"timeout": 0},
    ),
    "reminders": (
        {"timeout": 600, "reminders": [120]},
        lambda q, bed: q.deadline is not None and q.reminders == (q.deadline - 120,),
        {"timeout": 60, "reminders": [30, 120]},
    ),
    "escalation": (
        {"escalateAfter": 30, "escalateTo": "U0ESCALATE"},
        lambda q, bed: (
            q.escalate_to == "U0ESCALATE" and 25 < (q.escalate_at or 0) - q.created_at <= 30
        ),
        {"escalateAfter": 30},
    ),
    "review": (
        {**PLAN, "review": {"approvals": 2}},
        lambda q, bed: q.review is not None and q.review.approvals == 2,
        {**PLAN, "review": {"approvals": 0}},
    ),
    "revises": (
        {**PLAN},  # revises: the plan review asked first over HTTP (added in the test)
        lambda q, bed: q.revises is not None,
        {**PLAN, "revises": "0123456789abcdef0123"},
    ),
    "link": (
        {"link": "https://ci.example/runs/7"},
        lambda q, bed: q.link == "https://ci.example/runs/7",
        {"link": "ftp://ci.example/runs/7"},
    ),
}


async def asked_ids(bed: Bed) -> list[str]:
    """The ids of the questions asked so far, in order (from ``GET /v1/audit``)."""
    async with bed.http.get("/v1/audit", params={"since": "0"}) as response:
        lines = (await response.text()).splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return [e["requestId"] for e in events if e["kind"] == "asked"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OPTIONS))
async def test_an_option_given_to_the_tool_reaches_the_question(name: str) -> None:
    extra, holds, _ = OPTIONS[name]
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        bed.slack.workspace.add_channel("ops", id="C0OPS")
        if name == "revises":
            status, earlier = await asyncio.wait_for(bed.ask(PLAN), 30)
            assert status == 201, earlier
            extra = {**extra, "revises": earlier["id"]}
        before = len(await asked_ids(bed))
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, {**DEPLOY, **extra}))
        ids: list[str] = []

        async def asked() -> bool:
            ids[:] = await asked_ids(bed)
            return len(ids) > before

        while not await asked():
            assert not call.done(), call.result()
            await asyncio.sleep(0.05)
        question = await bed.runtime.provider.status(ids[-1])
        assert question is not None and holds(question, bed), question
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await until(lambda: bed.runtime.gateway.running == 0, within=10, what="the abort")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OPTIONS))
async def test_a_bad_option_is_refused_as_the_http_api_refuses_it(name: str) -> None:
    *_, bad = OPTIONS[name]
    arguments = {**DEPLOY, **bad}
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        status, refused = await asyncio.wait_for(bed.ask(arguments), 30)
        assert status in (422, 400), refused
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), 20)
        assert bed.slack.calls.count("chat.postMessage") == 0
    error = error_of(result)
    assert (error["name"], error["code"]) == (refused["name"], refused["code"]), error
    assert [e["loc"] for e in error.get("errors", [])] == [
        e["loc"] for e in refused.get("errors", [])
    ]
