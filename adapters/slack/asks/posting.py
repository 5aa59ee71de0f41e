"""``Poster``: posts a request's message once, and hands over at a stop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
from typing import Final

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.deadlines import Crew, Part
from adapters.slack.asks.endings import ending_error
from adapters.slack.asks.reconcile import LostPosts, request_metadata
from adapters.slack.asks.synchroniser import SLACK_FAILURES, question_error
from adapters.slack.model.audit_trail import AuditEvent, asked_event, permalink
from adapters.slack.model.record import PendingRecord
from adapters.slack.pacing.paced import NotSent, only_if
from adapters.slack.pacing.rate_limits import POST_MESSAGE
from adapters.slack.pacing.scheduler import WebApiScheduler, tagged
from adapters.slack.render.blocks.parts import Attachment, Rendered
from adapters.slack.render.messages import SHUTTING_DOWN, UNDELIVERED, UNDELIVERED_REST
from adapters.slack.stores import Watch, append_quietly, settle, until_back
from bot.questions import UserQuestionError
from bot.questions.errors import ASK_ABORTED

PLACE_RETRIES: Final = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 30.0)
"""Pauses between tries at writing a posted message's place while the store is down."""


class Poster(Part):
    """Posts requests' messages (each once), hands over at a stop."""

    def __init__(self, crew: Crew, lost: LostPosts, team_url: str | None) -> None:
        super().__init__(crew)
        self._lost = lost
        self._team_url = team_url
        scheduler = getattr(crew.client, "scheduler", None)
        self._scheduler = scheduler if isinstance(scheduler, WebApiScheduler) else None
        # Detached posts not stored yet, and those of them let go to Slack.
        self._posting: dict[str, asyncio.Future[PendingRecord]] = {}
        self._sending: set[str] = set()
        self._unposted: dict[str, tuple[PendingRecord | None, bool]] = {}
        """Posts skipped because their question ended first: the ending (for the waiter), and
        whether the asked event is this process's to record."""
        self.closing = False

    # -- posting --------------------------------------------------------------------------

    async def post(self, record: PendingRecord, rendered: Rendered) -> PendingRecord:
        """Deliver the message (the record as placed); a cancelled ask still lets Slack's
        reply arrive first."""
        delivery = asyncio.ensure_future(self._deliver(record, rendered))
        if record.detached:
            self._posting[record.id] = delivery
        keeper = self._keep_while_queued(record)
        try:
            return await asyncio.shield(delivery)
        except asyncio.CancelledError:
            if delivery.cancelled() and self.closing and record.detached:  # ``hand_over``'s:
                raise UserQuestionError(SHUTTING_DOWN, ASK_ABORTED) from None  # stays open
            if not record.detached and self._withdraw(record.id):
                # Still waiting its turn: never shown, nothing to wait for from Slack.
                self._unposted[record.id] = (None, True)
            # Let Slack's reply arrive so the message can be marked as cancelled; a delivery
            # still writing its place (the store down) finishes in the background.
            if not (await asyncio.wait({delivery}, timeout=10))[0]:
                self._sync.spawn(_settled(delivery), "placing a posted message")
            raise
        finally:
            if self._posting.get(record.id) is delivery:
                del self._posting[record.id]
            if keeper is not None:  # closed before the post returns: a waiter counted
                keeper.close()  # after the post (``watch_count``) is the question's

    def hand_over(self) -> None:
        """Stop posting (shutdown): detached posts still waiting their turn are never sent
        (their waiters get ``ASK_ABORTED``, the requests stay open for the next process)."""
        self.closing = True
        for request_id, delivery in self._posting.items():
            if request_id not in self._sending:
                delivery.cancel()

    async def _deliver(self, record: PendingRecord, rendered: Rendered) -> PendingRecord:
        try:
            return await self._send(record, rendered)
        finally:
            self._sending.discard(record.id)
            self._unposted.pop(record.id, None)

    async def _send(self, record: PendingRecord, rendered: Rendered) -> PendingRecord:
        try:
            # Sent only if still open when its turn comes; the guard holds the id only (a
            # pooled connection keeps this context). Tagged: the question's ``queued``.
            guard = functools.partial(self._may_post, record.id, record.detached)
            with only_if(guard), tagged(record.id):
                response = await self._client.chat_postMessage(
                    channel=record.channel,
                    thread_ts=record.thread_ts,
                    text=rendered.text,
                    blocks=rendered.blocks,
                    metadata=request_metadata(record.id),
                    unfurl_links=False,
                    unfurl_media=False,
                )
        except NotSent:
            if record.detached and self.closing:
                raise UserQuestionError(SHUTTING_DOWN, ASK_ABORTED) from None
            # A question that ended before it was shown still gets its asked event (on its
            # own); one another process holds or posted gets it from that process's write
            # (README: the audit trail).
            ended, unshown = self._unposted.pop(record.id, (None, False))
            if unshown:
                asked = asked_event(record, by=record.asked_by, link=None)
                await append_quietly(self._store, asked)
            error = None if ended is None else ending_error(ended)
            if error is not None:  # never shown: its waiter gets the ending, not "posted"
                raise error from None
            return record  # held or posted by another process: the waiter waits on
        except SLACK_FAILURES as exc:
            # The client closed under a handed-over post: whoever takes it up looks in Slack.
            if record.detached and self.closing:
                raise UserQuestionError(SHUTTING_DOWN, ASK_ABORTED) from exc
            self._lost.look_for(record, exc)  # Slack may have stored it all the same
            raise await self._failed(record.id, exc, UNDELIVERED) from exc
        ts = str(response["ts"])
        channel = str(response.get("channel") or record.channel)

        def placed(r: PendingRecord) -> PendingRecord:
            # Posted: a detached request is owned by no process from now on.
            owner = None if r.detached else r.owner
            return r.next(
                message_ts=r.message_ts or ts,
                message_channel=r.message_channel or channel,
                owner=owner,
            )

        # The asked event goes in with the message's place, waiting out a store outage: the
        # message is live now, and a record that does not know it could never close it.
        place = functools.partial(settle, self._store, record.id, placed, event=self.asked)
        written = (await until_back(place, PLACE_RETRIES))[1]
        if written is not None and written.version != record.version + 1:
            # Written to since it was rendered (a click, an abort, a note, a release): the
            # message shows the record as it is now.
            self._sync.refresh(record.id)
        else:
            self._sync.changed(record.id)  # in Slack now: App Home lists it
        thread = record.thread_ts or ts
        try:
            for part in rendered.thread:
                await self._client.chat_postMessage(
                    channel=channel, thread_ts=thread, text="(continued)", blocks=part
                )
            for attachment in rendered.files:
                await upload_text(self._client, attachment, channel=channel, thread_ts=thread)
        except SLACK_FAILURES as exc:
            raise await self._failed(record.id, exc, UNDELIVERED_REST) from exc
        return written or record

    def asked(self, _: PendingRecord, at: PendingRecord) -> AuditEvent:
        """The ``asked`` event of ``at``, just placed in Slack (with its permalink)."""
        link = permalink(self._team_url, at.message_channel, at.message_ts)
        return asked_event(at, by=at.asked_by, link=link)

    async def _may_post(self, request_id: str, detached: bool) -> bool:
        """Whether a request's post may go now that its turn came (a detached one: while
        this process still holds it, and is not stopping)."""
        if detached and self.closing:
            return False
        current = await self._store.get(request_id)
        if current is None or not current.is_open:
            self._skipped(request_id, current, detached)
            return False
        if detached and (current.message_ts is not None or current.owner != self._store.process_id):
            return False  # found in Slack meanwhile, or taken up by another process
        self._sending.add(request_id)
        return True

    def _skipped(self, request_id: str, current: PendingRecord | None, detached: bool) -> None:
        """Note a post skipped because its question ended (``current``): the ending its waiter
        is to get, and whether its asked event is this process's to record (not if posted or
        adopted: that write carried it; nor if taken up elsewhere)."""
        if current is None or current.message_ts is None:
            me = self._store.process_id
            mine = not detached or current is None or current.owner in (None, me)
            self._unposted[request_id] = (current, mine)

    # -- while a post waits its turn ------------------------------------------------------

    def _withdraw(self, request_id: str) -> bool:
        """Take ``request_id``'s post off the queue if it still waits its turn (it fails
        ``NotSent``, as when its turn finds the question ended); whether it did."""
        if self._scheduler is None or request_id in self._sending:
            return False
        return self._scheduler.withdraw(POST_MESSAGE, request_id, NotSent(POST_MESSAGE))

    def _keep_while_queued(self, record: PendingRecord) -> Watch | None:
        """Watch for the question's ending while its post waits its turn, no task waiting
        (``None``: a client without a queue sends at once): ended first, its post is taken
        off the queue (it fails ``NotSent``) and its waiter learns the ending now."""
        if self._scheduler is None:
            return None
        watch = self._store.watch(record.id)  # (its deadline: on the shared timer)
        watch.then(functools.partial(self._dropped, record.id, record.detached))
        return watch

    def _dropped(self, request_id: str, detached: bool, ended: str | BaseException) -> None:
        if isinstance(ended, BaseException) or self.closing or request_id in self._sending:
            return  # the store out of reach (the turn's own look decides), or on its way
        self._skipped(request_id, PendingRecord.load(ended), detached)
        self._withdraw(request_id)

    async def _failed(self, request_id: str, exc: BaseException, what: str) -> UserQuestionError:
        """Record a Slack failure on the request; the error for its waiter."""
        error = question_error(exc, what)
        await self._endings.end(request_id, "failed", error.message, error.code)
        return error


