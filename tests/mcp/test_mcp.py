"""``python -m bot.mcp`` through the official MCP SDK's stdio client, against a real bot.

The bot runs as a subprocess in HTTP mode with the Slack stand-in (``tests.app.test_bot_http``);
the MCP server runs as another subprocess, launched by ``mcp.Client`` exactly as an MCP host
launches it. People answer with signed clicks delivered to the bot's ``/slack/events``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from adapters.slack.sandbox import clicks
from adapters.slack.sandbox.records import Message
from bot.api.openapi import document
from bot.mcp import DESCRIPTION, TOOL_NAME
from bot.questions.models import AskUserQuestionItem
from tests.app.test_bot_http import API_TOKEN, Stack, http_bot
from tests.bot_process import clean_environment, run_command
from tests.slack_harness import all_text, interactive_elements, until

DEPLOY: dict[str, Any] = {
    "questions": [
        {
            "id": "deploy",
            "question": "Deploy 2.3.1 to production?",
            "header": "Release",
            "options": [{"label": "Deploy", "description": "now"}, {"label": "Wait"}],
        }
    ]
}


def mcp_server(url: str, cwd: Path, **env: str) -> StdioServerParameters:
    """How an MCP host launches ``python -m bot.mcp`` (command, args, env)."""
    settings = {"BOT_URL": url, "BOT_API_TOKEN": API_TOKEN, "MCP_PROGRESS_SECONDS": "0.5"}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.mcp"],
        env=clean_environment({**settings, **env}),
        cwd=cwd,
    )


@contextlib.asynccontextmanager
async def mcp_client(url: str, cwd: Path, **env: str) -> AsyncIterator[Client]:
    """The SDK's client, connected over stdio to a fresh ``python -m bot.mcp``."""
    async with Client(mcp_server(url, cwd, **env)) as client:
        yield client


async def posted_message(s: Stack, count: int = 1) -> Message:
    """The question message the bot posted (the ``count``-th in the channel)."""
    await until(lambda: len(s.slack.workspace.history(s.channel)) >= count, within=20)
    return s.slack.workspace.history(s.channel)[count - 1]


async def click(s: Stack, message: Message, text: str) -> None:
    """Alice clicks ``text`` on ``message``: a signed payload to the bot."""
    current = s.slack.workspace.message(message.channel, message.ts)
    status, _ = await s.slack.deliver(s.slack.click(current, user=s.alice, text=text))
    assert status == 200


def text_of(result: CallToolResult) -> str:
    """The one text block of a tool result."""
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


@pytest.mark.slow
async def test_the_tool_is_listed_with_the_seams_schema(tmp_path: Path) -> None:
    async with mcp_client("http://127.0.0.1:9", tmp_path) as client:
        (tool, _) = (await client.list_tools()).tools
    assert tool.name == TOOL_NAME == "ask_user_question"
    assert tool.description == DESCRIPTION
    assert "ASK_CANCELLED" in DESCRIPTION and "plan-review" in DESCRIPTION
    schema = tool.input_schema
    assert schema["required"] == ["questions"]
    # Every option of the HTTP API's body (one model for both), these among them.
    assert set(schema["properties"]) == set(
        document()["components"]["schemas"]["QuestionPost"]["properties"]
    )
    assert set(schema["properties"]) >= {
        "questions", "destination", "label", "review", "revises", "timeout", "reminders",
        "escalateAfter", "escalateTo", "link", "callback",
    }  # fmt: skip
    item = schema["$defs"]["AskUserQuestionItem"]
    # The seam's own model, camelCase wire names and all.
    expected = AskUserQuestionItem.model_json_schema()
    for name, definition in expected.pop("$defs").items():
        assert schema["$defs"][name] == definition
    assert item == expected
    assert set(item["properties"]) == {
        "id",
        "question",
        "detail",
        "header",
        "options",
        "multiSelect",
        "intent",
    }
    option = schema["$defs"]["AskUserQuestionOption"]
    assert set(option["properties"]) == {"label", "description"}
    assert item["additionalProperties"] is False


