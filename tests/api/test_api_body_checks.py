"""``POST /v1/questions`` beyond validation: an ``Idempotency-Key`` reused with any other body
is refused, deadline settings that could never apply are refused instead of dropped, and a
POST the bot's stop overtakes is answered 503 (retry elsewhere), not 409.

In process against the Slack stand-in (``tests.api.test_gateway.running``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.api.test_gateway import DEPLOY, another_bot, running

PLAN = {
    "questions": [
        {
            "id": "plan",
            "question": "Approve the migration plan?",
            "detail": "1. Copy the table\n2. Switch reads",
            "options": [{"label": "Approve"}, {"label": "Decline"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
    ]
}

# Each changes what is asked; the first POST with the key is DEPLOY itself.
DIFFERENT_BODIES = {
    "timeout": {**DEPLOY, "timeout": 30},
    "link": {**DEPLOY, "link": "https://ci.example/runs/7"},
    "reminders": {**DEPLOY, "timeout": 600, "reminders": [120]},
    "escalation": {**DEPLOY, "escalateAfter": 30, "escalateTo": "U0ESCALATE"},
    "remind": {**DEPLOY, "remind": ["U0LEAD01"]},
    "review": {**DEPLOY, "review": {"approvals": 2}},
    "revises": {**DEPLOY, "revises": "0123456789abcdef0123"},
    "label": {**DEPLOY, "label": "session 3f2a"},
    "questions": {**DEPLOY, "questions": [{**DEPLOY["questions"][0], "question": "Roll back?"}]},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DIFFERENT_BODIES))
async def test_an_idempotency_key_reused_with_a_different_body_is_409(name: str) -> None:
    async with running() as bed:
        headers = {"Idempotency-Key": f"reuse-{name}"}
        status, _ = await asyncio.wait_for(bed.ask(DEPLOY, headers=headers), 30)
        assert status == 201
        status, again = await asyncio.wait_for(bed.ask(DIFFERENT_BODIES[name], headers=headers), 30)
        assert (status, again["code"]) == (409, "IDEMPOTENCY_KEY_REUSED"), again
        assert len(bed.messages()) == 1


@pytest.mark.slow
async def test_a_retry_with_the_same_body_in_another_key_order_gets_the_question() -> None:
    async with running(question_timeout=900) as bed:
        body = {
            **DEPLOY,
            "timeout": 600,
            "reminders": [300, 60],
            "escalateAfter": 120,
            "escalateTo": "U0ESCALATE",
            "link": "https://ci.example/runs/7",
        }
        headers = {"Idempotency-Key": "same-body"}
        status, first = await asyncio.wait_for(bed.ask(body, headers=headers), 30)
        assert status == 201
        reordered: dict[str, Any] = dict(reversed(list(body.items())))
        reordered["destination"] = {"channel": bed.channel}  # the default, said explicitly
        reordered["reminders"] = [60, 300]
        status, again = await asyncio.wait_for(bed.ask(reordered, headers=headers), 30)
        assert status == 200, again
        assert again["id"] == first["id"]
        # No timeout in the body means QUESTION_TIMEOUT: the same as saying it.
        headers = {"Idempotency-Key": "default-timeout"}
        status, first = await asyncio.wait_for(bed.ask(DEPLOY, headers=headers), 30)
        assert status == 201
        said = {**DEPLOY, "timeout": 900}
        status, again = await asyncio.wait_for(bed.ask(said, headers=headers), 30)
        assert (status, again["id"]) == (200, first["id"]), again
        assert len(bed.messages()) == 2


@pytest.mark.slow
async def test_a_plan_review_retried_with_its_review_and_revision_gets_the_question() -> None:
    async with running() as bed:
        status, earlier = await asyncio.wait_for(bed.ask(PLAN), 30)
        assert status == 201, earlier
        body = {**PLAN, "review": {"approvals": 1}, "revises": earlier["id"]}
        headers = {"Idempotency-Key": "plan-v2"}
        status, first = await asyncio.wait_for(bed.ask(body, headers=headers), 30)
        assert status == 201, first
        status, again = await asyncio.wait_for(bed.ask(body, headers=headers), 30)
        assert (status, again["id"]) == (200, first["id"]), again
        other = {**body, "review": {"approvals": 2}}
        status, refused = await asyncio.wait_for(bed.ask(other, headers=headers), 30)
        assert (status, refused["code"]) == (409, "IDEMPOTENCY_KEY_REUSED"), refused


# (extra body fields, the error location named)
NEVER_APPLIED: dict[str, tuple[dict[str, Any], list[str]]] = {
    "reminders without a timeout": ({"reminders": [600]}, ["reminders"]),
    "a reminder at or after the deadline": (
        {"timeout": 60, "reminders": [30, 120]},
        ["reminders", "1"],
    ),
    "escalateAfter without escalateTo": ({"escalateAfter": 30}, ["escalateAfter"]),
    "escalateTo without escalateAfter": ({"escalateTo": "U0ESCALATE"}, ["escalateTo"]),
    "an escalation after the deadline": (
        {"timeout": 60, "escalateAfter": 120, "escalateTo": "U0ESCALATE"},
        ["escalateAfter"],
    ),
}


@pytest.mark.parametrize("name", sorted(NEVER_APPLIED))
async def test_deadline_settings_that_could_never_apply_are_422(name: str) -> None:
    extra, loc = NEVER_APPLIED[name]
    async with running() as bed:
        status, refused = await asyncio.wait_for(bed.ask({**DEPLOY, **extra}), 30)
        assert status == 422, refused
        assert (refused["name"], refused["code"]) == ("ValidationError", "INVALID_REQUEST")
        assert loc in [error["loc"] for error in refused["errors"]], refused
        assert refused["message"] == refused["errors"][0]["msg"]
        assert not bed.messages()


@pytest.mark.slow
async def test_reminders_count_from_question_timeout_when_the_body_has_no_timeout() -> None:
    async with running(question_timeout=600) as bed:
        status, posted = await asyncio.wait_for(bed.ask({**DEPLOY, "reminders": [120]}), 30)
        assert status == 201, posted
        record = await bed.runtime.store.get(posted["id"])
        assert record is not None and record.deadline is not None
        assert record.reminders == [pytest.approx(record.deadline - 120)]
        status, refused = await asyncio.wait_for(bed.ask({**DEPLOY, "reminders": [900]}), 30)
        assert status == 422, refused
        assert ["reminders", "0"] in [error["loc"] for error in refused["errors"]]


@pytest.mark.slow
async def test_a_post_the_stop_overtakes_is_503_not_409(monkeypatch: pytest.MonkeyPatch) -> None:
    async with running() as bed:
        provider = bed.runtime.provider
        looked_up = asyncio.Event()
        status_of = provider.status

        async def slow_status(request_id: str) -> Any:
            # The POST's look-up of its key: the stop begins while it waits.
            if not looked_up.is_set():
                looked_up.set()
                await asyncio.sleep(0.5)
            return await status_of(request_id)

        monkeypatch.setattr(provider, "status", slow_status)
        posting = asyncio.ensure_future(bed.ask(DEPLOY))
        await asyncio.wait_for(looked_up.wait(), 10)
        stopping = asyncio.ensure_future(bed.stop())
        status, answer = await asyncio.wait_for(posting, 20)
        await asyncio.wait_for(stopping, 20)
        assert (status, answer["code"]) == (503, "ASK_ABORTED"), answer
        assert not bed.messages()


@pytest.mark.slow
async def test_a_post_whose_ask_the_stop_refuses_is_503_not_409(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running() as bed:
        provider = bed.runtime.provider
        ask = provider.ask
        stopping: list[asyncio.Future[None]] = []

        async def ask_as_the_stop_begins(request: Any) -> Any:
            # Past the gateway's own checks: the stop comes before the provider takes it.
            stopping.append(asyncio.ensure_future(bed.stop()))
            await asyncio.sleep(0.2)
            return await ask(request)

        monkeypatch.setattr(provider, "ask", ask_as_the_stop_begins)
        status, answer = await asyncio.wait_for(bed.ask(DEPLOY), 20)
        await asyncio.wait_for(stopping[0], 20)
        assert (status, answer["code"]) == (503, "ASK_ABORTED"), answer
        assert not bed.messages()


@pytest.mark.slow
async def test_a_retry_reaching_a_bot_with_other_defaults_gets_the_question() -> None:
    """The deadline fields a body leaves out came from the asking bot's QUESTION_TIMEOUT; a
    retry on a bot configured otherwise (a rolling change, a restart) is the same request,
    not a different one (409) or one whose reminders have no timeout (422)."""
    with_reminders = {**DEPLOY, "reminders": [600]}
    async with running(question_timeout=3600.0) as bed:
        first = {"Idempotency-Key": "defaults-1"}
        second = {"Idempotency-Key": "defaults-2"}
        assert (await asyncio.wait_for(bed.ask(DEPLOY, headers=first), 30))[0] == 201
        assert (await asyncio.wait_for(bed.ask(with_reminders, headers=second), 30))[0] == 201
        for timeout in (7200.0, None):
            async with another_bot(bed, question_timeout=timeout) as (_, agent):
                for body, headers in ((DEPLOY, first), (with_reminders, second)):
                    async with agent.post("/v1/questions", json=body, headers=headers) as r:
                        assert r.status == 200, (timeout, await r.text())
        async with another_bot(bed, question_timeout=None) as (_, agent):
            fresh = {"Idempotency-Key": "defaults-3"}
            async with agent.post("/v1/questions", json=with_reminders, headers=fresh) as r:
                assert r.status == 422  # a new question there: its reminders have no timeout
