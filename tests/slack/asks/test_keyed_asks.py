"""A request asked again under its idempotency key (a dsh replay: ``dsh:<eventId>``) attaches
to the one already asked, whatever became of it, instead of posting twice.

Open, it is waited on again (and owned by the process that waits); ended, asking with a note
reopens the same message (the host still waits), asking without one gives its ending; two
asks racing under one key post once. The provider end to end: the Slack stand-in, a real
bolt app, signed clicks.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.slack import Released, WaitReleased
from adapters.slack.model.ids import key_request_id
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import MemoryPendingStore, PendingStore
from bot.questions.abort import AbortController
from bot.questions.errors import ASK_ABORTED, UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionRequest
from tests.slack_harness import SlackHarness, all_text, answering_elements, until

pytestmark = pytest.mark.timeout(30)

KEY = "dsh:event-1"
QUESTION: dict[str, Any] = {
    "questions": [{"id": "q", "question": "Deploy 2.3.1?", "options": [{"label": "Yes"}]}]
}
AGAIN = "The harness is still waiting for an answer to this question."


class RacingStore(MemoryPendingStore):
    """The in-memory store, each read taking a moment: two asks both find the key unused."""

    async def get(self, request_id: str) -> PendingRecord | None:
        await asyncio.sleep(0.05)
        return await super().get(request_id)


async def owned(store: PendingStore, request_id: str) -> PendingRecord:
    """The stored record once some process owns it."""
    for _ in range(500):
        record = await store.get(request_id)
        if record is not None and record.owner is not None:
            return record
        await asyncio.sleep(0.01)
    raise AssertionError("no process took the request up")


async def test_asked_again_with_a_note_an_ended_request_reopens_its_message() -> None:
    async with SlackHarness() as h:
        asking = h.ask(QUESTION, options=AskOptions(key=KEY))
        message = await h.posted()
        for time in (1, 2):  # closed as gone and replayed late, twice
            note = f"{AGAIN} ({time})"
            await h.provider.abort(key_request_id(KEY), "The harness no longer has this question.")
            with pytest.raises(UserQuestionError) as ended:
                await asking
            assert ended.value.code == ASK_ABORTED
            asking = h.ask(QUESTION, options=AskOptions(key=KEY, note=note))
            await until(
                lambda note=note: (
                    answering_elements(h.current(message).blocks)
                    and note in all_text(h.current(message).blocks)
                ),
                what="the same message, open again",
            )
        await h.click(message, h.alice, text="Yes")
        assert (await asyncio.wait_for(asking, 5)).to_wire()["answers"][0]["selected"] == ["Yes"]
        assert h.slack.calls.count("chat.postMessage") == 1


async def test_asked_again_without_a_note_an_answered_request_gives_its_answer() -> None:
    async with SlackHarness() as h:
        first = h.ask(QUESTION, options=AskOptions(key=KEY))
        message = await h.posted()
        await h.click(message, h.alice, text="Yes")
        answer = (await asyncio.wait_for(first, 5)).to_wire()
        again = await asyncio.wait_for(h.ask(QUESTION, options=AskOptions(key=KEY)), 2)
        assert again.to_wire() == answer
        await asyncio.sleep(0.05)
        assert not answering_elements(h.current(message).blocks)  # not reopened
        assert h.slack.calls.count("chat.postMessage") == 1


async def test_two_asks_racing_under_one_key_post_once() -> None:
    async with SlackHarness(store=RacingStore()) as h:
        first = h.ask(QUESTION, options=AskOptions(key=KEY))
        second = h.ask(QUESTION, options=AskOptions(key=KEY))
        message = await h.posted()
        await asyncio.sleep(0.2)
        assert h.slack.calls.count("chat.postMessage") == 1
        await h.click(message, h.alice, text="Yes")
        answers = await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert answers[0].to_wire() == answers[1].to_wire()


async def test_a_released_request_asked_again_is_owned_by_the_process_that_waits() -> None:
    async with SlackHarness() as h:
        controller = AbortController()
        request = AskUserQuestionRequest.model_validate(QUESTION)
        request.options, request.signal = AskOptions(key=KEY), controller.signal
        first = h.ask(request)
        message = await h.posted()
        await h.provider.release(key_request_id(KEY), "The bot is restarting.")
        controller.abort(Released())  # as a stopping bot leaves it for the next one
        with pytest.raises(WaitReleased):
            await first
        store = h.provider.store
        assert (released := await store.get(key_request_id(KEY))) and released.owner is None
        second = h.ask(QUESTION, options=AskOptions(key=KEY))
        record = await owned(store, key_request_id(KEY))
        assert record.owner == store.process_id and record.is_open
        await h.click(message, h.alice, text="Yes")
        assert (await asyncio.wait_for(second, 5)).to_wire()["answers"][0]["selected"] == ["Yes"]
        assert h.slack.calls.count("chat.postMessage") == 1
