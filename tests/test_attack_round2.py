"""Issue 38: one test per finding of the second outside attack that the HTTP edge answers.

The bot runs in process against the Slack stand-in; bodies an HTTP client would not send
go over a raw socket (``attack_tools``).
"""

from __future__ import annotations

import gzip
import json

import pytest

from adapters.slack.sandbox.signing import build_interaction_request
from tests.attack_tools import LogTap, raw_request
from tests.test_gateway import API_TOKEN, DEPLOY, SIGNING_SECRET, running
from tests.test_outside_attack import _cut_within, _slow

pytestmark = pytest.mark.timeout(60)


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
