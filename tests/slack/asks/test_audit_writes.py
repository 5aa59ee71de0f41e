"""Each audit event goes in with the write it records, through the real provider.

A spy store (the memory store, noting what each write carried) shows that a posted ask's
``asked`` event is the event of the write that records its message's place, and that no
event is appended apart from a write; a reopen with a key writes its ``reopened`` event.
"""

from __future__ import annotations

import asyncio
from typing import Any

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.ids import key_request_id
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import MemoryPendingStore
from bot.questions.models import AskOptions
from tests.slack_harness import SlackHarness, answering_elements, until

QUESTION: dict[str, Any] = {
    "questions": [{"id": "q", "question": "Deploy 2.3.1?", "options": [{"label": "Yes"}]}]
}


class Spy(MemoryPendingStore):
    """The memory store, noting each write's record and event and each separate append."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[PendingRecord, AuditEvent | None]] = []
        self.apart: list[AuditEvent] = []

    async def create(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        made = await super().create(record, event)
        if made:
            self.writes.append((record, event))
        return made

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        won = await super().compare_and_set(record, event)
        if won:
            self.writes.append((record, event))
        return won

    async def append_event(self, event: AuditEvent) -> None:
        self.apart.append(event)
        await super().append_event(event)


async def test_the_asked_event_is_written_with_the_message_place() -> None:
    store = Spy()
    async with asyncio.timeout(20), SlackHarness(store=store) as h:
        task = h.ask(QUESTION, options=AskOptions(label="deploy-agent", key="deploy-2.3.1"))
        message = await h.posted()
        await until(lambda: any(e for _, e in store.writes), what="the asked event")
        await h.click(message, h.alice, text="Yes")
        assert (await task).answers[0].selected == ["Yes"]
        request_id = key_request_id("deploy-2.3.1")
        trail = await store.events(request_id)
    assert store.apart == []  # nothing appended apart from a write
    kinds = [(r.message_ts, e.kind) for r, e in store.writes if e is not None]
    assert kinds == [(message.ts, "asked"), (message.ts, "answered")]
    (placed, asked) = next((r, e) for r, e in store.writes if e is not None)
    assert asked.version == placed.version and asked.by == "deploy-agent"
    assert asked.detail["messageTs"] == message.ts and asked.detail["channel"] == h.channel
    assert asked.detail["permalink"].endswith("/p" + message.ts.replace(".", ""))
    assert [e.kind for e in trail] == ["asked", "answered"]


async def test_a_reopen_with_its_key_writes_its_reopened_event() -> None:
    store = Spy()
    options = AskOptions(key="deploy-2.3.2")
    async with asyncio.timeout(20), SlackHarness(store=store) as h:
        first = h.ask(QUESTION, options=options)
        message = await h.posted()
        await h.click(message, h.alice, text="Yes")
        await first
        again = h.ask(QUESTION, options=AskOptions(key="deploy-2.3.2", note="asked again"))
        await until(lambda: h.provider.pending_count == 1, what="the ask to wait again")
        await until(lambda: answering_elements(h.current(message).blocks), what="buttons again")
        await h.click(message, h.bob, text="Yes")
        await again
        trail = await store.events(key_request_id("deploy-2.3.2"))
    assert store.apart == []
    assert [(e.kind, e.by) for e in trail] == [
        ("asked", None),
        ("answered", h.alice),
        ("reopened", None),
        ("answered", h.bob),
    ]
    reopened = trail[2]
    assert reopened.detail == {"reason": "asked again"}
    assert reopened in [e for _, e in store.writes]  # it came with a write (an equal copy)
