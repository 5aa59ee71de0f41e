"""``AskLifecycle``: one request's life in Slack: store, post, wait, end (endings.py).

``ask()`` stores the pending record and registers its watch *before* posting, so a very
fast click finds both; then it posts the message and waits on the watch, the request's
abort signal and the timeout, whichever comes first. Every way out ends the record
(answered, cancelled, aborted or failed) and closes the watch; every failure leaves as
the seam's ``UserQuestionError`` (failures.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import ids
from adapters.slack.approval_blocks import render_record
from adapters.slack.audit import asked_event, event_for, permalink
from adapters.slack.blocks import Rendered
from adapters.slack.deadlines import Clock, SystemClock, keep_deadlines, schedule
from adapters.slack.endings import Endings, Released, lost_record, outcome
from adapters.slack.failures import SLACK_FAILURES, question_error, settle
from adapters.slack.messages import (
    ABORTED_MESSAGE,
    CANCELLED_BY_ASKER,
    SHUTDOWN_NOTE,
    SHUTTING_DOWN,
    UNDELIVERED,
    UNDELIVERED_REST,
    no_answer_within,
)
from adapters.slack.paced import NotSent, only_if
from adapters.slack.posted import Predecessor, request_metadata
from adapters.slack.reconcile import LostPosts
from adapters.slack.record import ApprovalView, PendingRecord
from adapters.slack.revisions import review_of
from adapters.slack.scheduler import tagged
from adapters.slack.stores import PendingStore, Watch, append_quietly
from adapters.slack.synchroniser import MessageSynchroniser
from adapters.slack.uploads import upload_text
from bot.questions import (
    AbortSignal,
    AskOptions,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    UserQuestionError,
)
from bot.questions.errors import (
    ASK_ABORTED,
    ASK_TIMEOUT,
    RECORD_LOST,
    STORE_UNAVAILABLE,
)

__all__ = ["AskDefaults", "AskLifecycle", "Destination", "DestinationHook"]


_NO_OPTIONS = AskOptions()


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request is posted: a channel id or user id (a DM), optionally in a thread."""

    channel: str
    thread_ts: str | None = None


DestinationHook = Callable[[AskUserQuestionRequest], Destination | None]
"""Chooses a destination per request (``None``: the provider's default)."""


@dataclass(slots=True)
class AskDefaults:
    """What every request gets unless its ``AskOptions`` say otherwise."""

    destination: Destination
    allowed_users: list[str] | None = None
    allowed_usergroups: list[str] | None = None
    mention: str | None = None
    choose: DestinationHook | None = None
    timeout: float | None = None
    reminders: tuple[float, ...] = ()
    escalate_after: float | None = None
    escalate_to: str | None = None

    def where(self, request: AskUserQuestionRequest, options: AskOptions) -> Destination:
        """The request's destination: its options, else the hook, else the default."""
        if options.channel:
            return Destination(options.channel, options.thread_ts)
        if self.choose is not None:
            chosen = self.choose(request)
            if chosen is not None:
                return chosen
        return self.destination


