"""Issue 38: an answer is used once, for a while (``POST /v1/questions/{id}/consume``).

An agent's executor consumes the approval before it acts: the first consume succeeds, any
other (at once, later, from another process) is refused ``ALREADY_CONSUMED``; one past
``expiresAt`` is refused ``EXPIRED``; a re-ask under the same Idempotency-Key says the
answer was consumed instead of handing it back as a new approval.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.api.test_gateway import running

pytestmark = pytest.mark.timeout(60)


async def _consume(bed: Any, request_id: str) -> tuple[int, dict[str, Any]]:
    async with bed.http.post(f"/v1/questions/{request_id}/consume") as reply:
        return reply.status, await reply.json()


async def _answered(bed: Any, **headers: str) -> dict[str, Any]:
    status, posted = await bed.ask(headers=headers)
    assert status == 201, posted
    await bed.click(posted, "Deploy")
    status, view = await bed.get(posted["id"], wait=10)
    assert view["state"] == "answered", view
    return view


async def test_an_answer_carries_when_it_was_decided_and_until_when_it_may_be_used() -> None:
    async with running(approval_ttl=600) as bed:
        view = await _answered(bed)
        assert view["expiresAt"] == pytest.approx(view["decidedAt"] + 600)
        assert "consumedAt" not in view


async def test_an_answer_is_consumed_exactly_once_however_many_try_at_once() -> None:
    async with running() as bed:
        view = await _answered(bed)
        results = await asyncio.gather(*(_consume(bed, view["id"]) for _ in range(10)))
        statuses = sorted(status for status, _ in results)
        assert statuses == [200] + [409] * 9, results
        assert {body["code"] for status, body in results if status == 409} == {"ALREADY_CONSUMED"}
        _, again = await bed.get(view["id"])
        assert again["consumedAt"] >= again["decidedAt"]
        assert [e["kind"] for e in again["events"]].count("consumed") == 1


async def test_an_answer_past_its_expiry_is_refused_with_its_own_code() -> None:
    async with running(approval_ttl=0.2) as bed:
        view = await _answered(bed)
        await asyncio.sleep(0.4)
        status, body = await _consume(bed, view["id"])
        assert (status, body["code"]) == (410, "EXPIRED"), body


async def test_an_open_question_has_nothing_to_consume() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        status, body = await _consume(bed, posted["id"])
        assert (status, body["code"]) == (409, "NOT_DECIDED")
        status, body = await _consume(bed, "0" * 16)
        assert status == 404


async def test_a_re_ask_under_the_key_of_a_consumed_answer_says_so() -> None:
    async with running() as bed:
        key = {"Idempotency-Key": "deploy-2-3-1"}
        view = await _answered(bed, **key)
        status, again = await bed.ask(headers=key)  # before consuming: the same answer
        assert status == 200 and again["answer"] == view["answer"]
        assert (await _consume(bed, view["id"]))[0] == 200
        status, again = await bed.ask(headers=key)
        assert (status, again["code"]) == (409, "ALREADY_CONSUMED"), again
