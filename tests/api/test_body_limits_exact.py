"""``MAX_BODY_BYTES`` at its exact value and one byte past it, announced by
``Content-Length`` or sent chunked (issue 41)."""

from __future__ import annotations

import json

import pytest

from tests.api.test_api_hardening import TOKEN, answer_to, connection, head, head_only
from tests.api.test_gateway import DEPLOY, running

pytestmark = pytest.mark.timeout(90)
LIMIT = 1024


def padded(size: int) -> bytes:
    """A valid question body of exactly ``size`` bytes (JSON with trailing spaces)."""
    body = json.dumps(DEPLOY).encode()
    assert len(body) < size
    return body + b" " * (size - len(body))


async def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_refused() -> None:
    async with running(max_body_bytes=LIMIT, body_timeout=30.0) as bed:
        statuses = []
        for size in (LIMIT, LIMIT + 1):
            body = padded(size)
            async with connection(bed) as (reader, writer):
                writer.write(head(bed, "/v1/questions", TOKEN, f"Content-Length: {size}") + body)
                await writer.drain()
                statuses.append((await answer_to(reader))[0])
            async with connection(bed) as (reader, writer):
                writer.write(head(bed, "/v1/questions", TOKEN, "Transfer-Encoding: chunked"))
                for start in range(0, size, 300):
                    chunk = body[start : start + 300]
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                statuses.append((await answer_to(reader))[0])
        # One byte over, announced: refused before any of the body is sent.
        over = head(bed, "/v1/questions", TOKEN, f"Content-Length: {LIMIT + 1}")
        statuses.append((await head_only(bed, over))[0])
        assert statuses == [201, 201, 413, 413, 413]
        assert bed.runtime.gateway.refusals.counts.get("too_large") == 3
