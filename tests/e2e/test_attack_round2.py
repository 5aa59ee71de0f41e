"""Issue 38: one test per finding of the second outside attack that the HTTP edge answers.

The bot runs in process against the Slack stand-in; bodies an HTTP client would not send
go over a raw socket (``attack_tools``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import pytest

from adapters.slack.sandbox.signing import build_interaction_request
from tests.api.test_gateway import API_TOKEN, DEPLOY, SIGNING_SECRET, running
from tests.attack_tools import LogTap, raw_request
from tests.e2e.test_outside_attack import ALPHA, BETA, TWO_TOKENS, _auth, _cut_within, _slow
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)


@pytest.mark.slow
async def test_a_body_that_is_not_what_its_content_encoding_says_is_400_without_traceback() -> None:
    async with running() as bed:
        with LogTap() as tap:
            for path in ("/slack/events", "/v1/questions"):
                status, body = await raw_request(
                    bed.runtime.url,
                    "POST",
                    path,
                    {
                        "Content-Type": "application/json",
                        "Content-Encoding": "gzip",
                        "Authorization": f"Bearer {API_TOKEN}",
                    },
                    b"this is not gzip at all",
                )
                assert status == 400, (path, body)
                assert b"Content-Encoding" in body
        assert tap.tracebacks == [] and tap.errors == []
        # a body that is gzip still arrives as sent
        status, body = await raw_request(
            bed.runtime.url,
            "POST",
            "/v1/questions",
            {
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "Authorization": f"Bearer {API_TOKEN}",
            },
            gzip.compress(json.dumps(DEPLOY).encode()),
        )
        assert status == 201, body


@pytest.mark.parametrize("actions", [[], None, "x", [{}], [1]])
async def test_a_signed_block_actions_payload_without_usable_actions_is_not_a_500(
    actions: object,
) -> None:
    payload: dict[str, object] = {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "U1", "team_id": "T1"},
        "api_app_id": "A1",
        "container": {"type": "message", "channel_id": "C1", "message_ts": "1.1"},
        "channel": {"id": "C1"},
        "trigger_id": "1.2.3",
    }
    if actions is not None:
        payload["actions"] = actions
    async with running() as bed:
        with LogTap() as tap:
            for _ in range(2):
                body, headers = build_interaction_request(payload, SIGNING_SECRET)
                async with bed.http.post("/slack/events", data=body, headers=headers) as reply:
                    assert reply.status in (200, 400), await reply.text()
        assert tap.tracebacks == [] and tap.errors == []


async def test_the_connection_cap_503_declares_the_length_it_sends() -> None:
    async with running(max_connections=2, header_timeout=30.0) as bed:
        idle = [await _slow(bed.runtime.url, b"") for _ in range(2)]
        reader, writer = await _slow(bed.runtime.url, b"")
        answer = await _cut_within(reader, 5)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), head
        declared = [
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ]
        assert declared == [len(body)], (declared, body)
        for _, other in [*idle, (reader, writer)]:
            other.close()


# -- 5: long-polls capped per token, Slack's clicks keep their room --------------------------


async def _poll(bed: Any, request_id: str, token: str) -> int:
    url = f"/v1/questions/{request_id}"
    async with bed.http.get(url, params={"wait": "30"}, headers=_auth(token)) as reply:
        return reply.status


async def test_one_token_cannot_hold_every_connection_with_long_polls() -> None:
    async with running(max_polls_per_token=3, max_connections=24, **TWO_TOKENS) as bed:
        async with bed.http.post("/v1/questions", json=DEPLOY, headers=_auth(ALPHA)) as r:
            alpha = await r.json()
            alphas = alpha["id"]
        async with bed.http.post("/v1/questions", json=DEPLOY, headers=_auth(BETA)) as r:
            betas = (await r.json())["id"]
        held = [asyncio.ensure_future(_poll(bed, alphas, ALPHA)) for _ in range(3)]
        await until(lambda: bed.runtime.gateway.polls.count == 3)
        url = f"/v1/questions/{alphas}"
        async with bed.http.get(url, params={"wait": "30"}, headers=_auth(ALPHA)) as reply:
            assert reply.status == 429, await reply.text()
            assert reply.headers["Retry-After"].isdigit()
            assert (await reply.json())["code"] == "TOO_MANY_WAITS"
        other = asyncio.ensure_future(_poll(bed, betas, BETA))  # another token still waits
        await until(lambda: bed.runtime.gateway.polls.count == 4)
        await bed.click(alpha, "Deploy")  # a signed Slack click still answers
        assert await asyncio.gather(*held) == [200, 200, 200]
        other.cancel()


async def test_all_long_polls_together_leave_room_for_slack() -> None:
    async with running(max_polls_per_token=1000, max_connections=16) as bed:
        _, posted = await bed.ask()
        held = [asyncio.ensure_future(_poll(bed, posted["id"], API_TOKEN)) for _ in range(16)]
        await until(lambda: sum(t.done() for t in held) == 2)  # refused at once, 429
        assert bed.runtime.gateway.polls.count == 14  # 16 connections less 2 kept for Slack
        await bed.click(posted, "Deploy")
        statuses = await asyncio.gather(*held)
        assert sorted(statuses) == [200] * 14 + [429] * 2


# -- 6: unauthenticated bodies in flight are bounded in total bytes --------------------------

STALLED = (
    b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nX-Slack-Request-Timestamp: 1\r\n"
    b"X-Slack-Signature: v0=" + b"ab" * 32 + b"\r\nContent-Length: 1048575\r\n\r\n" + b"x" * 65536
)


async def test_stalled_slack_bodies_cannot_take_more_than_their_budget() -> None:
    budget = 3 * 1024 * 1024
    async with running(max_unsigned_body_bytes=budget, body_timeout=20.0) as bed:
        stalled = [await _slow(bed.runtime.url, STALLED) for _ in range(12)]
        refused = 0
        for reader, _ in stalled:
            try:
                answer = await _cut_within(reader, 0.5)
            except TimeoutError:
                continue  # held: its body counts against the budget
            assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
            refused += 1
        assert refused == 12 - 3, refused  # 3 MiB of 1 MiB bodies: 3 held
        assert bed.runtime.gateway.refusals.counts.get("bodies_busy") == refused
        # a signed request from Slack (small) is still read and answered
        payload = {"type": "block_actions", "user": {"id": "U1"}, "actions": []}
        body, headers = build_interaction_request(payload, SIGNING_SECRET)
        async with bed.http.post("/slack/events", data=body, headers=headers) as reply:
            assert reply.status == 400
        for _, writer in stalled:
            writer.close()
