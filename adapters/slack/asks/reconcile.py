"""Finding a question's message in Slack by its metadata: a predecessor's (``adopt_predecessor``),
or one Slack stored although its post failed (``LostPosts``)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.deadlines import Crew, Part
from adapters.slack.asks.synchroniser import SLACK_FAILURES, BackgroundTasks, describe
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import UNDELIVERED
from bot.questions.errors import DELIVERY_FAILED, UserQuestionError

REQUEST_EVENT: Final = "agent_user_request"
"""The metadata ``event_type`` of this bot's request messages."""
SEARCHED: Final = 200
"""How many of the channel's latest messages are searched."""
ADOPT_WITHIN: Final = 60.0
"""Seconds after start during which a keyed request looks for its earlier message."""
READABLE: Final = ("C", "G")
"""Conversations whose history the app can read: channels, not DMs (no ``im:history``)."""

_logger = logging.getLogger("adapters.slack")
Place = tuple[str, str | None]
"""Where a search looks: a channel, and a thread in it (``None``: the top level)."""


def request_metadata(request_id: str) -> dict[str, Any]:
    """The message metadata naming ``request_id``."""
    return {"event_type": REQUEST_EVENT, "event_payload": {"request_id": request_id}}


async def read_place(client: AsyncWebClient, place: Place, oldest: float) -> dict[str, str]:
    """Request id -> ts of this bot's questions among the latest messages of ``place`` (a
    channel, and a thread in it or ``None``); a thread's replies since ``oldest``."""
    channel, thread_ts = place
    if thread_ts is None:
        response = await client.conversations_history(
            channel=channel, include_all_metadata=True, limit=SEARCHED
        )
    else:
        response = await client.conversations_replies(
            channel=channel,
            ts=thread_ts,
            oldest=f"{oldest:.6f}",
            include_all_metadata=True,
            limit=SEARCHED,
        )
    messages = response.get("messages")
    found: dict[str, str] = {}
    for message in messages if isinstance(messages, list) else []:
        metadata = message.get("metadata") if isinstance(message, dict) else None
        if isinstance(metadata, dict) and metadata.get("event_type") == REQUEST_EVENT:
            payload = metadata.get("event_payload")
            request_id = payload.get("request_id") if isinstance(payload, dict) else None
            if isinstance(request_id, str) and isinstance(message.get("ts"), str):
                found.setdefault(request_id, message["ts"])
    return found


async def posted_in(client: AsyncWebClient, place: Place, since: float) -> dict[str, str]:
    """Request id -> ts of this bot's questions in ``place`` posted since ``since`` at most;
    ``{}`` when its history cannot be read (a DM, no scope, Slack down)."""
    if not place[0].startswith(READABLE):
        return {}
    try:
        return await read_place(client, place, since - 1)
    except SLACK_FAILURES as exc:
        _logger.info(
            "cannot look for earlier messages of requests; posting them anew",
            extra={"channel": place[0], "error": repr(exc)[:200]},
        )
        return {}


async def adopt_predecessor(
    client: AsyncWebClient, record: PendingRecord, started: float
) -> PendingRecord:
    """``record`` with the message a predecessor process posted for it, if any: top-level
    requests, in the first minute after this process ``started`` (``time.monotonic``)."""
    if record.thread_ts is not None or time.monotonic() - started > ADOPT_WITHIN:
        return record
    ts = (await posted_in(client, (record.channel, None), 0.0)).get(record.id)
    if ts is None:
        return record
    return record.model_copy(update={"message_ts": ts, "message_channel": record.channel})


LOOKUPS: Final = (2.0, 10.0, 30.0, 60.0)
"""Seconds after a failed post at which its message is looked for."""
FRESH: Final = 1.0
"""Seconds during which one search of a channel answers for every lost post due for it."""
AT_ONCE: Final = 2
"""Searches running at the same time (all channels together)."""
MOST: Final = 1000
"""Lost posts looked for at the same time; more are only logged."""

RECENT: Final = 300.0
"""Seconds back a thread's replies are searched (a lost post was sent a minute ago at most)."""


def may_be_stored(exc: BaseException) -> bool:
    """Whether Slack may have stored a post that failed with ``exc`` (it timed out or lost its
    connection after the request went out)."""
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return False  # never reached Slack
    return isinstance(
        exc,
        TimeoutError
        | aiohttp.ServerDisconnectedError
        | aiohttp.ClientOSError
        | aiohttp.ClientPayloadError,
    )


def late_note(note: str | None) -> str:
    """A failed question's note once its message turns up in Slack after all."""
    prefix = f"{UNDELIVERED}: "
    cause = note[len(prefix) :] if note and note.startswith(prefix) else note
    because = f" ({cause})" if cause else ""
    return (
        f"Slack showed this question only after the bot had given up on posting it{because}; "
        "it had already failed, so it cannot be answered here"
    )


@dataclass(slots=True)
class _Search:
    started: float
    task: asyncio.Task[dict[str, str] | None]


