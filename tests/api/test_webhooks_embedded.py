"""Webhooks of a provider embedded in a user's own bolt app (``AskOptions(callback=...)``):
delivered by the bot's deliverer once wired (``embed_webhooks``), refused at once otherwise.

A real bolt app and the Slack stand-in (``SlackHarness``), a real aiohttp receiver."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from adapters.slack import ApprovalView
from bot.api.asking import ended_view
from bot.app.embedded import embed_webhooks
from bot.questions import AskOptions, UserQuestionError
from bot.webhooks import signing_secret, verify
from tests.api.test_webhooks import receiving
from tests.slack_harness import SlackHarness, until

pytestmark = pytest.mark.timeout(60)

QUESTION: dict[str, Any] = {
    "questions": [{"id": "q", "question": "Deploy 2.3.1?", "options": [{"label": "Deploy"}]}]
}
TOKEN = "embedded-secret-0123456789"


async def test_a_callback_asked_in_process_is_delivered_signed() -> None:
    async with receiving() as hook, SlackHarness() as h:
        webhooks = embed_webhooks(h.provider, secret=TOKEN, hosts=["127.0.0.1"], allow_private=True)
        try:
            asking = h.ask(QUESTION, options=AskOptions(callback=hook.url, key="deploy-231"))
            await h.click(await h.posted(), h.alice, text="Deploy")
            answer = await asyncio.wait_for(asking, 10)
            await until(lambda: hook.seen, within=10, what="the delivery")
            request_id = hook.seen[0][0]["X-Webhook-Id"]
            view = await ended_view(h.provider, request_id, 900.0)
            await asyncio.sleep(0.5)  # nothing more comes
        finally:
            await webhooks.stop()
    assert answer.answers[0].selected == ["Deploy"]
    ((headers, raw),) = hook.seen
    assert verify(signing_secret(TOKEN), headers, raw)
    assert not verify(signing_secret("another-secret-0123456789"), headers, raw)
    body = json.loads(raw)
    assert body == view and body["state"] == "answered"


async def test_an_unwired_provider_refuses_a_callback_at_once() -> None:
    async with SlackHarness() as h:
        asking = h.ask(QUESTION, options=AskOptions(callback="https://agents.example/hook"))
        with pytest.raises(UserQuestionError) as refused:
            await asyncio.wait_for(asking, 5)
        assert not h.top_messages()  # nothing asked that nobody would report
    assert refused.value.code == "BAD_CALLBACK"
    assert "embed_webhooks(provider, secret=" in refused.value.message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://agents.example/hook", "host 'agents.example' is not one the operator allows"),
        ("http://127.0.0.1:9/hook", "the callback's address is private"),
    ],
)
async def test_a_callback_the_operator_does_not_allow_is_refused(url: str, why: str) -> None:
    async with SlackHarness() as h:
        webhooks = embed_webhooks(h.provider, secret=TOKEN, hosts=["127.0.0.1"])
        try:
            with pytest.raises(UserQuestionError) as refused:
                await asyncio.wait_for(h.ask(QUESTION, options=AskOptions(callback=url)), 5)
            assert not h.top_messages() and not await webhooks.outbox.due(float("inf"))
        finally:
            await webhooks.stop()
    assert refused.value.code == "BAD_CALLBACK" and why in refused.value.message


async def test_an_approval_asked_in_process_is_delivered_or_refused() -> None:
    view = ApprovalView(tool_name="bash", headline="clean the build", command="rm -rf build")
    async with receiving() as hook, SlackHarness() as h:
        with pytest.raises(UserQuestionError) as refused:
            await h.provider.ask_approval(view, options=AskOptions(callback=hook.url))
        assert refused.value.code == "BAD_CALLBACK" and not h.top_messages()
        webhooks = embed_webhooks(h.provider, secret=TOKEN, hosts=["127.0.0.1"], allow_private=True)
        try:
            asking = asyncio.ensure_future(
                h.provider.ask_approval(view, options=AskOptions(callback=hook.url))
            )
            await h.click(await h.posted(), h.alice, text="Reject")
            ended = await asyncio.wait_for(asking, 10)
            await until(lambda: hook.seen, within=10, what="the delivery")
        finally:
            await webhooks.stop()
    ((headers, raw),) = hook.seen
    assert verify(signing_secret(TOKEN), headers, raw)
    assert headers["X-Webhook-Id"] == ended.id and json.loads(raw)["id"] == ended.id


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        embed_webhooks(object(), secret="short", hosts=["x"])  # type: ignore[arg-type]
