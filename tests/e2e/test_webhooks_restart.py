"""A delivery owed when the bot is SIGKILLed is made by the bot started again.

Real ``python -m bot`` processes (HTTP mode) against the Slack stand-in and a receiver in
this process; the receiver refuses (503) until the first bot is killed, so its delivery
is due (retrying) at the kill; the second bot, on the same store, delivers it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.slack.sandbox.webapi import SlackStandIn
from bot.webhooks import signing_secret, verify
from tests.api.test_gateway import DEPLOY
from tests.api.test_webhooks import receiving
from tests.e2e.test_api_restart import API_TOKEN, bot, environment
from tests.restarts import slack, top_level
from tests.slack_harness import until

__all__ = ["slack"]

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_a_delivery_due_at_a_sigkill_is_made_after_the_restart(
    store: str, slack: SlackStandIn, tmp_path: Path, redis_url: str, store_prefix: str
) -> None:
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    more = {"WEBHOOK_HOSTS": "127.0.0.1", "WEBHOOK_ALLOW_PRIVATE": "true"}
    if store == "redis":
        more |= {"REDIS_URL": redis_url, "REDIS_PREFIX": store_prefix}
    env = environment(slack, channel, store, tmp_path, **more)
    async with receiving(*([503] * 1000)) as hook:
        async with bot(env, tmp_path / "a") as (first, agent):
            slack.interactivity_url = f"{first.url}/slack/events"
            asked = await agent.ask({**DEPLOY, "callback": hook.url})
            (message,) = top_level(slack, channel)
            status, _ = await slack.deliver(slack.click(message, user=alice, text="Deploy"))
            assert status == 200
            await until(lambda: hook.seen, within=20, what="a refused attempt")
            await first.kill()
        refused = len(hook.seen)
        hook.plan.clear()  # the receiver is back
        async with bot(env, tmp_path / "b"):
            await until(lambda: hook.taken, within=30, what="the delivery")
    headers, raw = hook.seen[-1]
    assert hook.taken == {asked["id"]} and len(hook.seen) >= refused + 1
    assert verify(signing_secret(API_TOKEN), headers, raw)
    assert json.loads(raw)["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
