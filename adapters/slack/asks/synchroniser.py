"""``MessageSynchroniser``: keeps each question's Slack message in step with its record, in
``BackgroundTasks`` it tracks (the provider's background work after an ack); and the
provider's error boundary: store and transport failures become the seam's errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack.model.interactions import Origin, answers_here
from adapters.slack.model.record import PendingRecord
from adapters.slack.pacing.paced import PacedWebClient
from adapters.slack.pacing.scheduler import untagged_context
from adapters.slack.render.approval import render_record
from adapters.slack.render.blocks.message import render_stale
from adapters.slack.render.messages import (
    MODAL_NOT_OPENED,
    NO_LONGER_OPEN,
    QUESTION_FAILED,
    STORE_BUSY,
)
from adapters.slack.stores import EventFor, PendingStore, StoreConflict, StoreUnavailable, settle
from bot.questions.errors import DELIVERY_FAILED, STORE_UNAVAILABLE, UserQuestionError

SLACK_FAILURES = (SlackApiError, SlackClientError, aiohttp.ClientError, asyncio.TimeoutError)
"""What a Web API call raises when Slack refuses it or cannot be reached."""


def describe(exc: BaseException) -> str:
    """A short, secret-free account of a failure: Slack's error code, or the type and text."""
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error") if exc.response is not None else None
        return str(error or exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def question_error(exc: BaseException, what: str = QUESTION_FAILED) -> UserQuestionError:
    """``exc`` as the seam's error; ``what`` says what failed (Slack's part is appended)."""
    if isinstance(exc, UserQuestionError):
        return exc
    if isinstance(exc, StoreConflict | StoreUnavailable):
        return UserQuestionError(f"{STORE_BUSY}: {exc}", STORE_UNAVAILABLE, cause=exc)
    return UserQuestionError(f"{what}: {describe(exc)}", DELIVERY_FAILED, cause=exc)


_FINAL_RETRIES = (1.0, 3.0)
"""Pauses before the last two attempts at a final update (after slack_sdk's own retries)."""


class BackgroundTasks:
    """A set of running tasks; failures are logged, never lost, and ``drain`` waits for all."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; ``what`` names it in logs."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(coro, name=what, context=untagged_context())
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._logger.warning(
                "background task failed",
                extra={"task": task.get_name(), "error": f"{type(error).__name__}: {error}"},
            )

    async def drain(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for every task (new ones too); cancel the rest."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await asyncio.wait(set(self._tasks), timeout=remaining)
        leftover = set(self._tasks)
        for task in leftover:
            task.cancel()
        if leftover:
            await asyncio.wait(leftover)


@dataclass(slots=True)
class _Refresh:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    rendered: int | None = None
    sending: PendingRecord | None = None


class MessageSynchroniser(BackgroundTasks):
    """Brings Slack up to date with the store, off the ack path (its tasks tracked)."""

    def __init__(self, client: AsyncWebClient, store: PendingStore, logger: logging.Logger) -> None:
        super().__init__(logger)
        self._client = client
        self._paced = client if isinstance(client, PacedWebClient) else None
        self._store = store
        self._refreshing: dict[str, _Refresh] = {}
        self.on_change: Callable[[str], None] | None = None
        """Told the id of every request posted, changed or ended (App Home refreshes)."""
        self.on_gone: Callable[[PendingRecord], Awaitable[object]] | None = None
        """Given an open request whose message is gone (deleted): posts it again."""

    @property
    def refreshing_count(self) -> int:
        """Requests whose message is being refreshed right now."""
        return len(self._refreshing)

    def refresh(self, request_id: str) -> None:
        """Update the request's message from its latest stored record, in the background."""
        self.spawn(self._refresh_message(request_id), "chat.update")
        self.changed(request_id)

    async def write(
        self,
        request_id: str,
        change: Callable[[PendingRecord], PendingRecord | None],
        *,
        event: EventFor | None = None,
    ) -> PendingRecord | None:
        """Change the stored record (``settle``) and, if written, its message; the record."""
        _, written = await settle(self._store, request_id, change, event=event)
        if written is not None:
            self.refresh(request_id)
        return written

    def changed(self, request_id: str) -> None:
        """Tell ``on_change`` that a request was posted, changed or ended."""
        if self.on_change is not None:
            self.on_change(request_id)

    def show(self, record: PendingRecord) -> None:
        """Render ``record`` itself (not the store's copy) on its message, in the background."""
        if record.message_ts is not None:
            channel = record.message_channel or record.channel

            async def fields() -> dict[str, Any]:
                return _fields(record)

            update = self._update(channel, record.message_ts, fields, lambda: record)
            self.spawn(update, "chat.update (lost)")

    def note(self, origin: Origin, record: PendingRecord | None, text: str) -> None:
        """Tell the person who clicked, privately, in the message's channel, in the background."""
        channel = origin.channel or (record.message_channel if record else None)
        hook = origin.response_url
        if hook is not None and not answers_here(hook, self._client.base_url):
            self._logger.warning(
                "response_url not used: not the Slack the bot calls", extra={"user": origin.user}
            )
            hook = None
        if hook is None and channel is None:
            return
        self.spawn(self._tell(origin.user, channel, hook, text), "private note")

    async def _tell(self, user: str, channel: str | None, hook: str | None, text: str) -> None:
        if hook is not None and await self._respond(user, hook, text):
            return
        if channel is not None:  # else the failed response_url is logged: nowhere else
            await self._client.chat_postEphemeral(channel=channel, user=user, text=text)

    async def _respond(self, user: str, hook: str, text: str) -> bool:
        """POST the note to ``hook`` (ephemeral); whether Slack took it. The URL is never
        logged: it lets anyone post for 30 minutes."""
        client = AsyncWebhookClient(
            hook, timeout=self._client.timeout, session=self._client.session
        )
        try:
            sent = await client.send(text=text, response_type="ephemeral", replace_original=False)
        except SLACK_FAILURES as exc:
            error = type(exc).__name__  # its text may quote the URL
        else:
            if sent.status_code == 200:
                return True
            error = f"HTTP {sent.status_code}: {sent.body[:100]}"
        self._logger.warning("note not sent by response_url", extra={"error": error, "user": user})
        return False

    def open_modal(self, origin: Origin, record: PendingRecord, view: dict[str, Any]) -> None:
        """Open a modal now with the click's trigger (it expires 3 s after the click), on top
        of the modal clicked in; if Slack refuses, the person is told privately."""
        if origin.trigger_id:
            self.spawn(self._show(origin, record, origin.trigger_id, view), "views.open")

    async def _show(
        self, origin: Origin, record: PendingRecord, trigger_id: str, view: dict[str, Any]
    ) -> None:
        opening = self._client.views_push if origin.view_id else self._client.views_open
        try:
            await opening(trigger_id=trigger_id, view=view)
        except SLACK_FAILURES as exc:
            self._logger.warning(
                "modal not opened", extra={"error": describe(exc), "user": origin.user}
            )
            self.note(origin, record, MODAL_NOT_OPENED)

    def update_modal(self, view_id: str, view: dict[str, Any]) -> None:
        """Show ``view`` in the open modal ``view_id`` instead, in the background."""
        self.spawn(self._client.views_update(view_id=view_id, view=view), "views.update")

    def stale(self, origin: Origin) -> None:
        """A click on a request the store no longer knows: say so, and retire the message."""
        self.note(origin, None, NO_LONGER_OPEN)
        if origin.channel and origin.message_ts:
            stale = render_stale(NO_LONGER_OPEN)
            update = self._client.chat_update(
                channel=origin.channel, ts=origin.message_ts, text=stale.text, blocks=stale.blocks
            )
            self.spawn(update, "chat.update (stale)")

    async def _refresh_message(self, request_id: str) -> None:
        """Bring the Slack message up to date with the record stored when the update's turn
        comes (a newer refresh replaces a waiting one on the paced client)."""
        entry = self._refreshing.setdefault(request_id, _Refresh())
        entry.users += 1
        try:
            first = await self._store.get(request_id)
            if first is None or first.message_ts is None:
                return
            channel, ts = first.message_channel or first.channel, first.message_ts
            start = first

            def shown() -> PendingRecord:
                return entry.sending or start

            async def latest() -> dict[str, Any] | None:
                record = await self._store.get(request_id)
                if record is None or entry.rendered == record.version:
                    return None
                entry.sending = record
                return _fields(record)

            while True:
                before = entry.sending
                if not await self._update(channel, ts, latest, shown, entry.lock):
                    return
                sent = entry.sending
                if sent is None or sent is before:
                    return  # nothing new to show
                entry.rendered = sent.version
                if not sent.is_open:
                    return
                # Another process may have finished the request while an open render was on
                # its way: look once more so an open render never lands last.
                current = await self._store.get(request_id)
                if current is None or current.version == sent.version or not current.message_ts:
                    return
                channel, ts = current.message_channel or current.channel, current.message_ts
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._refreshing.pop(request_id, None)

    async def _gone(self, error: SlackApiError, record: PendingRecord) -> bool:
        """Whether ``error`` says the message of open ``record`` is gone (then posted again)."""
        gone = error.response.get("error") == "message_not_found"
        if not gone or not record.is_open or self.on_gone is None:
            return False
        self._logger.warning(
            "message of an open request is gone; posting it again", extra={"request": record.id}
        )
        await self.on_gone(record)
        return True

    async def _update(
        self,
        channel: str,
        ts: str,
        latest: Callable[[], Awaitable[dict[str, Any] | None]],
        shown: Callable[[], PendingRecord],
        lock: asyncio.Lock | None = None,
    ) -> bool:
        """``chat.update`` with ``latest()`` (``None``: nothing to send), through the paced
        client's coalescing when a refresh (``lock``); ``False``: the message was gone."""
        pauses = iter(_FINAL_RETRIES)
        while True:
            try:
                if lock is not None and self._paced is not None:
                    await self._paced.update_latest(channel, ts, latest)
                else:
                    async with lock or contextlib.nullcontext():
                        fields = await latest()
                        if fields is not None:
                            await self._client.chat_update(channel=channel, ts=ts, **fields)
                return True
            except SLACK_FAILURES as exc:
                record = shown()  # what it tried to show: a final one keeps no live buttons
                if isinstance(exc, SlackApiError) and await self._gone(exc, record):
                    return False
                pause = None if record.is_open else next(pauses, None)
                if pause is None:
                    raise
                await asyncio.sleep(pause)


def _fields(record: PendingRecord) -> dict[str, Any]:
    rendered = render_record(record)
    return {"text": rendered.text, "blocks": rendered.blocks}
