"""A question's trail has one ``asked`` event, written by the process that showed it.

A detached (API) question's post waits its turn in the scheduler of the process that asked
it; meanwhile the question may pass to another process (released, then claimed by a
starting bot; or taken by an orphan sweep), which posts it. When the first process's turn
comes its post is skipped, and it must append nothing: the ``asked`` event is the poster's,
written with the message's channel, ts and permalink.

Two providers in this test process on one store (one SQLite file, or one Redis prefix) and
one Slack stand-in; each has its own Web API client and scheduler, as two bots would.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.clicks.bolt_app import build_app, close_web_client, web_client
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.provider import SlackQuestionProvider
from bot.questions import AskOptions, UserQuestionError
from tests.e2e.test_multiprocess import eventually
from tests.slack_harness import FAST_LIMITS, SECRET, SlackHarness, until

pytestmark = pytest.mark.timeout(60)

SLOW: SlackLimits = SlackLimits(time_scale=0.5)
"""The asking process's limits: a post in the channel every two seconds, so the second
question's post waits its turn long enough for another process to take it up."""


def one(question: str) -> dict[str, Any]:
    return {"questions": [{"id": "q", "question": question, "options": [{"label": "Yes"}]}]}


def request_of(message: Any) -> str:
    request_id: str = message.metadata["event_payload"]["request_id"]
    return request_id


@pytest.mark.slow
async def test_sqlite_a_post_taken_over_by_another_process_is_asked_once(
    sqlite_store_factory: Any,
) -> None:
    await taken_over_is_asked_once(await sqlite_store_factory(), await sqlite_store_factory())


@pytest.mark.slow
async def test_redis_a_post_taken_over_by_another_process_is_asked_once(
    redis_store_factory: Any,
) -> None:
    await taken_over_is_asked_once(await redis_store_factory(), await redis_store_factory())


async def taken_over_is_asked_once(mine: Any, other_store: Any) -> None:
    async with SlackHarness(store=mine, limits=SLOW) as h:
        detached = AskOptions(detached=True)
        first = h.ask(one("Deploy 2.3.1?"), options=detached)
        second = h.ask(one("Rotate the keys?"), options=detached)
        shown = await h.posted()
        (waiting,) = await eventually(
            lambda: _others(mine, request_of(shown)), what="the second question stored"
        )
        await until(lambda: h.client.scheduler.is_queued(waiting.id), what="its post queued")
        assert len(h.top_messages()) == 1  # its turn has not come yet
        # It passes to another process while it waits: released, then claimed at start.
        assert await h.provider.release(waiting.id) is not None
        client = web_client(h.slack.token, base_url=h.slack.url, limits=FAST_LIMITS)
        try:
            other = SlackQuestionProvider(
                await build_app(client, signing_secret=SECRET), channel=h.channel, store=other_store
            )
            assert waiting.id in [s.id for s in await other.resume()]
            taken = await until(
                lambda: next((m for m in h.top_messages() if request_of(m) == waiting.id), None),
                what="the taken-up question posted by the other process",
            )
            # Answered: the asking process's ask returns, its skipped post done by then.
            await h.click(taken, h.alice, text="Yes")
            answer = await second
            assert answer.answers
            await h.click(shown, h.alice, text="Yes")
            await first
            await other.aclose(grace=1.0)
        finally:
            await close_web_client(client)
        assert len(h.top_messages()) == 2  # each question shown once
        trail = await mine.events(waiting.id)
        asked = [e for e in trail if e.kind == "asked"]
        assert len(asked) == 1, [e.dump() for e in trail]
        (event,) = asked
        assert event.detail["channel"] == h.channel
        assert event.detail["messageTs"] == taken.ts
        assert event.detail["permalink"].endswith(f"/p{taken.ts.replace('.', '')}")
        assert [e.kind for e in trail] == ["asked", "answered"]
        # The question shown by its own process keeps its one asked event too.
        assert [e.kind for e in await mine.events(request_of(shown))] == ["asked", "answered"]


async def test_a_question_that_ended_before_its_post_went_out_still_has_its_asked_event(
    sqlite_store: Any,
) -> None:
    # docs/operations/audit.md: the asked event of a question that ended before its message
    # went out is appended on its own, after the ending, by the process that was to post it.
    async with SlackHarness(store=sqlite_store, limits=SLOW) as h:
        first = h.ask(one("Deploy 2.3.1?"))
        shown = await h.posted()
        waiting = h.ask(one("Rotate the keys?"), options=AskOptions(request_id="rqunshown01"))
        await until(lambda: h.client.scheduler.is_queued("rqunshown01"), what="the post queued")
        await h.provider.abort("rqunshown01", "The agent moved on.")
        with pytest.raises(UserQuestionError):
            await waiting
        await until(lambda: not h.client.scheduler.depths(), within=10, what="its turn to pass")
        await eventually(
            lambda: _kinds(sqlite_store, "rqunshown01", ["aborted", "asked"]),
            what="the asked event appended after the ending",
        )
        await h.click(shown, h.alice, text="Yes")
        await first
        assert len(h.top_messages()) == 1


async def _kinds(store: Any, request_id: str, kinds: list[str]) -> bool:
    return [e.kind for e in await store.events(request_id)] == kinds


async def _others(store: Any, request_id: str) -> list[Any]:
    """The open records other than ``request_id``'s."""
    return [r for r in await store.open_records() if r.id != request_id]
