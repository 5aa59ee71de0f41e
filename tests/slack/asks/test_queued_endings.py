"""A question that ends while its post still waits for Slack's rate limits.

docs/operations/rate-limits.md: a question aborted or ended while its post waits in the
queue is never posted. Its deadline counts from its creation, queued or not: it fails
``ASK_TIMEOUT`` at its deadline, its waiters (the POST, a long-poll, an in-process
``ask()``) learn it then, and the post is taken off the queue. A ``DELETE`` of a queued
question ends its POST at once and frees its slot in the open-question caps.

The bot runs with slowed limits (``slack_rate_scale=0.1``: one post per channel every ten
seconds), so a second question's post waits about ten seconds for its turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.slack.model import ids
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.stores import MemoryPendingStore
from bot.questions import AskOptions, UserQuestionError
from bot.questions.errors import ASK_ABORTED, ASK_TIMEOUT
from tests.api.test_gateway import DEPLOY, Bed, running
from tests.slack_harness import SlackHarness, until

pytestmark = pytest.mark.timeout(60)

SLOW = 0.1
"""Slack's limits ten times slower: the channel's next post waits about ten seconds."""


async def queued(bed: Bed, key: str, body: dict[str, Any]) -> tuple[str, asyncio.Future[Any]]:
    """POST ``body`` with Idempotency-Key ``key`` (in the background) once a first question
    took the channel's turn; its id and the POST, once the API reads it ``queued``."""
    status, _ = await bed.ask(DEPLOY)
    assert status == 201
    posting = asyncio.ensure_future(bed.ask(body, headers={"Idempotency-Key": key}))
    request_id = ids.key_request_id(f"api:{key}")

    async def is_queued() -> bool:
        status, polled = await bed.get(request_id)
        return status == 200 and polled["state"] == "queued"

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while not await is_queued():
        assert loop.time() < deadline, "never seen queued"
        assert not posting.done(), posting.result()
        await asyncio.sleep(0.02)
    return request_id, posting


async def queue_of(bed: Bed) -> dict[str, int]:
    """``/healthz``'s ``webApiQueue``: the Web API calls still waiting, per method."""
    async with bed.http.get("/healthz") as response:
        depths: dict[str, int] = (await response.json())["webApiQueue"]
    return depths


@pytest.mark.slow
async def test_a_queued_question_times_out_at_its_deadline_and_is_never_posted() -> None:
    async with running(slack_rate_scale=SLOW) as bed:
        loop = asyncio.get_running_loop()
        began = loop.time()
        request_id, posting = await queued(bed, "expires", {**DEPLOY, "timeout": 1})
        polling = asyncio.ensure_future(bed.get(request_id, wait=30))
        try:
            # The POST and the long-poll learn the ending at its deadline, not at the turn.
            status, problem = await asyncio.wait_for(posting, 1 + 2)
            assert (status, problem["code"]) == (409, ASK_TIMEOUT), problem
            status, polled = await asyncio.wait_for(polling, 1)
        finally:
            polling.cancel()
        assert (status, polled["state"], polled["error"]["code"]) == (200, "failed", ASK_TIMEOUT)
        assert "message" not in polled
        assert loop.time() - began < 1 + 2 + 1  # (the first question's POST included)
        # Taken off the queue: nothing left to send, and the channel has only the first.
        assert await queue_of(bed) == {}
        await until(lambda: bed.runtime.gateway.running == 1, within=2, what="the ask to end")
        await asyncio.sleep(0.5)
        assert len(bed.messages()) == 1
        assert bed.slack.calls.count("chat.postMessage") == 1


@pytest.mark.slow
async def test_deleting_a_queued_question_ends_its_post_at_once_and_frees_its_slot() -> None:
    # Two open questions at most: the first one (posted) and the queued one.
    async with running(slack_rate_scale=SLOW, max_open_questions=2) as bed:
        request_id, posting = await queued(bed, "deleted", DEPLOY)
        async with bed.http.delete(f"/v1/questions/{request_id}") as response:
            assert response.status == 200
            assert (await response.json())["state"] == "aborted"
        # The POST answers now, with the ending (an aborted question was never posted).
        status, problem = await asyncio.wait_for(posting, 2)
        assert (status, problem["code"]) == (409, ASK_ABORTED), problem
        await until(lambda: bed.runtime.gateway.running == 1, within=2, what="the ask to end")
        assert await queue_of(bed) == {}
        # Its slot is free: a question for another channel is taken (and posted) at once.
        other = bed.slack.workspace.add_channel("elsewhere").id
        status, taken = await asyncio.wait_for(
            bed.ask({**DEPLOY, "destination": {"channel": other}}), 5
        )
        assert status == 201, taken
        await asyncio.sleep(0.5)
        assert len(bed.messages()) == 1  # the aborted question never reached the channel
        assert bed.slack.calls.count("chat.postMessage") == 2