@pytest.mark.slow
async def test_a_call_is_posted_and_returns_the_persons_exact_answer(tmp_path: Path) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        call = asyncio.ensure_future(
            client.call_tool(
                TOOL_NAME, {**DEPLOY, "label": "release bot"}, progress_callback=on_progress
            )
        )
        message = await posted_message(s)
        assert "Deploy 2.3.1 to production?" in all_text(message.blocks)
        assert "release bot" in all_text(message.blocks)
        await until(lambda: len(progress) >= 2, within=10, what="progress while waiting")
        assert not call.done()
        await click(s, message, "Deploy")
        result = await asyncio.wait_for(call, 20)
        await until(
            lambda: (
                not interactive_elements(
                    s.slack.workspace.message(message.channel, message.ts).blocks
                )
            )
        )
    assert not result.is_error
    expected = {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
    assert json.loads(text_of(result)) == expected
    assert result.structured_content == expected
    values = [value for value, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert progress[0][1] == "Posted to Slack; waiting for an answer."
    assert all(m and "waiting for an answer" in m.lower() for _, m in progress)


@pytest.mark.slow
async def test_free_text_and_multi_select_answers_come_back_as_typed(tmp_path: Path) -> None:
    ask = {
        "questions": [
            {
                "id": "envs",
                "question": "Where?",
                "multiSelect": True,
                "options": [{"label": "staging"}, {"label": "eu-west"}, {"label": "us-east"}],
            },
            {"id": "why", "question": "Why now?"},
        ]
    }
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, ask))
        message = await posted_message(s)
        boxes = next(t for t in clicks.targets(message.blocks) if t.type == "checkboxes")
        chosen = [o["value"] for o in boxes.element["options"] if o["text"]["text"] != "eu-west"]
        values = {(boxes.block_id, boxes.action_id): chosen}
        payload = s.slack.click(message, user=s.alice, text="Submit", values=values)
        status, _ = await s.slack.deliver(payload)
        assert status == 200
        result = await asyncio.wait_for(call, 20)
    assert not result.is_error, text_of(result)
    answer = json.loads(text_of(result))
    assert answer == result.structured_content
    assert answer["answers"][0] == {"id": "envs", "selected": ["staging", "us-east"]}
    assert answer["answers"][1] == {"id": "why", "selected": []}


@pytest.mark.slow
async def test_a_dismissal_is_a_tool_error_naming_ask_cancelled(tmp_path: Path) -> None:
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, DEPLOY))
        message = await posted_message(s)
        await click(s, message, "Dismiss")
        result = await asyncio.wait_for(call, 20)
    assert result.is_error
    error = json.loads(text_of(result))
    assert set(error) == {"name", "code", "message"}
    assert (error["name"], error["code"]) == ("UserQuestionError", "ASK_CANCELLED")
    assert result.structured_content == error


@pytest.mark.slow
async def test_a_bad_request_is_a_tool_error_with_the_seams_code(tmp_path: Path) -> None:
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        empty = await client.call_tool(TOOL_NAME, {"questions": []})
        unknown = await client.call_tool(TOOL_NAME, {"questions": [{"id": "a"}]})
        assert s.slack.calls.count("chat.postMessage") == 0
    assert empty.is_error
    assert json.loads(text_of(empty))["code"] == "EMPTY_QUESTIONS"
    assert unknown.is_error and "question" in text_of(unknown)


@pytest.mark.slow
async def test_a_request_the_bot_refuses_carries_where_it_is_wrong(tmp_path: Path) -> None:
    bad = {"questions": [{"id": "a", "question": "Which?", "options": [{"label": "x"}] * 2}]}
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        result = await client.call_tool(TOOL_NAME, bad)
        assert s.slack.calls.count("chat.postMessage") == 0
    assert result.is_error
    error = json.loads(text_of(result))
    assert (error["name"], error["code"]) == ("ValidationError", "INVALID_REQUEST")
    assert error["errors"] and all({"loc", "msg"} <= e.keys() for e in error["errors"])
    assert any("options" in e["loc"] for e in error["errors"])


@pytest.mark.slow
async def test_a_link_is_passed_to_the_bot_and_shown(tmp_path: Path) -> None:
    spec = document()
    post = spec["components"]["schemas"]["QuestionPost"]
    if "link" not in post.get("properties", {}):
        pytest.skip("this bot's HTTP API takes no link yet")
    link = "https://ci.example/runs/42"
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, {**DEPLOY, "link": link}))
        message = await posted_message(s)
        assert link in json.dumps(message.blocks)
        await click(s, message, "Wait")
        result = await asyncio.wait_for(call, 20)
    assert json.loads(text_of(result)) == {"answers": [{"id": "deploy", "selected": ["Wait"]}]}


@pytest.mark.slow
async def test_cancelling_the_call_aborts_the_question_and_slack_says_so(
    tmp_path: Path,
) -> None:
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        progress = asyncio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.set()

        call = asyncio.ensure_future(
            client.call_tool(TOOL_NAME, DEPLOY, progress_callback=on_progress)
        )
        message = await posted_message(s)
        await asyncio.wait_for(progress.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

        def final() -> Message:
            return s.slack.workspace.message(message.channel, message.ts)

        await until(lambda: "Cancelled" in all_text(final().blocks), within=10)
        assert not interactive_elements(final().blocks)
        # The MCP server is still serving after the cancellation.
        (tool, _) = (await client.list_tools()).tools
        assert tool.name == TOOL_NAME


@pytest.mark.slow
async def test_cancelling_while_slack_is_still_posting_still_aborts_the_question(
    tmp_path: Path,
) -> None:
    async with http_bot(tmp_path) as s, mcp_client(s.bot.url, tmp_path) as client:
        s.slack.faults.add(method="chat.postMessage", kind="delay", delay=2.0)
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, DEPLOY))
        await asyncio.sleep(1.0)  # the bot is waiting for Slack to take the message
        assert not s.slack.workspace.history(s.channel)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        message = await posted_message(s)

        def final() -> Message:
            return s.slack.workspace.message(message.channel, message.ts)

        await until(lambda: "Cancelled" in all_text(final().blocks), within=15)
        assert not interactive_elements(final().blocks)
        assert len(s.slack.workspace.history(s.channel)) == 1  # posted once, not twice


