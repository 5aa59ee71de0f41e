"""``Idempotency-Key`` on ``POST /v1/questions``, field by field, in one running bot.

A retry (the same body, in any key order, defaults said or left out, deadlines as offsets)
gets the question its key asked (200), however many come at once; the key reused with any
field changed is refused (409) and nothing is posted; a key whose question Slack never
showed gets that error again. The slow tests of ``test_api_body_checks`` and
``test_api_hardening`` start one bot per case; these run every case in one.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from bot.api.asking import KeyLocks
from tests.api.test_gateway import DEPLOY, Bed, running

pytestmark = pytest.mark.timeout(60)

BASE: dict[str, Any] = {
    **DEPLOY,
    "label": "session 3f2a",
    "link": "https://ci.example/runs/7",
    "timeout": 600,
    "reminders": [300, 60],
    "escalateAfter": 120,
    "escalateTo": "U0ESCALATE",
    "remind": ["U0LEAD01"],
}
FRACTIONS = {**DEPLOY, "timeout": 600.3, "reminders": [100.7], "escalateAfter": 30.1}
"""Offsets that the stored absolute times give back only to within a rounding error."""
FREE_TEXT = {"questions": [{"id": "why", "question": "Why did the deploy fail?"}]}


def changed(**fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(BASE), **fields}


def said(body: dict[str, Any], **question: Any) -> dict[str, Any]:
    """``body`` with ``question``'s fields said in its first question."""
    body = copy.deepcopy(body)
    body["questions"][0].update(question)
    return body


# Each is the key's question asked again: 200 with its id.
RETRIES: dict[str, dict[str, Any]] = {
    "another key order, defaults said": {
        **dict(reversed(list(said(BASE, multiSelect=False).items()))),
        "reminders": [60, 300],
        "review": None,
        "revises": None,
        "callback": None,
    },
    "deadlines and mentions left out": {
        k: v
        for k, v in BASE.items()
        if k not in ("timeout", "reminders", "escalateAfter", "escalateTo", "remind")
    },
}
# Each changes what is asked: 409.
REUSES: dict[str, dict[str, Any]] = {
    "label": changed(label="session 9e8d"),
    "link": changed(link="https://ci.example/runs/8"),
    "callback": changed(callback="https://hooks.example/done"),
    "review": changed(review={"approvals": 2}),
    "revises": changed(revises="0123456789abcdef0123"),
    "remind": changed(remind=["U0LEAD02"]),
    "timeout": changed(timeout=601),
    "a reminder": changed(reminders=[300, 61]),
    "one reminder fewer": changed(reminders=[60]),
    "escalation delay": changed(escalateAfter=121),
    "escalation target": changed(escalateTo="U0ESCALATF"),
    "question": said(BASE, question="Roll back?"),
    "multiSelect": said(BASE, multiSelect=True),
}


async def asked(bed: Bed, body: dict[str, Any], key: str) -> tuple[int, dict[str, Any]]:
    return await asyncio.wait_for(bed.ask(body, headers={"Idempotency-Key": key}), 30)


async def test_a_retry_gets_its_question_and_any_changed_field_is_refused() -> None:
    async with running(question_timeout=900) as bed:
        status, first = await asked(bed, BASE, "base")
        assert status == 201, first
        for name, body in RETRIES.items():
            status, again = await asked(bed, body, "base")
            assert (status, again.get("id")) == (200, first["id"]), (name, again)
        reuses = {
            **REUSES,
            "channel": changed(destination={"channel": "C0OTHER01"}),
            "thread": changed(destination={"channel": bed.channel, "threadTs": "1712345678.1"}),
        }
        for name, body in reuses.items():
            status, refused = await asked(bed, body, "base")
            assert (status, refused.get("code")) == (409, "IDEMPOTENCY_KEY_REUSED"), name
        fractions = {**FRACTIONS, "escalateTo": "U0ESCALATE"}
        status, first = await asked(bed, fractions, "fractions")
        assert status == 201, first
        status, again = await asked(bed, fractions, "fractions")
        assert (status, again.get("id")) == (200, first["id"]), again
        # "options": [] shows what no options show: the same request.
        status, free = await asked(bed, FREE_TEXT, "free")
        assert status == 201, free
        status, again = await asked(bed, said(FREE_TEXT, options=[]), "free")
        assert (status, again.get("id")) == (200, free["id"]), again
        assert len(bed.messages()) == 3


async def test_retries_at_once_post_once_and_a_key_slack_refused_stays_refused() -> None:
    async with running() as bed:
        results = await asyncio.gather(*(asked(bed, DEPLOY, "burst") for _ in range(5)))
        assert sorted(status for status, _ in results) == [200, 200, 200, 200, 201]
        assert len({body["id"] for _, body in results}) == 1
        bed.slack.faults.add(method="chat.postMessage", kind="server_error", count=10)
        status, failed = await asked(bed, DEPLOY, "refused")
        assert (status, failed["code"]) == (502, "DELIVERY_FAILED"), failed
        bed.slack.faults.clear()
        assert await asked(bed, DEPLOY, "refused") == (status, failed)  # never a 200
        assert len(bed.messages()) == 1


async def test_a_key_is_locked_while_a_request_holds_it_and_forgotten_after() -> None:
    locks = KeyLocks()
    order: list[str] = []

    async def request(name: str) -> None:
        async with locks.held("q1"):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    await asyncio.gather(*(request(name) for name in "abc"))
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]
    assert len(locks) == 0
