"""A refresh follows the message to where another process re-posted it: a message deleted and
posted again while an update was on its way is updated there, never posted a third time."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.memory import MemoryPendingStore
from bot.questions import AskUserQuestionItem

RID = "aaaa0000bbbb1111cccc"
ITEM = AskUserQuestionItem.model_validate(
    {"id": "q", "question": "Deploy?", "options": [{"label": "Yes"}]}
)


class _Slack:
    """An unpaced client: the first update of ts 1.1 finds the message re-posted (as 2.2) by
    another process meanwhile; 1.1 is gone from then on."""

    def __init__(self, store: MemoryPendingStore) -> None:
        self.store = store
        self.updates: list[str] = []

    async def chat_update(self, *, channel: str, ts: str, **fields: Any) -> dict[str, Any]:
        self.updates.append(ts)
        if ts == "1.1" and len(self.updates) > 1:
            raise SlackApiError("gone", cast(Any, {"ok": False, "error": "message_not_found"}))
        if len(self.updates) == 1:  # meanwhile, another process posted it again
            record = await self.store.get(RID)
            assert record is not None
            moved = record.model_copy(update={"message_ts": "2.2", "version": record.version + 1})
            assert await self.store.compare_and_set(moved)
        return {"ok": True}


@pytest.mark.timeout(10)
async def test_a_refresh_updates_the_message_where_it_was_posted_again() -> None:
    store = MemoryPendingStore()
    record = {"id": RID, "questions": [ITEM], "channel": "C1", "message_ts": "1.1"}
    assert await store.create(PendingRecord.model_validate(record))
    slack = _Slack(store)
    sync = MessageSynchroniser(cast(AsyncWebClient, slack), store, logging.getLogger("test"))
    posted_again: list[PendingRecord] = []

    async def on_gone(record: PendingRecord) -> None:
        posted_again.append(record)

    sync.on_gone = on_gone
    await sync._refresh_message(RID)  # what refresh() runs in the background
    assert posted_again == []
    assert slack.updates == ["1.1", "2.2"]