@pytest.mark.slow
async def test_an_unreachable_bot_is_a_tool_error_that_says_so(tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with mcp_client(url, tmp_path, MCP_RECONNECT_SECONDS="1") as client:  # not 30 s
        result = await client.call_tool(TOOL_NAME, DEPLOY)
    assert result.is_error
    error = json.loads(text_of(result))
    assert error["code"] == "BOT_UNREACHABLE"
    assert url in error["message"] and "BOT_URL" in error["message"]
    assert "python -m bot" in error["message"]


@pytest.mark.slow
async def test_a_bot_that_goes_away_while_waiting_is_retried_then_a_tool_error(
    tmp_path: Path,
) -> None:
    async with (
        http_bot(tmp_path) as s,
        mcp_client(s.bot.url, tmp_path, MCP_RECONNECT_SECONDS="2") as client,
    ):
        progress: list[str | None] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message)

        call = asyncio.ensure_future(
            client.call_tool(TOOL_NAME, DEPLOY, progress_callback=on_progress)
        )
        await posted_message(s)
        await until(lambda: progress, within=10)
        await s.bot.kill()
        result = await asyncio.wait_for(call, 30)
    assert result.is_error
    error = json.loads(text_of(result))
    assert error["code"] == "BOT_UNREACHABLE"
    assert "BOT_URL" in error["message"]


@pytest.mark.slow
async def test_a_wrong_api_token_is_a_tool_error(tmp_path: Path) -> None:
    async with (
        http_bot(tmp_path) as s,
        mcp_client(s.bot.url, tmp_path, BOT_API_TOKEN="not-the-token") as client,
    ):
        result = await client.call_tool(TOOL_NAME, DEPLOY)
        assert s.slack.calls.count("chat.postMessage") == 0
    assert result.is_error
    assert "not-the-token" not in text_of(result)
    assert json.loads(text_of(result))["code"] in {"UNAUTHORIZED", "HTTP_401"}


@pytest.mark.slow
async def test_the_trail_names_the_mcp_servers_own_token_and_only_it_reads_it(
    tmp_path: Path,
) -> None:
    mcp_token = f"mcp-{secrets.token_hex(16)}"
    async with (
        http_bot(tmp_path, BOT_API_TOKENS=f"mcp:{mcp_token}") as s,
        mcp_client(s.bot.url, tmp_path, BOT_API_TOKEN=mcp_token) as client,
    ):
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, {**DEPLOY, "label": "ci"}))
        await click(s, await posted_message(s), "Deploy")
        assert not (await asyncio.wait_for(call, 20)).is_error
        # Another agent's token (BOT_API_TOKEN, named default) is shown none of it.
        async with s.http.get("/v1/audit", params={"since": "1h"}) as response:
            assert (response.status, await response.text()) == (200, "")
        headers = {"Authorization": f"Bearer {mcp_token}"}
        async with aiohttp.ClientSession(s.bot.url, headers=headers) as mcp_http:
            for _ in range(100):  # the answered event follows the answer's write
                async with mcp_http.get("/v1/audit", params={"since": "1h"}) as response:
                    lines = (await response.text()).splitlines()
                if len(lines) >= 2:
                    break
                await asyncio.sleep(0.05)
    events = [json.loads(line) for line in lines]
    assert [(e["kind"], e["by"]) for e in events] == [("asked", "api:mcp"), ("answered", s.alice)]
    assert events[0]["detail"]["label"] == "ci"
    assert mcp_token not in "\n".join(lines)


@pytest.mark.slow
async def test_help_and_bad_settings(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bot.mcp"]
    env = clean_environment({"BOT_URL": "ftp://example", "MCP_PROGRESS_SECONDS": "0"})
    code, _, err = await run_command(argv, env, cwd=tmp_path)
    assert code == 2, err
    assert "BOT_URL:" in err and "MCP_PROGRESS_SECONDS:" in err
    code, out, _ = await run_command([*argv, "--help"], clean_environment(), cwd=tmp_path)
    assert code == 0
    for name in ("BOT_URL", "BOT_API_TOKEN", "MCP_PROGRESS_SECONDS", "MCP_RECONNECT_SECONDS"):
        assert name in out
