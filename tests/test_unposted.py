"""A question's record written to before its post saved the message's ts (issue 14).

A note or a release written while the post is on its way (waiting its turn, or Slack slow
to answer) is shown on the message once the post's ts is stored: the post's render is
older than the record by then.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.slack_harness import SlackHarness, all_text, until

pytestmark = pytest.mark.timeout(60)

SLOW_STORED: dict[str, Any] = {"method": "chat.postMessage", "kind": "slow_stored", "delay": 1.0}


def one(question: str = "Deploy 2.3.1?") -> dict[str, Any]:
    return {"questions": [{"id": "q", "question": question, "options": [{"label": "Yes"}]}]}


async def test_a_note_written_before_the_ts_is_stored_is_shown_on_the_message() -> None:
    async with SlackHarness() as h:
        h.slack.faults.add(**SLOW_STORED)  # stored at once, answered a second later
        h.ask(one())
        message = await h.posted()
        (record,) = await h.provider.store.open_records()
        assert record.message_ts is None  # the post has not come back yet
        await h.provider.add_note(record.id, "Asked again by the nightly job.")
        await until(
            lambda: "Asked again by the nightly job." in all_text(h.current(message).blocks),
            what="the note on the message",
        )
        stored = await h.provider.store.get(record.id)
        assert stored is not None and stored.message_ts == message.ts and stored.is_open
