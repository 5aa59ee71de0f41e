"""``SlackQuestionProvider``: asks in Slack, resolves the pending ``ask()`` when a person answers.

One click, end to end (see listeners.py for the entry point):

1. ``ask()`` stores a pending record and registers its watch *before* posting, then posts
   the message and waits on the watch, the request's abort signal and the timeout.
2. A click arrives; the listener acks and calls ``handle_action``: parse (interactions.py),
   authorize (authorize.py), decide (transitions.py), compare-and-set (pending.py).
3. The winning write of a terminal state wakes the watch; ``ask()`` returns or raises.
   Message updates, modals and private notes run as tracked background tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import ids
from adapters.slack.authorize import NOT_ALLOWED, Gatekeeper
from adapters.slack.blocks import Rendered, render_final, render_open, render_stale
from adapters.slack.interactions import (
    Interaction,
    Origin,
    parse_block_actions,
    parse_view_submission,
)
from adapters.slack.options import current_ask_options
from adapters.slack.pending import MemoryPendingStore, PendingStore, Watch, mutate
from adapters.slack.record import PendingRecord, State
from adapters.slack.tasks import BackgroundTasks
from adapters.slack.transitions import Finish, Ignore, Invalid, Modal, Refuse, Save, decide
from bot.questions.abort import AbortSignal
from bot.questions.errors import (
    ASK_ABORTED,
    ASK_CANCELLED,
    ASK_TIMEOUT,
    DELIVERY_FAILED,
    STORE_UNAVAILABLE,
    UserQuestionError,
)
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionRequest

__all__ = ["Destination", "DestinationHook", "SlackQuestionProvider"]

ABORTED_MESSAGE = "ask_user_question was aborted before the user answered"
CANCELLED_MESSAGE = "the user cancelled ask_user_question"
SHUTDOWN_NOTE = "Interrupted: the bot shut down before anyone answered."
CANCELLED_BY_ASKER = "Cancelled: the asker stopped waiting for an answer."

_SLACK_FAILURES = (SlackApiError, SlackClientError, aiohttp.ClientError, asyncio.TimeoutError)


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request is posted: a channel id or user id (a DM), optionally in a thread."""

    channel: str
    thread_ts: str | None = None


DestinationHook = Callable[[AskUserQuestionRequest], Destination | None]
"""Chooses a destination per request (``None``: the provider's default)."""


def _slack_error(exc: BaseException) -> str:
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error") if exc.response is not None else None
        return str(error or exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def ensure_retry_handlers(client: AsyncWebClient) -> None:
    """Give ``client`` slack_sdk's retry handlers for 429s, 5xx and dropped connections."""
    present = {type(handler) for handler in client.retry_handlers}
    wanted = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        AsyncServerErrorRetryHandler(max_retry_count=2),
    ]
    for handler in wanted:
        if type(handler) not in present:
            client.retry_handlers.append(handler)


