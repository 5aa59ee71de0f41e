"""Arguments checked where they enter, a BOT_URL the client cannot use, 429's retryAfter.

The MCP server runs in process (``tests.mcp.test_mcp_endings.session``) asking the real bot
(``tests.api.test_gateway.running``) or a fake one; the SDK's client sends the arguments as
an MCP host does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.api.body import QuestionPost
from bot.mcp import DESCRIPTION, TOOL_NAME
from bot.mcp.__main__ import load_mcp_settings
from tests.api.test_gateway import API_TOKEN, DEPLOY, running
from tests.mcp.test_mcp_endings import error_of, replying, session, text_of
from tests.mcp.test_mcp_posts import ANSWER, SECOND, posting_bot

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("extra", [{"lable": "release bot"}, {"multiSelect": True}])
async def test_an_unknown_argument_is_refused_as_the_bot_refuses_it(
    extra: dict[str, Any],
) -> None:
    arguments = {**DEPLOY, **extra}
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        status, refused = await bed.ask(arguments)
        assert status == 422
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), 10)
        assert bed.slack.calls.count("chat.postMessage") == 0
    error = error_of(result)
    assert error["code"] == "INVALID_REQUEST"
    assert [e["loc"] for e in error["errors"]] == [e["loc"] for e in refused["errors"]]
    assert next(iter(extra)) in error["message"]


@pytest.mark.parametrize("label", ["null", "[1]", '{"a": 1}', "7"])
async def test_a_string_argument_holding_json_text_is_taken_as_the_string(label: str) -> None:
    async with posting_bot(0, None) as (fake, url), session(url, progress_every=0.2) as client:
        arguments = {**SECOND, "label": label}
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), 10)
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == ANSWER
    assert fake.bodies and all(body["label"] == label for body in fake.bodies), fake.bodies


BAD_LINKS = ["ftp://ci.example/run/42", "https://ci.example/a b", "x" * 10, "https://" + "x" * 3000]


async def test_a_bad_link_is_refused_where_it_enters_with_a_plain_message() -> None:
    async with running() as bed, session(bed.runtime.url, API_TOKEN) as client:
        for link in BAD_LINKS:
            result = await asyncio.wait_for(
                client.call_tool(TOOL_NAME, {**DEPLOY, "link": link}), 10
            )
            error = error_of(result)
            assert error["code"] == "INVALID_REQUEST", error
            assert [e["loc"] for e in error["errors"]] == [["link"]], error
            assert "link: must be an http:// or https:// URL without spaces" in error["message"]
        assert bed.slack.calls.count("chat.postMessage") == 0
        (tool, _) = (await client.list_tools()).tools
    bots = QuestionPost.model_json_schema(by_alias=True)["properties"]["link"]["anyOf"][0]
    (advertised, _) = tool.input_schema["properties"]["link"]["anyOf"]
    assert (advertised["maxLength"], advertised["pattern"]) == (
        bots["maxLength"],
        bots["pattern"],
    )


def test_a_bot_url_with_credentials_and_a_token_is_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir("/")  # no .env
    monkeypatch.setenv("BOT_URL", "http://proxyuser:s3cr3t-pass@127.0.0.1:3000")
    monkeypatch.setenv("BOT_API_TOKEN", API_TOKEN)
    with pytest.raises(ValueError) as refused:
        load_mcp_settings()
    assert "BOT_URL" in str(refused.value) and "BOT_API_TOKEN" in str(refused.value)
    assert "s3cr3t" not in str(refused.value) and API_TOKEN not in str(refused.value)
    monkeypatch.delenv("BOT_API_TOKEN")
    assert load_mcp_settings().bot_url.startswith("http://proxyuser:")


async def test_too_many_questions_keeps_retry_after() -> None:
    body = {
        "name": "RequestError",
        "code": "TOO_MANY_QUESTIONS",
        "message": "this token has 1000 open questions; retry once some have ended",
        "retryAfter": 5,
    }
    async with (
        posting_bot(1000, replying(429, json.dumps(body).encode())) as (fake, url),
        session(url) as client,
    ):
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, SECOND), 10)
    assert error_of(result) == body
    assert [kind for kind, _ in fake.requests] == ["POST"]


def test_the_description_names_the_codes_a_model_can_act_on() -> None:
    for code in (
        "ASK_CANCELLED",
        "ASK_TIMEOUT",
        "INVALID_REQUEST",
        "TOO_MANY_QUESTIONS",
        "retryAfter",
        "ASK_ABORTED",
        "BOT_UNREACHABLE",
        "STORE_UNAVAILABLE",
    ):
        assert code in DESCRIPTION, code
