"""A posted API question costs no task of its own (10,000 may be open for hours): its
open-question slot, its end's log line and its deadline come from a store watch and the one
shared timer. In process against the Slack stand-in (``tests.api.test_gateway.running``)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.api import taken
from bot.api.access import ApiTokens, OpenQuestionCaps
from tests.api.test_gateway import DEPLOY, running
from tests.slack_harness import all_text, until

pytestmark = pytest.mark.timeout(60)

ASKED = 20


def tasks() -> int:
    """Tasks running, but for Web API calls on their way (paced: many may wait their turn),
    Home tab rounds and the HTTP server's connections."""
    return sum(
        1
        for t in asyncio.all_tasks()
        if not t.get_name().startswith(("chat.", "views."))
        and "RequestHandler" not in t.get_coro().__qualname__  # type: ignore[union-attr]
    )


@pytest.mark.slow
async def test_posted_questions_hold_their_slots_with_no_task_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bot.gateway")
    async with running() as bed:
        gateway = bed.runtime.gateway
        await bed.ask()  # whatever the bot starts once, started now
        await until(lambda: gateway.running == 1 and bed.runtime.provider.background_count == 0)
        before = tasks()
        posted = [(await bed.ask())[1] for _ in range(ASKED)]
        await until(lambda: bed.runtime.provider.background_count == 0, what="posts settled")
        assert gateway.running == ASKED + 1  # each holds its slot ...
        assert tasks() <= before + 4, "a task per posted question"  # ... with no task
        await bed.click(posted[0], "Deploy")
        async with bed.http.delete(f"/v1/questions/{posted[1]['id']}") as response:
            assert response.status == 200
        await until(lambda: gateway.running == ASKED - 1, what="two slots given back")
        ended = [r for r in caplog.records if r.getMessage() == "question ended"]
        assert [(r.request, r.code) for r in ended] == [(posted[1]["id"], "ASK_ABORTED")]  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_deadlines_of_posted_questions_are_kept_by_one_timer() -> None:
    async with running() as bed:
        gateway = bed.runtime.gateway
        await bed.ask()
        await until(lambda: bed.runtime.provider.background_count == 0)
        before = tasks()
        body = {**DEPLOY, "timeout": 8}
        posted = [(await bed.ask(body))[1] for _ in range(ASKED)]
        assert tasks() <= before + 4, "a task per deadline"  # the timer, its sleep
        await until(lambda: gateway.running == 1, within=30, what="every deadline")
        for question in posted:
            _, got = await bed.get(question["id"])
            assert (got["state"], got["error"]["code"]) == ("failed", "ASK_TIMEOUT")
        first = bed.message(posted[0])  # (its update paced as Slack's limits say)
        await until(lambda: "Timed out" in all_text(first.blocks), within=30, what="shown")


async def test_a_question_whose_watch_fails_keeps_its_slot_and_is_watched_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store unreachable when a held question's watch is set: its slot stays taken, the
    failure is logged, and the watch is set again after ``LOOK_AGAIN``; once it reports the
    question's end, the slot is given back."""
    monkeypatch.setattr(taken, "LOOK_AGAIN", 0.01)
    watches = 0

    async def watch(request_id: str, report: taken.Report) -> bool:
        nonlocal watches
        watches += 1
        if watches == 1:
            raise ConnectionError("the store is away")
        report(request_id, None)
        return True

    caps = OpenQuestionCaps(per_process=5, per_token=5)
    caps.take("q1", None)
    held = taken.Held(caps, ApiTokens({}), watch, logging.getLogger("bot.gateway"))
    with caplog.at_level(logging.INFO, "bot.gateway"):
        await held.hold("q1", asked=True)
        assert held.asked == {"q1": True} and caps.holds("q1")
        assert "cannot watch a question" in caplog.messages
        await until(lambda: watches == 2, what="the watch set again")
    assert held.asked == {} and not caps.holds("q1")