@pytest.mark.slow
async def test_an_in_process_ask_whose_post_waits_fails_at_its_deadline() -> None:
    async with SlackHarness(limits=SlackLimits(time_scale=SLOW)) as h:
        first = h.ask(DEPLOY)
        await h.posted()
        loop = asyncio.get_running_loop()
        began = loop.time()
        waiting = h.ask(DEPLOY, options=AskOptions(request_id="rqexpires01", timeout=1))
        scheduler = h.provider.client.scheduler  # type: ignore[attr-defined]
        await until(lambda: scheduler.is_queued("rqexpires01"), what="the post queued")
        with pytest.raises(UserQuestionError) as failed:
            await asyncio.wait_for(waiting, 1 + 2)
        assert failed.value.code == ASK_TIMEOUT
        assert loop.time() - began < 1 + 2
        assert not scheduler.depths()  # taken off the queue
        record = await h.provider.store.get("rqexpires01")
        assert record is not None and record.state == "failed" and record.message_ts is None
        # Its asked event (nothing was shown) goes in on its own, after the ending.
        kinds = [e.kind for e in await h.provider.events("rqexpires01")]
        assert kinds[-1] == "asked" and kinds.count("asked") == 1, kinds
        await asyncio.sleep(0.5)
        assert len(h.top_messages()) == 1
        first.cancel()


async def _queued_in_process(h: SlackHarness, request_id: str, **fields: Any) -> Any:
    """A first question takes the channel's turn; ``request_id``'s post then waits."""
    h.ask(DEPLOY)
    await h.posted()
    waiting = h.ask(DEPLOY, options=AskOptions(request_id=request_id), **fields)
    scheduler = h.provider.client.scheduler  # type: ignore[attr-defined]
    await until(lambda: scheduler.is_queued(request_id), what="the post queued")
    return waiting, scheduler


@pytest.mark.slow
async def test_an_in_process_ask_aborted_by_its_signal_while_queued_ends_at_once() -> None:
    """The asker's own abort signal ends a question whose post waits its turn now: the
    post is taken off the queue, never shown, and ``ask()`` raises ``ASK_ABORTED``."""
    from bot.questions.abort import AbortController

    async with SlackHarness(limits=SlackLimits(time_scale=SLOW)) as h:
        controller = AbortController()
        waiting, scheduler = await _queued_in_process(h, "rqsignal001", signal=controller.signal)
        loop = asyncio.get_running_loop()
        began = loop.time()
        controller.abort("not needed any more")
        with pytest.raises(UserQuestionError) as aborted:
            await asyncio.wait_for(waiting, 3)
        assert aborted.value.code == ASK_ABORTED
        assert loop.time() - began < 2  # not at the turn, ten seconds on
        assert not scheduler.is_queued("rqsignal001")
        record = await h.provider.store.get("rqsignal001")
        assert record is not None and record.state == "aborted" and record.message_ts is None
        assert record.error_code == ASK_ABORTED and record.note == "not needed any more"
        await asyncio.sleep(0.5)
        assert len(h.top_messages()) == 1  # only the first question was shown


@pytest.mark.slow
async def test_an_in_process_ask_cancelled_while_queued_ends_at_once() -> None:
    """Cancelling the asking task while its post waits its turn takes the post off the
    queue at once (nothing to wait for from Slack) and ends the question aborted."""
    async with SlackHarness(limits=SlackLimits(time_scale=SLOW)) as h:
        waiting, scheduler = await _queued_in_process(h, "rqcancel001")
        loop = asyncio.get_running_loop()
        began = loop.time()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, 3)
        assert loop.time() - began < 2
        assert not scheduler.is_queued("rqcancel001")
        record = await h.provider.store.get("rqcancel001")
        assert record is not None and record.state == "aborted" and record.message_ts is None
        await asyncio.sleep(0.5)
        assert len(h.top_messages()) == 1


class _SlowCreate(MemoryPendingStore):
    """``create`` of request ``rqslowcrt01`` waits until let go (a slow store write)."""

    def __init__(self, process_id: str) -> None:
        super().__init__(process_id=process_id)
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def create(self, record: Any, event: Any = None) -> bool:
        if record.id == "rqslowcrt01":
            self.entered.set()
            await self.go.wait()
        return await super().create(record, event)


@pytest.mark.slow
async def test_an_abort_between_the_ask_and_its_post_ends_the_queued_question_at_once() -> None:
    """An abort landing after ``ask()`` began but before its post started (while the record
    is written) is not missed: the question ends at once and is never shown."""
    from bot.questions.abort import AbortController

    store = _SlowCreate(process_id="p-slow")
    await store.start()
    async with SlackHarness(store=store, limits=SlackLimits(time_scale=SLOW)) as h:
        h.ask(DEPLOY)
        await h.posted()  # the channel's turn is taken: the next post waits ~10 s
        controller = AbortController()
        waiting = h.ask(
            DEPLOY, options=AskOptions(request_id="rqslowcrt01"), signal=controller.signal
        )
        await asyncio.wait_for(store.entered.wait(), 5)
        controller.abort("not needed any more")
        store.go.set()
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(UserQuestionError) as aborted:
            await asyncio.wait_for(waiting, 20)
        assert aborted.value.code == ASK_ABORTED
        assert loop.time() - began < 2  # not at the turn, ten seconds on
        await asyncio.sleep(0.5)
        assert len(h.top_messages()) == 1
    await store.close()
