"""Issue 15: one test per finding of the outside attack, each named after what it attacks.

The bot runs in process (``bot.app.start``) against the Slack stand-in; requests whose
headers an HTTP client would refuse to send go over a raw socket (``attack_tools``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.attack_tools import LogTap, raw_request
from tests.test_gateway import API_TOKEN, DEPLOY, running

pytestmark = pytest.mark.timeout(60)

STAMP = str(int(time.time()))
SIGNATURE = "v0=" + "ab" * 32
FORM = "application/x-www-form-urlencoded"


# -- 4: malformed headers ------------------------------------------------------------------

MALFORMED_SLACK_HEADERS: dict[str, tuple[dict[str, bytes | str], str]] = {
    "a timestamp that is not a number": (
        {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": SIGNATURE},
        "bad_timestamp",
    ),
    "an empty timestamp": (
        {"X-Slack-Request-Timestamp": "", "X-Slack-Signature": SIGNATURE},
        "bad_timestamp",
    ),
    "a non-ASCII signature": (
        {"X-Slack-Request-Timestamp": STAMP, "X-Slack-Signature": "v0=é".encode()},
        "bad_signature_header",
    ),
    "a signature in bytes that are not UTF-8": (
        {"X-Slack-Request-Timestamp": STAMP, "X-Slack-Signature": b"v0=\xff\xfe"},
        "bad_signature_header",
    ),
    "a timestamp in bytes that are not UTF-8": (
        {"X-Slack-Request-Timestamp": b"\xff12", "X-Slack-Signature": SIGNATURE},
        "bad_timestamp",
    ),
}


@pytest.mark.parametrize("shape", list(MALFORMED_SLACK_HEADERS))
async def test_malformed_slack_signature_headers_get_400_naming_the_header(shape: str) -> None:
    headers, cause = MALFORMED_SLACK_HEADERS[shape]
    async with running() as bed:
        with LogTap() as tap:
            status, body = await raw_request(
                bed.runtime.url,
                "POST",
                "/slack/events",
                {"Content-Type": FORM, **headers},
                b"payload=%7B%7D",
            )
        assert status == 400, body
        header = "X-Slack-Request-Timestamp" if cause == "bad_timestamp" else "X-Slack-Signature"
        assert header.encode() in body
        assert tap.tracebacks == [] and tap.errors == []
        assert len(tap.refusals(cause)) == 1


MALFORMED_API_HEADERS: dict[str, tuple[str, str, dict[str, bytes | str], int, str]] = {
    "an Authorization header that is not UTF-8": (
        "GET",
        "/v1/questions/0123456789abcdef0123",
        {"Authorization": b"Bearer \xff\xfe"},
        401,
        "UNAUTHORIZED",
    ),
    "a non-ASCII bearer token": (
        "GET",
        "/v1/questions/0123456789abcdef0123",
        {"Authorization": "Bearer jé".encode()},
        401,
        "UNAUTHORIZED",
    ),
    "an Idempotency-Key that is not UTF-8": (
        "POST",
        "/v1/questions",
        {
            "Authorization": f"Bearer {API_TOKEN}",
            "Idempotency-Key": b"k\xff\xfe",
            "Content-Type": "application/json",
        },
        400,
        "BAD_IDEMPOTENCY_KEY",
    ),
    "a non-ASCII Idempotency-Key": (
        "POST",
        "/v1/questions",
        {
            "Authorization": f"Bearer {API_TOKEN}",
            "Idempotency-Key": "clé".encode(),
            "Content-Type": "application/json",
        },
        400,
        "BAD_IDEMPOTENCY_KEY",
    ),
}


@pytest.mark.parametrize("shape", list(MALFORMED_API_HEADERS))
async def test_malformed_api_headers_get_a_4xx_with_a_code_and_no_traceback(shape: str) -> None:
    import json

    method, path, headers, expected, code = MALFORMED_API_HEADERS[shape]
    async with running() as bed:
        with LogTap() as tap:
            status, body = await raw_request(
                bed.runtime.url, method, path, headers, json.dumps(DEPLOY).encode()
            )
        assert status == expected, body
        assert json.loads(body)["code"] == code
        assert tap.tracebacks == [] and tap.errors == []
        assert bed.slack.calls.count("chat.postMessage") == 0


async def test_a_flood_of_malformed_headers_is_logged_once_per_cause() -> None:
    async with running() as bed:
        with LogTap() as tap:
            for _ in range(30):
                for headers, _cause in MALFORMED_SLACK_HEADERS.values():
                    status, _ = await raw_request(
                        bed.runtime.url,
                        "POST",
                        "/slack/events",
                        {"Content-Type": FORM, **headers},
                        b"payload=%7B%7D",
                    )
                    assert status == 400
        counts: dict[str, Any] = {
            cause: len(tap.refusals(cause)) for cause in ("bad_timestamp", "bad_signature_header")
        }
        assert counts == {"bad_timestamp": 1, "bad_signature_header": 1}
        assert tap.tracebacks == []


MALFORMED_HTTP: dict[str, bytes] = {
    "control characters in a header": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Idempotency-Key: k\x01\x02\r\n\r\n",
    "a header line with no colon": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nnonsense\r\n\r\n",
    "a bad Content-Length": b"POST /v1/questions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Length: -5\r\n\r\n",
    "an invalid request line": b"GET\x00 / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
}


async def test_requests_aiohttp_cannot_parse_get_400_and_one_log_line_without_traceback() -> None:
    import asyncio

    async with running() as bed:
        host, port = bed.runtime.url.removeprefix("http://").split(":")
        with LogTap() as tap:
            for _ in range(10):
                for raw in MALFORMED_HTTP.values():
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(raw)
                    answer = await reader.read()
                    writer.close()
                    assert answer.split(b" ", 2)[1] == b"400", answer[:60]
        assert tap.tracebacks == [] and tap.errors == []
        assert len(tap.refusals("bad_http")) == 1


def test_refusals_are_logged_once_a_minute_per_cause_with_the_count_since() -> None:
    import logging

    from adapters.httpguard import RefusalLog

    now = [1000.0]
    logger = logging.getLogger("tests.refusals")
    with LogTap() as tap:
        log = RefusalLog(logger, clock=lambda: now[0])
        for _ in range(500):
            log.refused("bad_timestamp", "x")
            log.refused("unknown_host", "y")
        now[0] += 59.9
        log.refused("bad_timestamp", "x")
        now[0] += 0.2
        log.refused("bad_timestamp", "x")
    lines = [(r.cause, r.refused) for r in tap.records if r.name == "tests.refusals"]  # type: ignore[attr-defined]
    assert lines == [("bad_timestamp", 1), ("unknown_host", 1), ("bad_timestamp", 501)]
    assert log.counts == {"bad_timestamp": 502, "unknown_host": 500}
