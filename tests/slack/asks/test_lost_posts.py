"""Issue 15, finding 9: a post that failed but that Slack stored all the same is found by its
message metadata and closed (reconcile.py), with nobody clicking it.

The bot's client gives up after ``client_timeout`` seconds; the stand-in's ``slow_stored``
fault stores the message at once and answers later, as Slack sometimes does. Lookups run
a fraction of a second after the failure here (``lookups``); in service, 2 s to a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from adapters.slack.asks.reconcile import may_be_stored
from adapters.slack.clicks.bolt_app import build_app
from adapters.slack.provider import SlackQuestionProvider
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions
from tests.conftest import SqliteStoreFactory
from tests.slack_harness import SECRET, SlackHarness, all_text, interactive_elements, until

pytestmark = pytest.mark.timeout(60)

QUICK: dict[str, Any] = {"client_timeout": 0.5, "lookups": (0.05, 0.2, 0.4)}
SLOW_STORED: dict[str, Any] = {"method": "chat.postMessage", "kind": "slow_stored", "delay": 1.0}


def one(question: str = "Deploy 2.3.1?") -> dict[str, Any]:
    return {"questions": [{"id": "q", "question": question, "options": [{"label": "Yes"}]}]}


async def failed(task: asyncio.Task[Any]) -> UserQuestionError:
    with pytest.raises(UserQuestionError) as caught:
        await task
    assert caught.value.code == "DELIVERY_FAILED", caught.value
    return caught.value


def request_of(message: Any) -> str:
    """The request id the message's metadata names (every question's message has it)."""
    assert message.metadata is not None, "a question message without metadata"
    request_id: str = message.metadata["event_payload"]["request_id"]
    return request_id


@pytest.mark.slow
async def test_a_stored_post_that_timed_out_is_closed_with_nobody_clicking() -> None:
    async with SlackHarness(**QUICK) as h:
        h.slack.faults.add(**SLOW_STORED)
        error = await failed(h.ask(one()))
        assert "TimeoutError" in error.message
        (message,) = h.top_messages()  # Slack has it, with live buttons
        assert interactive_elements(message.blocks)
        await until(
            lambda: not interactive_elements(h.current(message).blocks),
            what="the stored message to be closed",
        )
        record = await h.provider.store.get(request_of(message))
        assert record is not None and record.state == "failed"
        assert record.error_code == "DELIVERY_FAILED"
        assert (record.message_channel, record.message_ts) == (message.channel, message.ts)
        shown = all_text(h.current(message).blocks)
        assert "Failed" in shown and "given up on posting it" in shown, shown
        await until(lambda: h.provider.lost_posts.looking == 0, what="the lookups to end")
        assert h.provider.lost_posts.searches == 1  # found at the first lookup


@pytest.mark.slow
async def test_one_search_of_a_channel_serves_every_post_lost_at_once() -> None:
    async with SlackHarness(**QUICK) as h:
        h.slack.faults.add(**SLOW_STORED, count=3)
        tasks = [h.ask(one(f"Question {n}?")) for n in range(3)]
        for task in tasks:
            await failed(task)
        messages = h.top_messages()
        assert len(messages) == 3
        await until(
            lambda: all(not interactive_elements(h.current(m).blocks) for m in messages),
            what="every stored message to be closed",
        )
        assert h.provider.lost_posts.searches == 1
        assert h.slack.calls.count("conversations.history") == 1


@pytest.mark.slow
async def test_a_stored_post_in_a_thread_is_found_among_the_replies() -> None:
    async with SlackHarness(**QUICK) as h:
        ws = h.slack.workspace
        parent = ws.post(ws.channel(h.channel), text="Release 2.3.1", blocks=[])
        h.slack.faults.add(**SLOW_STORED)
        await failed(h.ask(one(), options=AskOptions(channel=h.channel, thread_ts=parent.ts)))
        (message,) = [
            m for m in ws.messages[h.channel] if m.thread_ts == parent.ts and m is not parent
        ]
        await until(
            lambda: not interactive_elements(h.current(message).blocks),
            what="the stored reply to be closed",
        )
        assert h.slack.calls.count("conversations.replies") == 1
        assert h.slack.calls.count("conversations.history") == 0


@pytest.mark.slow
async def test_a_post_that_was_never_stored_is_looked_for_then_left() -> None:
    async with SlackHarness(**QUICK) as h:
        # The connection drops before the stand-in makes the call (every retry too).
        h.slack.faults.add(method="chat.postMessage", kind="drop", count=3)
        error = await failed(h.ask(one()))
        assert "ServerDisconnectedError" in error.message
        assert h.top_messages() == []
        await until(lambda: h.provider.lost_posts.looking == 0, what="the lookups to end")
        assert h.provider.lost_posts.searches == len(QUICK["lookups"])
        await asyncio.sleep(0.5)  # past the last lookup time: nothing more is sent
        assert h.slack.calls.count("conversations.history") == len(QUICK["lookups"])
        assert h.slack.calls.count("chat.update") == 0


async def test_a_refused_post_is_not_looked_for() -> None:
    async with SlackHarness(**QUICK) as h:
        await failed(h.ask(one(), options=AskOptions(channel="C_DOES_NOT_EXIST")))
        assert h.provider.lost_posts.looking == 0
        await asyncio.sleep(0.3)
        assert h.slack.calls.count("conversations.history") == 0


@pytest.mark.slow
async def test_a_stored_post_in_a_dm_is_not_looked_for_without_im_history() -> None:
    async with SlackHarness(**QUICK) as h:
        h.slack.faults.add(**SLOW_STORED)
        await failed(h.ask(one(), options=AskOptions(channel=h.alice)))
        assert h.provider.lost_posts.looking == 0
        await asyncio.sleep(0.5)
        assert h.slack.calls.count("conversations.history") == 0


@pytest.mark.slow
async def test_a_failing_search_is_logged_once_and_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No slack_sdk retries: each lookup is one call, the first two refused with a 500.
    async with SlackHarness(**QUICK, retry=False) as h:
        h.slack.faults.add(**SLOW_STORED)
        h.slack.faults.add(method="conversations.history", kind="server_error", count=2)
        with caplog.at_level(logging.INFO, logger="adapters.slack"):
            await failed(h.ask(one()))
            (message,) = h.top_messages()
            await until(
                lambda: not interactive_elements(h.current(message).blocks),
                what="the stored message to be closed at the third lookup",
            )
        statuses = [c.status for c in h.slack.calls("conversations.history")]
        assert statuses == [500, 500, 200]
        refusals = [r for r in caplog.records if r.getMessage() == "cannot look for lost posts"]
        assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING
        assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.slow
async def test_a_record_reopened_before_its_message_turns_up_adopts_it() -> None:
    async with SlackHarness(client_timeout=0.5, lookups=(0.6,)) as h:
        h.slack.faults.add(**SLOW_STORED)
        await failed(h.ask(one(), options=AskOptions(key="deploy-2.3.1")))
        (message,) = h.top_messages()
        # Asked again with its key and a note: the failed request is reopened, open now.
        again = h.ask(one(), options=AskOptions(key="deploy-2.3.1", note="asked again"))
        request_id = request_of(message)
        await until(lambda: h.provider.pending_count == 1, what="the second ask to wait")
        await until(
            lambda: "asked again" in all_text(h.current(message).blocks),
            what="the message to be adopted",
        )
        assert interactive_elements(h.current(message).blocks)
        record = await h.provider.store.get(request_id)
        assert record is not None and record.is_open and record.message_ts == message.ts
        await h.click(message, h.alice, text="Yes")
        assert (await again).answers[0].selected == ["Yes"]
        assert len(h.top_messages()) == 1


@contextlib.asynccontextmanager
async def next_bot(
    h: SlackHarness, store_factory: SqliteStoreFactory, lookups: tuple[float, ...]
) -> AsyncIterator[SlackQuestionProvider]:
    """Another bot process on the same store file and Slack, started (``resume``)."""
    store = await store_factory()
    app = await build_app(h.client, signing_secret=SECRET)
    provider = SlackQuestionProvider(app, store=store, channel=h.channel, lookups=lookups)
    try:
        await provider.resume()
        yield provider
    finally:
        await provider.aclose(grace=1)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lookups", "restart_after"),
    [((0.3, 0.6), 0.0), ((0.05,), 0.3)],
    ids=["lookups-still-due", "every-lookup-past"],
)
async def test_a_restart_mid_lookup_takes_it_up_and_closes_the_stored_post(
    sqlite_store_factory: SqliteStoreFactory, lookups: tuple[float, ...], restart_after: float
) -> None:
    # The first bot stops before its lookup (30 s away); the next one, another process on
    # the same store file, finds the failure in the audit trail and looks for the post:
    # when its lookup times are still to come, then; when all are past, at once.
    first = await sqlite_store_factory()
    async with SlackHarness(store=first, client_timeout=0.5, lookups=(30.0,)) as h:
        h.slack.faults.add(**SLOW_STORED)
        await failed(h.ask(one()))
        (message,) = h.top_messages()  # Slack has it, with live buttons
        assert h.provider.lost_posts.looking == 1
        await h.provider.aclose(grace=1)  # the bot stops; its lookup with it
        assert h.provider.lost_posts.looking == 0
        await asyncio.sleep(restart_after)
        assert interactive_elements(h.current(message).blocks)

        async with next_bot(h, sqlite_store_factory, lookups) as again:
            # Taken up: still looking, or (every lookup time past: it looks at once) done
            # looking already by the time its start returns, on a busy machine.
            assert again.lost_posts.looking == 1 or again.lost_posts.searches >= 1
            await until(
                lambda: not interactive_elements(h.current(message).blocks),
                what="the stored message to be closed by the next bot",
            )
            record = await again.store.get(request_of(message))
            assert record is not None and record.state == "failed"
            assert (record.message_channel, record.message_ts) == (message.channel, message.ts)
            assert "given up on posting it" in all_text(h.current(message).blocks)
            assert again.lost_posts.searches == 1


@pytest.mark.slow
async def test_a_restart_does_not_look_for_a_post_whose_message_is_known_or_a_refused_one(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    first = await sqlite_store_factory()
    async with SlackHarness(store=first, client_timeout=0.5, lookups=(0.05,)) as h:
        h.slack.faults.add(**SLOW_STORED)
        await failed(h.ask(one()))
        await until(lambda: h.provider.lost_posts.looking == 0, what="the message found")
        await failed(h.ask(one(), options=AskOptions(channel="C_DOES_NOT_EXIST")))
        searches = h.slack.calls.count("conversations.history")
        async with next_bot(h, sqlite_store_factory, (0.05,)) as again:
            # The first is closed already; the refused one is looked for once (its channel
            # reads like one), found nowhere, and left (a busy machine may have done so by
            # the time the next bot's start returns).
            assert again.lost_posts.looking == 1 or again.lost_posts.searches >= 1
            await until(lambda: again.lost_posts.looking == 0, what="the lookup to end")
            assert h.slack.calls.count("conversations.history") == searches + 1


@pytest.mark.parametrize(
    ("exc", "stored"),
    [
        (TimeoutError(), True),
        (aiohttp.ServerDisconnectedError(), True),
        (aiohttp.ClientPayloadError("cut"), True),
        (aiohttp.ClientConnectorError(None, OSError(111, "refused")), False),
        (aiohttp.ConnectionTimeoutError(), False),
        (ValueError(), False),
    ],
)
def test_only_failures_after_the_request_went_out_may_have_stored_it(
    exc: BaseException, stored: bool
) -> None:
    assert may_be_stored(exc) is stored