class AskLifecycle:
    """Asks in Slack and waits; ends requests (answered elsewhere, aborted, failed)."""

    def __init__(
        self,
        client: AsyncWebClient,
        store: PendingStore,
        sync: MessageSynchroniser,
        endings: Endings,
        defaults: AskDefaults,
        team_url: str | None = None,
        *,
        clock: Clock | None = None,
        logger: logging.Logger | None = None,
        lost: LostPosts | None = None,
    ) -> None:
        self._client = client
        self._store = store
        self._sync = sync
        self._endings = endings
        self.defaults = defaults
        self.clock: Clock = clock or SystemClock()
        self._logger = logger or logging.getLogger("adapters.slack")
        self._team_url = team_url
        self._inflight: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._predecessor = Predecessor(client)
        self.lost = lost or LostPosts(client, store, sync, clock=self.clock, logger=self._logger)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Post the request to Slack and wait for its outcome."""
        options = request.options or _NO_OPTIONS
        where = self.defaults.where(request, options)
        now = self.clock.now()
        timeout = options.timeout or self.defaults.timeout
        deadline = now + timeout if timeout else None
        before = options.reminders or self.defaults.reminders
        after = options.escalate_after or self.defaults.escalate_after
        escalate_to = options.escalate_to or self.defaults.escalate_to
        template = PendingRecord(
            id="-",
            owner=self._store.process_id,
            questions=list(request.questions),
            channel=where.channel,
            thread_ts=where.thread_ts,
            allowed_users=self.defaults.allowed_users,
            allowed_usergroups=self.defaults.allowed_usergroups,
            created_at=now,
            deadline=deadline,
            reminders=sorted(deadline - b for b in before if deadline and 0 < b < (timeout or 0)),
            escalate_at=now + after if after and escalate_to else None,
            escalate_to=escalate_to if after else None,
            link=options.link,
        )

        async def review() -> dict[str, Any]:
            found = await review_of(self._client, self._store, request.questions, options)
            return {"review": found[0], "revision": found[1]}

        record = await self._run(template, options, request.signal, None, review)
        return outcome(record)

    async def ask_approval(
        self,
        approval: ApprovalView,
        options: AskOptions,
        *,
        approvers: Sequence[str] | None = None,
        approver_groups: Sequence[str] | None = None,
        signal: AbortSignal | None = None,
    ) -> PendingRecord:
        """Post a tool-permission approval and wait; the record as it ended.

        The same life as a question (store, idempotency key, reopening note, abort signal,
        no timeout of the bot's own: the host has none either), shown as an approval panel.
        """
        where = self.defaults.destination
        if options.channel:
            where = Destination(options.channel, options.thread_ts)
        template = PendingRecord(
            id="-",
            owner=self._store.process_id,
            questions=[],
            approval=approval,
            channel=where.channel,
            thread_ts=where.thread_ts,
            allowed_users=list(approvers) if approvers else self.defaults.allowed_users,
            allowed_usergroups=(
                list(approver_groups) if approver_groups else self.defaults.allowed_usergroups
            ),
        )
        return await self._run(template, options, signal, None)

    async def _run(
        self,
        template: PendingRecord,
        options: AskOptions,
        signal: AbortSignal | None,
        limit: float | None,
        extra: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> PendingRecord:
        """Store, post and wait for one request (``template`` gets its id), to its end.

        ``extra``: fields the new record gets, worked out only when no record exists yet.
        """
        if self._closing:
            raise UserQuestionError(SHUTTING_DOWN, ASK_ABORTED)
        if signal is not None and signal.aborted:
            raise UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
        request_id = options.request_id or (
            ids.key_request_id(options.key) if options.key else ids.new_request_id()
        )
        if options.key or options.request_id:
            existing = await self._store.get(request_id)
            if existing is not None:
                return await self._rejoin(existing, signal, options.note, limit)
        record = template.model_copy(
            update={
                "id": request_id,
                "label": options.label,
                "mention": self.defaults.mention,
                "key": options.key,
                "note": options.note,
                **(await extra() if extra is not None else {}),
            }
        )
        rendered = render_record(record)  # raises SLACK_LIMIT before anything is stored
        if options.key:  # a restarted bot without its records: its predecessor's message?
            record = await self._predecessor.adopt(record)
        watch = self._store.watch(request_id)
        current = asyncio.current_task()
        if current is not None:
            self._inflight.add(current)
        try:
            if not await self._store.create(record):
                existing = await self._store.get(request_id)
                if existing is not None:
                    watch.close()
                    return await self._rejoin(existing, signal, None, limit)
            if record.message_ts is None:
                await self._post(record, rendered)
                placed = await self._placed(record)
                link = permalink(self._team_url, placed.message_channel, placed.message_ts)
                by = options.asked_by or options.label
                await append_quietly(self._store, asked_event(placed, by=by, link=link))
            else:  # found again: bring it up to date (open, with live buttons)
                placed = record
                self._sync.refresh(request_id)
            # The rendered blocks and the record are not needed while waiting (the store
            # has the record): keep only its JSON, should the store lose it.
            copy = placed.dump()
            del rendered, record, placed
            if options.on_posted is not None:
                options.on_posted(request_id)
            try:
                return await self._wait(request_id, watch, signal, limit)
            except UserQuestionError as exc:
                if exc.code == RECORD_LOST:
                    await self._lost(copy)
                raise
        except asyncio.CancelledError:
            # The awaiting task was cancelled (before or after Slack took the message).
            await self._endings.end_or_later(request_id, "aborted", CANCELLED_BY_ASKER, ASK_ABORTED)
            raise
        except Exception as exc:
            error = question_error(exc)
            if error is not exc:  # not ours yet: the record says why it failed
                await self._endings.end_or_later(request_id, "failed", error.message, error.code)
            elif error.code == STORE_UNAVAILABLE:
                self._endings.fail_later(request_id, error.message)
            if error is exc:
                raise
            raise error from exc
        finally:
            watch.close()
            if current is not None:
                self._inflight.discard(current)

    async def aclose(self, *, grace: float = 5.0, note: str = SHUTDOWN_NOTE) -> None:
        """Stop taking questions, end every open request of this process, let asks finish."""
        self._closing = True
        for record in await self._store.open_records(owner=self._store.process_id):
            await self._endings.end_or_later(record.id, "aborted", note, ASK_ABORTED)
        if self._inflight:  # asks still delivering: let them see the ending and finish
            await asyncio.wait(set(self._inflight), timeout=grace)

    # -- store and post -------------------------------------------------------------------

    async def _post(self, record: PendingRecord, rendered: Rendered) -> None:
        """Deliver the message; a cancelled ask still lets Slack's reply arrive first."""
        with tagged(record.id):  # the scheduler can tell while this post waits its turn
            delivery = asyncio.ensure_future(self._deliver(record, rendered))
        try:
            await asyncio.shield(delivery)
        except asyncio.CancelledError:
            # Let Slack's reply arrive so the message can be marked as cancelled.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(delivery, timeout=10)
            raise

    async def _deliver(self, record: PendingRecord, rendered: Rendered) -> None:
        try:
            # Posted only if still open when Slack's rate limits let it go: a question
            # aborted or ended while its post waited in the queue is never shown.
            with only_if(functools.partial(self._still_open, record.id)):
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
            return  # its waiter learns the ending from the store
        except SLACK_FAILURES as exc:
            self.lost.look_for(record, exc)  # Slack may have stored it all the same
            raise await self._failed(record.id, exc, UNDELIVERED) from exc
        ts = str(response["ts"])
        channel = str(response.get("channel") or record.channel)
        _, written = await settle(
            self._store,
            record.id,
            lambda r: (
                r.next(message_ts=ts, message_channel=channel) if r.message_ts is None else None
            ),
        )
        if written is not None and not written.is_open:
            self._sync.refresh(record.id)  # a click (or abort) beat us to it
        else:
            self._sync.changed(record.id)  # in Slack now: App Home lists it
        thread = record.thread_ts or ts
        for part in rendered.thread:
            try:
                await self._client.chat_postMessage(
                    channel=channel, thread_ts=thread, text="(continued)", blocks=part
                )
            except SLACK_FAILURES as exc:
                raise await self._failed(record.id, exc, UNDELIVERED_REST) from exc
        for attachment in rendered.files:
            try:
                await upload_text(self._client, attachment, channel=channel, thread_ts=thread)
            except SLACK_FAILURES as exc:
                raise await self._failed(record.id, exc, UNDELIVERED_REST) from exc

    async def _still_open(self, request_id: str) -> bool:
        record = await self._store.get(request_id)
        return record is not None and record.is_open

    async def _failed(self, request_id: str, exc: BaseException, what: str) -> UserQuestionError:
        """Record a Slack failure on the request; the error for its waiter."""
        error = question_error(exc, what)
        await self._endings.end(request_id, "failed", error.message, error.code)
        return error

    # -- wait -----------------------------------------------------------------------------

    async def _rejoin(
        self,
        record: PendingRecord,
        signal: AbortSignal | None,
        note: str | None,
        limit: float | None,
    ) -> PendingRecord:
        """Ask again with a key already used: wait on the open request, or reopen it."""
        if not record.is_open and note is not None:
            reopened = record.next(
                state="pending",
                note=note,
                answer=None,
                answered_by=None,
                answered_by_name=None,
                finished_at=None,
                error_code=None,
                owner=self._store.process_id,
            )
            if await self._store.compare_and_set(reopened):
                record = reopened
                self._sync.refresh(record.id)
        if not record.is_open:
            return record
        if record.owner != self._store.process_id:
            # Ownership follows the waiter: this process waits on it now (its earlier owner
            # stopped, released it or died), so no orphan sweep may end it.
            me = self._store.process_id
            _, adopted = await settle(
                self._store,
                record.id,
                lambda r: r.next(owner=me, note=note) if r.is_open and r.owner != me else None,
            )
            if adopted is not None:
                record = adopted
                self._sync.refresh(record.id)
        watch = self._store.watch(record.id)
        try:
            return await self._wait(record.id, watch, signal, limit)
        finally:
            watch.close()

    async def _wait(
        self, request_id: str, watch: Watch, signal: AbortSignal | None, limit: float | None
    ) -> PendingRecord:
        """Wait for the request's ending, its abort signal or the timeout, whichever is first.

        A question may wait for hours, so this holds no task of its own when there is no
        signal, and only a future (no task) for the signal when there is one.
        """
        if signal is not None and signal.aborted:
            return await self._aborted(request_id, signal.reason)
        keeper = await self._keep(request_id)
        try:
            async with asyncio.timeout(limit):
                if signal is None and keeper is None:
                    record = await watch.wait()
                else:
                    record = await self._wait_any(request_id, watch, signal, keeper)
        except TimeoutError:
            assert limit is not None
            record = await self._endings.end(
                request_id, "failed", no_answer_within(limit), ASK_TIMEOUT
            )
        finally:
            if keeper is not None:
                keeper.cancel()
        return record

    async def _placed(self, record: PendingRecord) -> PendingRecord:
        """The record as stored with its message's place (``record`` if it cannot be read:
        the audit and a lost record's message are worth no failed ask)."""
        try:
            return await self._store.get(record.id) or record
        except UserQuestionError:
            return record

    async def _lost(self, copy: str) -> None:
        """The store lost an open record: put it back as failed, and close its message."""
        last = PendingRecord.load(copy)
        tomb = lost_record(last)
        try:
            if await self._store.create(tomb):
                event = event_for(last, tomb, by=self._store.process_id)
                if event is not None:
                    await append_quietly(self._store, event)
        except UserQuestionError:
            pass  # the store is down as well: the message still says so
        self._sync.show(tomb)

    async def _keep(self, request_id: str) -> asyncio.Task[None] | None:
        """Start the deadline keeper of a request that has a schedule (deadlines.py): its
        reminders, escalation and expiry, in this process, which waits on it."""
        record = await self._store.get(request_id)
        if record is None or not record.is_open or not schedule(record):
            return None

        async def expire(rid: str) -> object:
            timeout = (record.deadline or 0) - record.created_at
            return await self._endings.end(rid, "failed", no_answer_within(timeout), ASK_TIMEOUT)

        return asyncio.ensure_future(
            keep_deadlines(request_id, self._store, self._client, expire, self.clock, self._logger)
        )

    async def _wait_any(
        self,
        request_id: str,
        watch: Watch,
        signal: AbortSignal | None,
        keeper: asyncio.Task[None] | None,
    ) -> PendingRecord:
        """The request's ending, unless its signal aborts it first; a keeper that fails
        (the store is down when the deadline comes) fails the wait with it."""
        aborted: asyncio.Future[object] = asyncio.get_running_loop().create_future()

        def on_abort(reason: object) -> None:
            if not aborted.done():
                aborted.set_result(reason)

        remove = signal.add_listener(on_abort) if signal is not None else None
        waiting: asyncio.Task[PendingRecord] = asyncio.ensure_future(watch.wait())
        contenders: set[asyncio.Future[Any]] = {waiting, aborted}
        if keeper is not None:
            contenders.add(keeper)
        try:
            while True:
                done, _ = await asyncio.wait(contenders, return_when=asyncio.FIRST_COMPLETED)
                if waiting in done:
                    return waiting.result()
                if keeper is not None and keeper in done:
                    contenders.discard(keeper)
                    error = keeper.exception()
                    if error is not None:
                        raise error
                    continue  # it expired the request: the watch sees the ending next
                break
        finally:
            if remove is not None:
                remove()
            if not waiting.done():
                waiting.cancel()
        return await self._aborted(request_id, aborted.result())

    async def _aborted(self, request_id: str, reason: object) -> PendingRecord:
        if isinstance(reason, Released):
            # The asker stops waiting, but the request stays open for whoever asks next.
            raise UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
        note = reason if isinstance(reason, str) and reason else CANCELLED_BY_ASKER
        return await self._endings.end(request_id, "aborted", note, ASK_ABORTED)
