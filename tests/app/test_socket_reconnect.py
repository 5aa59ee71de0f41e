"""Socket Mode stays connected while the Web API scheduler is busy: a refresh, a drop, a stall.

Slack asks an app to reconnect every few hours (``disconnect``/``refresh_requested``) and drops
connections at will. The new connection's ``apps.connections.open`` must go out at once, not
wait behind the Tier 1 pacing of the bot's scheduler, or every click meanwhile fails in Slack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from adapters.slack.pacing.rate_limits import POST_MESSAGE
from tests.app.test_bot_socket import DEPLOY, Slack, slack_with_socket_mode, socket_bot
from tests.slack_harness import until

RECONNECT = 5.0
"""Seconds a reconnect may take here (the target is 2 s; the old code took over 60 s)."""


async def _reconnects(slack: Slack, disrupt: Callable[[], object]) -> float:
    """Disrupt the connection, wait for a new one that said hello; the seconds it took."""
    loop = asyncio.get_running_loop()
    before = slack.socket.connections
    began = loop.time()
    result = disrupt()
    if asyncio.iscoroutine(result):
        await result
    await until(
        lambda: slack.socket.connections > before and slack.socket.sockets,
        within=RECONNECT,
        what="a new Socket Mode connection",
    )
    return loop.time() - began


@pytest.mark.slow
async def test_refresh_drop_and_stall_each_reconnect_at_once_with_the_scheduler_busy() -> None:
    async with slack_with_socket_mode() as slack, socket_bot(slack) as (runtime, http):
        await slack.socket.connected()
        posted = []
        for _ in range(3):
            async with http.post("/v1/questions", json=DEPLOY) as response:
                assert response.status == 201
                posted.append(await response.json())
        # The scheduler busy: 40 questions for another channel wait their turn to be posted.
        other = slack.web.workspace.add_channel("busy").id
        body = {**DEPLOY, "destination": {"channel": other}}
        busy = [asyncio.ensure_future(http.post("/v1/questions", json=body)) for _ in range(40)]
        scheduler = runtime.provider.client.scheduler  # type: ignore[attr-defined]
        await until(lambda: scheduler.depths().get(POST_MESSAGE, 0) > 10, what="a busy queue")

        try:
            disruptions = [
                ("refresh", slack.socket.refresh),
                ("drop", slack.socket.drop),
                ("stall", slack.socket.stall),
            ]
            for (what, disrupt), question in zip(disruptions, posted, strict=True):
                took = await _reconnects(slack, disrupt)
                print(f"{what}: reconnected in {took * 1000:.0f} ms")
                where = question["message"]
                message = slack.web.workspace.message(where["channel"], where["ts"])
                payload = slack.web.click(message, user=slack.alice, text="Deploy")
                envelope_id = await slack.socket.send_interactive(payload)
                assert (await slack.socket.ack(envelope_id))["envelope_id"] == envelope_id
                async with http.get(f"/v1/questions/{question['id']}", params={"wait": "5"}) as r:
                    answered = await r.json()
                assert answered["state"] == "answered", what
                assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
            assert scheduler.depths().get(POST_MESSAGE, 0) > 0, "the queue stayed busy throughout"
        finally:
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)
