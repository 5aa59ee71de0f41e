"""Find a request's message again after the record was lost (a restart with the memory store)."""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.failures import SLACK_FAILURES
from adapters.slack.model.record import PendingRecord

__all__ = [
    "ADOPT_WITHIN",
    "REQUEST_EVENT",
    "SEARCHED",
    "Predecessor",
    "posted_in",
    "posted_requests",
    "read_place",
    "request_metadata",
]

REQUEST_EVENT: Final = "agent_user_request"
"""The metadata ``event_type`` of this bot's request messages."""
SEARCHED: Final = 200
"""How many of the channel's latest messages are searched."""
ADOPT_WITHIN: Final = 60.0
"""Seconds after start during which a keyed request looks for its earlier message."""
READABLE: Final = ("C", "G")
"""Conversations whose history the app's scopes can read: channels, not DMs (a DM's history
needs ``im:history``, which the manifest does not request)."""

_logger = logging.getLogger("adapters.slack")


def request_metadata(request_id: str) -> dict[str, Any]:
    """The message metadata naming ``request_id``."""
    return {"event_type": REQUEST_EVENT, "event_payload": {"request_id": request_id}}


def _request_of(message: Any) -> str | None:
    """The request id a message's metadata names, if it is one of this bot's questions."""
    metadata = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(metadata, dict) or metadata.get("event_type") != REQUEST_EVENT:
        return None
    payload = metadata.get("event_payload")
    found = payload.get("request_id") if isinstance(payload, dict) else None
    return found if isinstance(found, str) and isinstance(message.get("ts"), str) else None


def posted_requests(messages: object) -> dict[str, str]:
    """Request id -> ts of this bot's questions among ``messages`` (a history's list)."""
    found: dict[str, str] = {}
    for message in messages if isinstance(messages, list) else []:
        request_id = _request_of(message)
        if request_id is not None:
            found.setdefault(request_id, str(message["ts"]))
    return found


async def read_place(client: AsyncWebClient, place: tuple[str, str | None], oldest: float) -> Any:
    """The latest messages of ``place`` (a channel, and a thread in it or ``None``), with
    their metadata; a thread's replies since ``oldest`` (they come oldest first)."""
    channel, thread_ts = place
    if thread_ts is None:
        return await client.conversations_history(
            channel=channel, include_all_metadata=True, limit=SEARCHED
        )
    return await client.conversations_replies(
        channel=channel,
        ts=thread_ts,
        oldest=f"{oldest:.6f}",
        include_all_metadata=True,
        limit=SEARCHED,
    )


async def posted_in(
    client: AsyncWebClient, place: tuple[str, str | None], since: float
) -> dict[str, str]:
    """Request id -> ts of this bot's questions in ``place`` posted since ``since`` at most;
    ``{}`` when its history cannot be read (a DM needs ``im:history``, which the app does
    not request; no scope; Slack down)."""
    if not place[0].startswith(READABLE):
        return {}
    try:
        response = await read_place(client, place, since - 1)
    except SLACK_FAILURES as exc:
        _logger.info(
            "cannot look for earlier messages of requests; posting them anew",
            extra={"channel": place[0], "error": repr(exc)[:200]},
        )
        return {}
    return posted_requests(response.get("messages"))


class Predecessor:
    """Finds the messages a predecessor process posted, during this process's first minute."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._started = time.monotonic()

    async def adopt(self, record: PendingRecord) -> PendingRecord:
        """``record`` with the message found for it, if any (top-level requests only)."""
        if record.thread_ts is not None or time.monotonic() - self._started > ADOPT_WITHIN:
            return record
        ts = (await posted_in(self._client, (record.channel, None), 0.0)).get(record.id)
        if ts is None:
            return record
        return record.model_copy(update={"message_ts": ts, "message_channel": record.channel})
