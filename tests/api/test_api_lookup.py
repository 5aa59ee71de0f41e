"""``POST /v1/questions`` with ``If-Match: *``: find what an Idempotency-Key asked, never ask.

A client that gave up on its POST (cancelled, its reply lost) would abort what the POST
may have asked; a plain retry would ask it when the first POST never arrived. The
conditional POST answers the question the key asked (200, as a retry) or 412
``NOT_ASKED``, and posts nothing; a key is looked up per token, as ids are kept apart.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from bot.api.openapi import document
from tests.api.test_api_hardening import ALPHA, BETA, TWO_TOKENS
from tests.api.test_gateway import DEPLOY, Bed, running

pytestmark = pytest.mark.timeout(60)


async def post(
    bed: Bed, key: str | None, *, lookup: bool, token: str | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {"Idempotency-Key": key} if key else {}
    if lookup:
        headers["If-Match"] = "*"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with bed.http.post("/v1/questions", json=DEPLOY, headers=headers) as response:
        return response.status, await response.json()


async def test_a_key_that_asked_nothing_is_412_and_nothing_is_posted() -> None:
    async with running() as bed:
        for key in (f"k-{uuid.uuid4().hex}", None):
            status, answer = await post(bed, key, lookup=True)
            assert status == 412, answer
            assert (answer["name"], answer["code"]) == ("RequestError", "NOT_ASKED")
        assert bed.slack.calls.count("chat.postMessage") == 0
        assert bed.runtime.gateway.running == 0


@pytest.mark.slow
async def test_a_key_that_asked_finds_its_question_as_a_retry_does() -> None:
    key = f"k-{uuid.uuid4().hex}"
    async with running() as bed:
        asked, question = await post(bed, key, lookup=False)
        assert asked == 201, question
        status, found = await post(bed, key, lookup=True)
        assert status == 200, found
        assert found["id"] == question["id"]
        assert bed.slack.calls.count("chat.postMessage") == 1


@pytest.mark.slow
async def test_a_key_is_looked_up_among_the_asking_tokens_questions_only() -> None:
    key = f"k-{uuid.uuid4().hex}"
    async with running(**TWO_TOKENS) as bed:
        asked, question = await post(bed, key, lookup=False, token=ALPHA)
        assert asked == 201, question
        status, answer = await post(bed, key, lookup=True, token=BETA)
        assert (status, answer["code"]) == (412, "NOT_ASKED")
        status, found = await post(bed, key, lookup=True, token=ALPHA)
        assert (status, found["id"]) == (200, question["id"])
        assert bed.slack.calls.count("chat.postMessage") == 1


def test_the_openapi_document_describes_the_lookup() -> None:
    post_doc = document()["paths"]["/v1/questions"]["post"]
    (if_match,) = [p for p in post_doc["parameters"] if p["name"] == "If-Match"]
    assert if_match["in"] == "header" and "412" in if_match["description"]
    assert "NOT_ASKED" in post_doc["responses"]["412"]["description"]