class SlackQuestionProvider:
    """A ``UserQuestionProvider`` that asks in Slack through a bolt ``AsyncApp``.

    Constructing it registers its listeners on ``app``; every Web API call goes through
    ``app.client``. Options:

    - ``channel``: default destination (channel id ``C…``/``G…``, DM id ``D…``, or a user id
      ``U…``/``W…`` for a direct message); ``thread_ts``: default thread.
    - ``allowed_users`` / ``allowed_usergroups``: who may answer (default: anyone who can
      see the message); group membership is checked at click time, cached ``usergroup_ttl``.
    - ``mention``: prepended to each question (for example ``<!here>``), from configuration.
    - ``destination``: a hook choosing a destination per request.
    - ``timeout``: seconds to wait for an answer before failing with ``ASK_TIMEOUT``.
    - ``store``: where pending records live (default: in this process).
    - ``retry``: add slack_sdk's retry handlers (429, 5xx, dropped connections) to the client.
    """

    def __init__(
        self,
        app: AsyncApp,
        *,
        channel: str,
        allowed_users: Sequence[str] | None = None,
        allowed_usergroups: Sequence[str] | None = None,
        thread_ts: str | None = None,
        mention: str | None = None,
        destination: DestinationHook | None = None,
        timeout: float | None = None,
        store: PendingStore | None = None,
        usergroup_ttl: float = 60.0,
        retry: bool = True,
        logger: logging.Logger | None = None,
    ) -> None:
        if not channel:
            raise ValueError("channel must name a Slack channel, DM or user id")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        self._app = app
        self._client: AsyncWebClient = app.client
        self._default = Destination(channel, thread_ts)
        self._allowed_users = list(allowed_users) if allowed_users else None
        self._allowed_groups = list(allowed_usergroups) if allowed_usergroups else None
        self._mention = mention
        self._destination = destination
        self._timeout = timeout
        self._store: PendingStore = store or MemoryPendingStore()
        self._logger = logger or logging.getLogger("adapters.slack")
        self._tasks = BackgroundTasks(self._logger)
        self._gate = Gatekeeper(self._client, ttl=usergroup_ttl, logger=self._logger)
        self._refreshing: dict[str, _Refresh] = {}
        self._inflight: set[asyncio.Task[Any]] = set()
        self._closing = False
        if retry:
            ensure_retry_handlers(self._client)
        if hasattr(self._store, "on_orphans"):
            # A shared store fails the requests of processes that died; say so in Slack.
            self._store.on_orphans = self._on_orphans
        from adapters.slack.listeners import register_listeners

        register_listeners(app, self)

    # -- public surface -------------------------------------------------------------------

    @property
    def store(self) -> PendingStore:
        """The pending store (shared with the HTTP API and other processes)."""
        return self._store

    @property
    def client(self) -> AsyncWebClient:
        """The Web API client every call goes through (``app.client``)."""
        return self._client

    @property
    def pending_count(self) -> int:
        """Requests this process is waiting on (zero when nothing leaks)."""
        return self._store.watch_count

    @property
    def background_count(self) -> int:
        """Background Web API tasks still running."""
        return len(self._tasks)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Post the request to Slack and wait for its outcome."""
        options = current_ask_options()
        if self._closing:
            raise UserQuestionError("the Slack provider is shutting down", ASK_ABORTED)
        if request.signal is not None and request.signal.aborted:
            raise UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
        if options.request_id:
            request_id = options.request_id
        elif options.key:
            request_id = ids.key_request_id(options.key)
        else:
            request_id = ids.new_request_id()
        if options.key or options.request_id:
            existing = await self._store.get(request_id)
            if existing is not None:
                return await self._rejoin(existing, request.signal, options.note)

        where = self._where(request, options.channel, options.thread_ts)
        record = PendingRecord(
            id=request_id,
            owner=self._store.process_id,
            questions=list(request.questions),
            channel=where.channel,
            thread_ts=where.thread_ts,
            label=options.label,
            mention=self._mention,
            key=options.key,
            allowed_users=self._allowed_users,
            allowed_usergroups=self._allowed_groups,
            note=options.note,
        )
        rendered = render_open(record)  # raises SLACK_LIMIT before anything is stored
        watch = self._store.watch(request_id)
        current = asyncio.current_task()
        if current is not None:
            self._inflight.add(current)
        try:
            if not await self._store.create(record):
                existing = await self._store.get(request_id)
                if existing is not None:
                    watch.close()
                    return await self._rejoin(existing, request.signal, None)
            delivery = asyncio.ensure_future(self._deliver(record, rendered))
            try:
                await asyncio.shield(delivery)
            except asyncio.CancelledError:
                # Let Slack's reply arrive so the message can be marked as cancelled.
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(delivery, timeout=10)
                raise
            # The rendered blocks and this first copy of the record are not needed while
            # waiting (the store has the record): free them for the hours a question waits.
            del rendered, record, delivery
            if options.on_posted is not None:
                options.on_posted(request_id)
            return await self._wait(request_id, watch, request.signal)
        except asyncio.CancelledError:
            # The awaiting task was cancelled (before or after Slack took the message).
            try:
                await self._end(request_id, "aborted", CANCELLED_BY_ASKER, ASK_ABORTED)
            except UserQuestionError as exc:  # the store is unreachable: record it later
                self._tasks.spawn(self._end_when_back(request_id, exc.message), "end later")
            raise
        except UserQuestionError as exc:
            if exc.code == STORE_UNAVAILABLE:
                self._tasks.spawn(self._end_when_back(request_id, exc.message), "end later")
            raise
        except Exception as exc:
            await self._end(request_id, "failed", f"The question failed: {exc}", DELIVERY_FAILED)
            raise
        finally:
            watch.close()
            if current is not None:
                self._inflight.discard(current)

    async def abort(self, request_id: str, note: str) -> PendingRecord | None:
        """Abort an open request from any process: its waiter raises ``ASK_ABORTED``.

        Returns the record as it ends up (the earlier outcome if it had already ended),
        or ``None`` for an unknown request.
        """
        if await self._store.get(request_id) is None:  # a store outage raises, not None
            return None
        try:
            return await self._end(request_id, "aborted", note, ASK_ABORTED)
        except UserQuestionError as exc:
            if exc.code == STORE_UNAVAILABLE:
                raise
            return None  # it vanished meanwhile (expired)

    async def add_note(self, request_id: str, note: str) -> PendingRecord | None:
        """Show ``note`` on a request's message (open or finished); ``None`` if unknown."""
        _, written = await mutate(self._store, request_id, lambda r: r.next(note=note))
        if written is not None:
            self._refresh(request_id)
        return written

    async def aclose(self, *, grace: float = 5.0, note: str = SHUTDOWN_NOTE) -> None:
        """Stop taking questions, end every open request of this process, drain tasks."""
        self._closing = True
        for record in await self._store.open_records(owner=self._store.process_id):
            await self._end(record.id, "aborted", note, ASK_ABORTED)
        if self._inflight:  # asks still delivering: let them see the ending and finish
            await asyncio.wait(set(self._inflight), timeout=grace)
        await self._tasks.drain(grace)

    async def _on_orphans(self, records: list[PendingRecord]) -> None:
        for record in records:
            self._refresh(record.id)

    # -- listeners' entry points ----------------------------------------------------------

    async def handle_action(self, body: Mapping[str, Any]) -> None:
        """Handle a ``block_actions`` payload (already acked)."""
        interaction = parse_block_actions(body)
        if interaction is None:
            return
        record = await self._store.get(interaction.request_id)
        if record is None:
            self._stale(interaction.origin)
            return
        allowed = self._gate.decide_cached(
            interaction.origin.user, record.allowed_users, record.allowed_usergroups
        )
        if allowed is None:  # needs a Web API call: do it off the ack path
            self._tasks.spawn(self._handle_slow(interaction, record), "authorize click")
            return
        await self._apply(interaction, record, allowed)

    async def handle_view(self, body: Mapping[str, Any]) -> dict[str, str] | None:
        """Handle a ``view_submission``; returns input errors to show in the modal, if any."""
        interaction = parse_view_submission(body)
        if interaction is None:
            return None
        record = await self._store.get(interaction.request_id)
        if record is None:
            return {interaction.input_block_id: "This question is no longer open."}
        allowed = await self._gate.allowed(
            interaction.origin.user, record.allowed_users, record.allowed_usergroups
        )
        if not allowed:
            return {interaction.input_block_id: NOT_ALLOWED}
        decision = await self._decide_and_write(interaction)
        if isinstance(decision, Refuse):
            return {interaction.input_block_id: _plain(decision.text)}
        if isinstance(decision, Invalid):
            return decision.errors
        return None

    # -- asking ---------------------------------------------------------------------------

    def _where(
        self, request: AskUserQuestionRequest, channel: str | None, thread_ts: str | None
    ) -> Destination:
        if channel:
            return Destination(channel, thread_ts)
        if self._destination is not None:
            chosen = self._destination(request)
            if chosen is not None:
                return chosen
        return self._default

    async def _deliver(self, record: PendingRecord, rendered: Rendered) -> None:
        try:
            response = await self._client.chat_postMessage(
                channel=record.channel,
                thread_ts=record.thread_ts,
                text=rendered.text,
                blocks=rendered.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        except _SLACK_FAILURES as exc:
            error = _slack_error(exc)
            await self._end(record.id, "failed", f"Slack did not take the question: {error}")
            raise UserQuestionError(
                f"Slack did not take the question: {error}", DELIVERY_FAILED, cause=exc
            ) from exc
        ts = str(response["ts"])
        channel = str(response.get("channel") or record.channel)
        _, written = await mutate(
            self._store,
            record.id,
            lambda r: (
                r.next(message_ts=ts, message_channel=channel) if r.message_ts is None else None
            ),
        )
        if written is not None and not written.is_open:
            self._refresh(record.id)  # a click (or abort) beat us to it
        thread = record.thread_ts or ts
        for part in rendered.thread:
            try:
                await self._client.chat_postMessage(
                    channel=channel, thread_ts=thread, text="(continued)", blocks=part
                )
            except _SLACK_FAILURES as exc:
                error = _slack_error(exc)
                note = f"Slack did not take the rest of the text: {error}"
                await self._end(record.id, "failed", note)
                raise UserQuestionError(note, DELIVERY_FAILED, cause=exc) from exc

    async def _rejoin(
        self, record: PendingRecord, signal: AbortSignal | None, note: str | None
    ) -> AskUserQuestionAnswer:
        """Ask again with a key already used: wait on the open request, or reopen it."""
        if not record.is_open and note is not None:
            reopened = record.next(
                state="pending",
                note=note,
                answer=None,
                answered_by=None,
                finished_at=None,
                error_code=None,
                owner=self._store.process_id,
            )
            if await self._store.compare_and_set(reopened):
                record = reopened
                self._refresh(record.id)
        if not record.is_open:
            return self._outcome(record)
        watch = self._store.watch(record.id)
        try:
            return await self._wait(record.id, watch, signal)
        finally:
            watch.close()

    async def _wait(
        self, request_id: str, watch: Watch, signal: AbortSignal | None
    ) -> AskUserQuestionAnswer:
        """Wait for the request's ending, its abort signal or the timeout, whichever is first.

        A question may wait for hours, so this holds no task of its own when there is no
        signal, and only a future (no task) for the signal when there is one.
        """
        if signal is not None and signal.aborted:
            return self._outcome(await self._aborted(request_id, signal.reason))
        try:
            async with asyncio.timeout(self._timeout):
                if signal is None:
                    record = await watch.wait()
                else:
                    record = await self._wait_or_abort(request_id, watch, signal)
        except TimeoutError:
            note = f"No answer within {self._timeout:g} seconds."
            record = await self._end(request_id, "failed", note, ASK_TIMEOUT)
        return self._outcome(record)

    async def _wait_or_abort(
        self, request_id: str, watch: Watch, signal: AbortSignal
    ) -> PendingRecord:
        aborted: asyncio.Future[object] = asyncio.get_running_loop().create_future()

        def on_abort(reason: object) -> None:
            if not aborted.done():
                aborted.set_result(reason)

        remove = signal.add_listener(on_abort)
        waiting: asyncio.Task[PendingRecord] = asyncio.ensure_future(watch.wait())
        try:
            contenders: set[asyncio.Future[Any]] = {waiting, aborted}
            await asyncio.wait(contenders, return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            if not waiting.done():
                waiting.cancel()
        if waiting.done() and not waiting.cancelled():
            return waiting.result()
        return await self._aborted(request_id, aborted.result())

    async def _aborted(self, request_id: str, reason: object) -> PendingRecord:
        note = reason if isinstance(reason, str) and reason else CANCELLED_BY_ASKER
        return await self._end(request_id, "aborted", note, ASK_ABORTED)

    def _outcome(self, record: PendingRecord) -> AskUserQuestionAnswer:
        if record.state == "answered" and record.answer is not None:
            return record.answer
        if record.state == "cancelled":
            raise UserQuestionError(CANCELLED_MESSAGE, ASK_CANCELLED)
        if record.state == "aborted":
            raise UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
        raise UserQuestionError(
            record.note or "the question failed", record.error_code or DELIVERY_FAILED
        )

    async def _end_when_back(self, request_id: str, note: str) -> None:
        """Record a failure the store could not take during an outage, once it is back."""
        delay = 1.0
        for _ in range(60):
            try:
                await self._end(request_id, "failed", note, STORE_UNAVAILABLE)
                return
            except UserQuestionError as exc:
                if exc.code != STORE_UNAVAILABLE:
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _end(
        self, request_id: str, state: State, note: str, code: str | None = None
    ) -> PendingRecord:
        """Move an open request to a terminal state (unless someone else already did)."""
        now = time.time()
        seen, written = await mutate(
            self._store,
            request_id,
            lambda r: (
                r.next(state=state, note=note, error_code=code, finished_at=now)
                if r.is_open
                else None
            ),
        )
        if written is not None:
            self._refresh(request_id)
            return written
        if seen is None:  # the record expired or vanished: report the ending we meant
            raise UserQuestionError(note, code or DELIVERY_FAILED)
        return seen

    # -- applying interactions ------------------------------------------------------------

    async def _handle_slow(self, interaction: Interaction, record: PendingRecord) -> None:
        allowed = await self._gate.allowed(
            interaction.origin.user, record.allowed_users, record.allowed_usergroups
        )
        await self._apply(interaction, record, allowed)

    async def _apply(self, interaction: Interaction, record: PendingRecord, allowed: bool) -> None:
        if not allowed:
            self._note(interaction.origin, record, NOT_ALLOWED)
            return
        decision = await self._decide_and_write(interaction)
        if isinstance(decision, Refuse):
            self._note(interaction.origin, record, decision.text)
            await self._adopt_message(record, interaction.origin)
            self._refresh(record.id)
        elif isinstance(decision, Modal):
            trigger = interaction.origin.trigger_id
            if trigger:
                self._tasks.spawn(
                    self._client.views_open(trigger_id=trigger, view=decision.view), "views.open"
                )

    async def _decide_and_write(self, interaction: Interaction) -> Any:
        decision: Any = Ignore()

        def change(current: PendingRecord) -> PendingRecord | None:
            nonlocal decision
            decision = decide(current, interaction, time.time())
            if isinstance(decision, Finish | Save):
                return decision.record
            return None

        seen, written = await mutate(self._store, interaction.request_id, change)
        if seen is None:
            return Refuse("This question is no longer open.")
        if written is not None and (
            isinstance(decision, Finish) or (isinstance(decision, Save) and decision.rerender)
        ):
            self._refresh(interaction.request_id)
        return decision

    async def _adopt_message(self, record: PendingRecord, origin: Origin) -> None:
        """Learn the message's ts from a click when the ask never saw Slack's reply."""
        if record.message_ts is not None or not origin.channel or not origin.message_ts:
            return
        channel, ts = origin.channel, origin.message_ts
        await mutate(
            self._store,
            record.id,
            lambda r: (
                r.next(message_channel=channel, message_ts=ts) if r.message_ts is None else None
            ),
        )

    # -- background Web API work ----------------------------------------------------------

    def _note(self, origin: Origin, record: PendingRecord | None, text: str) -> None:
        channel = origin.channel or (record.message_channel if record else None)
        if channel is None:
            return
        self._tasks.spawn(
            self._client.chat_postEphemeral(channel=channel, user=origin.user, text=text),
            "chat.postEphemeral",
        )

    def _stale(self, origin: Origin) -> None:
        text = "This question is no longer open."
        self._note(origin, None, text)
        if origin.channel and origin.message_ts:
            stale = render_stale(text)
            self._tasks.spawn(
                self._client.chat_update(
                    channel=origin.channel,
                    ts=origin.message_ts,
                    text=stale.text,
                    blocks=stale.blocks,
                ),
                "chat.update (stale)",
            )

    def _refresh(self, request_id: str) -> None:
        self._tasks.spawn(self._refresh_message(request_id), "chat.update")

    async def _refresh_message(self, request_id: str) -> None:
        """Bring the Slack message up to date with the latest stored record.

        Updates of one message are serialised and coalesced: each renders whatever the
        store holds when its turn comes, so the final state is always the last one sent.
        """
        entry = self._refreshing.setdefault(request_id, _Refresh())
        entry.users += 1
        try:
            async with entry.lock:
                while True:
                    record = await self._store.get(request_id)
                    if record is None or record.message_ts is None:
                        return
                    if entry.rendered == record.version:
                        return
                    rendered = render_open(record) if record.is_open else render_final(record)
                    # The final record must not keep live buttons: when slack_sdk's own
                    # retries are spent, try twice more, later.
                    for delay in (1.0, 3.0, None) if not record.is_open else (None,):
                        try:
                            await self._client.chat_update(
                                channel=record.message_channel or record.channel,
                                ts=record.message_ts,
                                text=rendered.text,
                                blocks=rendered.blocks,
                            )
                            break
                        except _SLACK_FAILURES:
                            if delay is None:
                                raise
                            await asyncio.sleep(delay)
                    entry.rendered = record.version
                    if not record.is_open:
                        return
                    # Another process may have finished the request while we rendered a
                    # draft: look once more so an open render never lands last.
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._refreshing.pop(request_id, None)


@dataclass(slots=True)
class _Refresh:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    rendered: int | None = None


def _plain(text: str) -> str:
    """Mrkdwn mentions made readable for a plain-text modal error."""
    return text.replace("<@", "@").replace(">", "")
