"""A question whose earlier message is found again by its key has its ``asked`` event.

A bot that restarted without its records (the memory store), asked again with the same
key (a dsh host replaying its pending requests), adopts the message its predecessor posted
(found by its metadata) instead of posting a second one. The message is live, so the
question's trail says where it was asked, exactly once, like any question whose message
was posted.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slack.asks.reconcile import request_metadata
from adapters.slack.model import ids
from adapters.slack.stores import PendingStore
from bot.questions import AskOptions
from tests.e2e.test_multiprocess import eventually
from tests.slack_harness import SlackHarness

pytestmark = pytest.mark.timeout(60)

KEY = "rpc-adopted-1"


def one(question: str) -> dict[str, Any]:
    return {"questions": [{"id": "q", "question": question, "options": [{"label": "Yes"}]}]}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest) -> PendingStore:
    """The memory store (a restart loses its records) and a SQLite file."""
    chosen: PendingStore = request.getfixturevalue(f"{request.param}_store")
    return chosen


@pytest.mark.slow
async def test_an_adopted_message_gives_its_question_one_asked_event(store: PendingStore) -> None:
    request_id = ids.key_request_id(KEY)
    async with SlackHarness(store=store) as h:
        # The predecessor's message: in Slack, with the metadata naming the request.
        earlier = await h.client.chat_postMessage(
            channel=h.channel, text="Ship it?", metadata=request_metadata(request_id)
        )
        ts = str(earlier["ts"])
        h.ask(one("Ship it?"), options=AskOptions(key=KEY, label="replayed"))
        record = await eventually(
            lambda: h.provider.store.get(request_id), what="the adopted record"
        )
        assert record.message_ts == ts, "adopted, not posted again"
        assert len(h.top_messages(h.channel)) == 1
        events = await h.provider.store.events(request_id)
        asked = [event for event in events if event.kind == "asked"]
        assert len(asked) == 1, [event.kind for event in events]
        assert asked[0].detail["channel"] == h.channel
        assert asked[0].detail["messageTs"] == ts