class LostPosts(Part):
    """Looks for the messages of failed posts that Slack may have stored, and closes them."""

    def __init__(self, crew: Crew, lookups: tuple[float, ...]) -> None:
        super().__init__(crew)
        self.lookups = lookups
        """Seconds after a failed post at which its message is looked for (empty: never)."""
        self._looking = BackgroundTasks(crew.logger)
        self._searches: dict[Place, _Search] = {}
        self._slots = asyncio.Semaphore(AT_ONCE)
        self._logged: set[str] = set()
        self.searches = 0
        """Searches sent so far (``conversations.history`` / ``.replies`` calls)."""

    @property
    def looking(self) -> int:
        """Lost posts still looked for."""
        return len(self._looking)

    def look_for(self, record: PendingRecord, exc: BaseException) -> None:
        """``record``'s post failed with ``exc``: look for its message if Slack may have it."""
        if may_be_stored(exc):
            self._start(record, self._clock.now())

    async def resume(self) -> int:
        """At start: look (again) for the messages of the posts that failed in the last
        ``RECENT`` seconds, still without one (a lookup may have been stopped); how many."""
        failed: dict[str, float] = {}
        try:
            async for event in self._store.audit(self._clock.now() - RECENT):
                if event.kind == "failed" and event.detail.get("code") == DELIVERY_FAILED:
                    failed[event.request_id] = event.at
            records = await self._store.get_many(list(failed))
        except UserQuestionError as exc:
            self._once(exc.code, "cannot take up the lookups of lost posts", "the store", exc)
            return 0
        started = 0
        for record in records:
            if record is None or record.state != "failed" or record.message_ts is not None:
                continue  # gone, asked again, or its message is known
            started += self._start(record, failed[record.id])
        return started

    def _start(self, record: PendingRecord, failed_at: float) -> bool:
        """Look for ``record``'s message ``lookups`` s after ``failed_at``; whether it started."""
        if not self.lookups or not record.channel.startswith(READABLE):
            return False
        if len(self._looking) >= MOST:
            self._once("too many", "too many lost posts to look for; not looking", record.id)
            return False
        place = (record.channel, record.thread_ts)
        self._looking.spawn(self._look(record.id, place, failed_at), f"lost post {record.id}")
        return True

    async def aclose(self) -> None:
        """Stop looking (shutdown)."""
        searches = [search.task for search in self._searches.values()]
        for task in searches:
            task.cancel()
        await self._looking.drain(0)
        if searches:
            await asyncio.wait(searches)
        self._searches.clear()

    async def _look(self, request_id: str, place: Place, failed_at: float) -> None:
        try:
            last: _Search | None = None
            due = [after for after in self.lookups if failed_at + after > self._clock.now()]
            for after in due or [0.0]:
                await self._clock.sleep(max(0.0, failed_at + after - self._clock.now()))
                try:
                    record = await self._store.get(request_id)
                    if record is None or record.message_ts is not None:
                        return  # gone, or its message is known (a click on it told us)
                    last = self._search(place, last)
                    found = await asyncio.shield(last.task)
                    ts = found.get(request_id) if found is not None else None
                    if ts is not None:
                        await self._close(request_id, place[0], ts)
                        return
                except UserQuestionError as exc:  # the store: try again at the next time
                    self._once(exc.code, "cannot look for a lost post now", request_id, exc)
            self._logger.info(
                "the message of a failed post was not found in Slack",
                extra={"request_id": request_id},
            )
        finally:
            if len(self._looking) == 1:  # the last lookup: the searches are done with
                self._searches.clear()

    def _search(self, place: Place, last: _Search | None) -> _Search:
        """A search of ``place``: the one in flight or started ``FRESH`` seconds ago (unless
        it is ``last``, the one this post saw already), else a new one."""
        now = self._clock.now()
        search = self._searches.get(place)
        if (
            search is None
            or search is last
            or (search.task.done() and search.started < now - FRESH)
        ):
            search = _Search(now, asyncio.ensure_future(self._history(place)))
            self._searches[place] = search
        return search

    async def _history(self, place: Place) -> dict[str, str] | None:
        channel = place[0]
        async with self._slots:
            self.searches += 1
            try:  # a thread: only the replies of the last few minutes
                found = await read_place(self._client, place, time.time() - RECENT)
            except SLACK_FAILURES as exc:
                self._once(describe(exc), "cannot look for lost posts", channel, exc)
                return None
        self._logged.clear()  # a later failure is news again
        return found

    async def _close(self, request_id: str, channel: str, ts: str) -> None:
        """The record learns its message; the message is brought up to date with it."""

        def found(r: PendingRecord) -> PendingRecord | None:
            if r.message_ts is not None:
                return None
            failed = r.state == "failed" and r.error_code == DELIVERY_FAILED
            note = late_note(r.note) if failed else r.note
            return r.next(message_ts=ts, message_channel=channel, note=note)

        written = await self._sync.write(request_id, found)
        if written is None:
            return
        self._logger.info(
            "found the message of a failed post in Slack; %s",
            "adopted it" if written.is_open else "closed it",
            extra={"request_id": request_id, "channel": channel, "ts": ts},
        )

    def _once(self, cause: str, what: str, about: str, exc: BaseException | None = None) -> None:
        if cause in self._logged:
            return
        self._logged.add(cause)
        error = describe(exc)[:200] if exc is not None else cause
        self._logger.warning(what, extra={"about": about, "error": error})
