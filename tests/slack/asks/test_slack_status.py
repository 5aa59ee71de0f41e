"""The provider's status surface: what the HTTP API and the dsh client see of a question."""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack import QuestionStatus, SlackMessage
from adapters.slack.asks.status import status_of
from adapters.slack.model.record import PendingRecord
from bot.questions import AskOptions, AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.errors import (
    ASK_ABORTED,
    ASK_CANCELLED,
    ASK_TIMEOUT,
    DELIVERY_FAILED,
    UserQuestionError,
)
from tests.slack_harness import SlackHarness, until

QUESTION = {"questions": [{"id": "q", "question": "Deploy?", "options": [{"label": "Yes"}]}]}
ITEM = AskUserQuestionItem.model_validate(QUESTION["questions"][0])


def record(**fields: object) -> PendingRecord:
    return PendingRecord.model_validate(
        {"id": "r1", "owner": "p1", "questions": [ITEM], "channel": "C1", **fields}
    )


def test_an_open_question_has_no_answer_error_or_message_yet() -> None:
    status = status_of(record(created_at=5.0, label="session 1", thread_ts="1.0"))
    assert status == QuestionStatus(
        id="r1",
        state="pending",
        version=0,
        created_at=5.0,
        questions=(ITEM,),
        label="session 1",
        channel="C1",
        thread_ts="1.0",
    )
    assert status.is_open


def test_an_answered_question_carries_its_answer_who_gave_it_and_its_message() -> None:
    answer = AskUserQuestionAnswer.model_validate({"answers": [{"id": "q", "selected": ["Yes"]}]})
    status = status_of(
        record(
            state="answered",
            version=3,
            answer=answer,
            answered_by="U1",
            message_channel="C1",
            message_ts="1.2",
            finished_at=9.0,
        )
    )
    assert (status.answer, status.answered_by, status.error) == (answer, "U1", None)
    assert status.message == SlackMessage("C1", "1.2")
    assert (status.version, status.finished_at, status.is_open) == (3, 9.0, False)


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        ({"state": "cancelled"}, ASK_CANCELLED, "the user cancelled ask_user_question"),
        (
            {"state": "aborted", "note": "Cancelled by the asker."},
            ASK_ABORTED,
            "ask_user_question was aborted before the user answered",
        ),
        (
            {"state": "failed", "note": "No answer within 5 seconds.", "error_code": ASK_TIMEOUT},
            ASK_TIMEOUT,
            "No answer within 5 seconds.",
        ),
        ({"state": "failed"}, DELIVERY_FAILED, "The question failed"),
    ],
)
def test_an_ending_without_answer_carries_the_error_its_waiter_got(
    fields: dict[str, object], code: str, message: str
) -> None:
    status = status_of(record(**fields))
    assert status.answer is None
    assert isinstance(status.error, UserQuestionError)
    assert (status.error.code, status.error.message) == (code, message)


async def test_the_provider_reports_waits_for_and_aborts_a_question_by_id() -> None:
    async with SlackHarness() as h:
        rid = h.provider.request_id_for("deploy-7")
        assert rid == h.provider.request_id_for("deploy-7")
        assert h.provider.request_id_for() != h.provider.request_id_for()
        assert await h.provider.status(rid) is None
        assert await h.provider.abort(rid, "stop") is None
        task = h.ask(QUESTION, options=AskOptions(key="deploy-7"))
        message = await h.posted()
        status = await h.provider.status(rid)
        for _ in range(100):  # the ts is stored once Slack's reply to the post is in
            if status is not None and status.message is not None:
                break
            await asyncio.sleep(0.02)
            status = await h.provider.status(rid)
        assert status is not None and status.is_open and not status.queued
        assert status.message == SlackMessage(message.channel, message.ts)
        ended = asyncio.ensure_future(h.provider.wait_ended(rid))
        aborted = await h.provider.abort(rid, "Cancelled by the asker.")
        assert aborted is not None and aborted.state == "aborted"
        assert (await asyncio.wait_for(ended, 5)).state == "aborted"
        with pytest.raises(UserQuestionError) as info:
            await task
        assert info.value.code == ASK_ABORTED
        assert aborted.error is not None and aborted.error.message == info.value.message
        noted = await h.provider.add_note(rid, "Seen.")
        assert noted is not None and noted.note == "Seen." and noted.version > aborted.version
        assert h.provider.pending_count == 0


async def test_a_wait_that_is_cancelled_leaves_no_watch_behind() -> None:
    async with SlackHarness() as h:
        task = h.ask(QUESTION, options=AskOptions(key="k"))
        await h.posted()
        rid = h.provider.request_id_for("k")
        # The post's own keeper watch closes a moment after Slack has the message.
        await until(lambda: h.provider.pending_count == 1, what="the ask's watch alone")
        waiting = asyncio.ensure_future(h.provider.wait_ended(rid))
        await until(lambda: h.provider.pending_count == 2, what="the ask's watch and this one")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert h.provider.pending_count == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