async def _settled(delivery: asyncio.Future[PendingRecord]) -> None:
    """Wait for ``delivery`` (its failure was the cancelled ask's to report, not a stop's)."""
    with contextlib.suppress(Exception):
        await delivery


_UPLOAD_TIMEOUT = aiohttp.ClientTimeout(total=120.0)


async def upload_text(
    client: AsyncWebClient, attachment: Attachment, *, channel: str, thread_ts: str
) -> None:
    """Share ``attachment`` as a file in ``channel``'s thread ``thread_ts`` (not slack_sdk's
    ``files_upload_v2``: it sends raw bytes, which block the loop on a large file)."""
    data = attachment.content.encode("utf-8")
    reserved = await client.files_getUploadURLExternal(
        filename=attachment.filename, length=len(data)
    )
    url, file_id = str(reserved["upload_url"]), str(reserved["file_id"])
    shared = client.session  # else a session of its own, closed after
    async with (
        contextlib.nullcontext(shared) if shared else aiohttp.ClientSession() as session,
        session.post(url, data=io.BytesIO(data), timeout=_UPLOAD_TIMEOUT) as response,
    ):
        if response.status != 200:
            body = (await response.text())[:200]
            raise aiohttp.ClientResponseError(
                response.request_info, (), status=response.status, message=body
            )
    await client.files_completeUploadExternal(
        files=[{"id": file_id, "title": attachment.title}],
        channel_id=channel,
        thread_ts=thread_ts,
        initial_comment=attachment.comment,
    )
