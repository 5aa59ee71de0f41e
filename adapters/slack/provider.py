"""``SlackQuestionProvider``: asks in Slack, resolves the pending ``ask()`` when a person answers.

Constructing it registers its listeners on ``app``; every Web API call goes through
``app.client``, or its paced copy within ``limits``. Options: docs/python.md. ``webhooks``
(set by ``embed_webhooks``) delivers a request's ``callback`` (else ``BAD_CALLBACK``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.authorize import Conversations, Gatekeeper
from adapters.slack.asks.deadlines import ESCALATE_TO_PATTERN, Clock, Crew, SystemClock
from adapters.slack.asks.destination import (
    AskDefaults,
    Callbacks,
    Destination,
    DestinationHook,
    owe_callback,
    review_of,
)
from adapters.slack.asks.endings import Endings, outcome
from adapters.slack.asks.lifecycle import AskLifecycle
from adapters.slack.asks.reconcile import LOOKUPS, LostPosts
from adapters.slack.asks.status import (
    QuestionStatus,
    Report,
    consume,
    report_ending,
    status_of,
    wait_ended,
)
from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.clicks.bolt_app import team_url
from adapters.slack.clicks.handler import InteractionHandler, register_listeners
from adapters.slack.home.tab import HomeTab
from adapters.slack.model import ids
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.pacing.paced import PacedWebClient, paced_copy
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.pacing.scheduler import WebApiScheduler
from adapters.slack.render.messages import SHUTDOWN_NOTE
from adapters.slack.stores import DurableStore, MemoryPendingStore, PendingStore
from adapters.slack.stores.viewers import viewers_for
from bot.questions import (
    AbortSignal,
    AskOptions,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    UserQuestionError,
)
from bot.questions.errors import ASK_ABORTED, STORE_UNAVAILABLE

__all__ = ["Destination", "DestinationHook", "SlackQuestionProvider"]


def _status(record: PendingRecord | None) -> QuestionStatus | None:
    return None if record is None else status_of(record)


class SlackQuestionProvider:
    """A ``UserQuestionProvider`` that asks in Slack through a bolt ``AsyncApp``."""

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
        reminders: Sequence[float] = (),
        escalate_after: float | None = None,
        escalate_to: str | None = None,
        remind: Sequence[str] = (),
        clock: Clock | None = None,
        store: PendingStore | None = None,
        usergroup_ttl: float = 60.0,
        retry: bool = True,
        paced: bool = True,
        limits: SlackLimits | None = None,
        lookups: Sequence[float] = LOOKUPS,
        logger: logging.Logger | None = None,
    ) -> None:
        if not channel:
            raise ValueError("channel must name a Slack channel, DM or user id")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        if escalate_to is not None and not ESCALATE_TO_PATTERN.match(escalate_to):
            raise ValueError("escalate_to must be a user id (U…, W…) or a user group id (S…)")
        if not all(ESCALATE_TO_PATTERN.match(who) for who in remind):
            raise ValueError("remind must hold user ids (U…, W…) or user group ids (S…)")
        client: AsyncWebClient = app.client
        self._own_client: PacedWebClient | None = None
        if paced and not isinstance(client, PacedWebClient):
            scheduler = WebApiScheduler(limits or SlackLimits(), logger=logger)
            client = self._own_client = paced_copy(client, scheduler)
        if retry:  # slack_sdk's: 5xx, dropped connections, and 429s when unpaced
            wanted = [AsyncConnectionErrorRetryHandler(2), AsyncServerErrorRetryHandler(2)]
            if not isinstance(client, PacedWebClient):
                wanted.append(AsyncRateLimitErrorRetryHandler(3))
            present = {type(handler) for handler in client.retry_handlers}
            client.retry_handlers += [h for h in wanted if type(h) not in present]
        self.client = client
        """The Web API client every call goes through (``app.client``, or its paced copy)."""
        self.store = store = store or MemoryPendingStore()
        """The pending store (shared with the HTTP API and other processes)."""
        log = logger or logging.getLogger("adapters.slack")
        self._sync = sync = MessageSynchroniser(client, store, log)
        self.defaults = AskDefaults(
            destination=Destination(channel, thread_ts),
            allowed_users=list(allowed_users) if allowed_users else None,
            allowed_usergroups=list(allowed_usergroups) if allowed_usergroups else None,
            mention=mention,
            choose=destination,
            timeout=timeout,
            reminders=tuple(reminders),
            escalate_after=escalate_after,
            escalate_to=escalate_to,
            remind=tuple(remind),
        )
        """Destination, who may answer, mention and timeout for requests asked from now on."""
        self._endings = Endings(store, sync)
        self._clock = clock = clock or SystemClock()
        crew = Crew(client, store, sync, self._endings, clock, log)
        self.lost_posts = lost = LostPosts(crew, tuple(lookups))
        """Looks for the messages of failed posts that Slack stored all the same."""
        self._lifecycle = AskLifecycle(crew, team_url(app), lost)
        gate = Gatekeeper(client, ttl=usergroup_ttl, logger=log)
        conversations = Conversations(client, log)  # the Home tab's and the clicks'
        self.handler = InteractionHandler(store, gate, sync, conversations)
        """What the listeners hand each interaction to."""
        if isinstance(store, DurableStore):
            # A shared store fails the requests of processes that died; say so in Slack.
            store.on_orphans = self._lifecycle.orphans
        viewers = viewers_for(store)
        now = clock.now
        self.home = HomeTab(client, store, gate, sync, log, conversations, viewers=viewers, now=now)
        """The App Home tabs ("Waiting for you") this provider publishes."""
        sync.on_change = self.home.changed
        self.webhooks: Callbacks | None = None  # owes each callback its delivery
        register_listeners(app, self.handler, self.home)

    @property
    def pending_count(self) -> int:
        """Requests this process is waiting on (zero when nothing leaks)."""
        return self.store.watch_count

    @property
    def background_count(self) -> int:
        """Background Web API tasks still running."""
        return len(self._sync)

    @property
    def refreshing_count(self) -> int:
        """Messages being brought up to date right now (zero when nothing leaks)."""
        return self._sync.refreshing_count

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Post the request to Slack and wait for its outcome."""
        if request.options is not None and request.options.callback is not None:
            options = await owe_callback(self.webhooks, request.options)
            request = request.model_copy(update={"options": options})
        options = request.options or AskOptions()
        # No local keeps the request, the template or the review's maker: ``run`` lets go
        # of them while the question waits (for hours, 10,000 at once).
        running = self._lifecycle.run(
            self.defaults.question_record(request, options, now=self._clock.now()),
            options,
            request.signal,
            functools.partial(review_of, self.client, self.store, request.questions, options),
        )
        del request, options
        return outcome(await running)

    def request_id_for(self, key: str | None = None) -> str:
        """The id of the request asked with idempotency ``key``; a new id without a key."""
        return ids.new_request_id() if key is None else ids.key_request_id(key)

    async def status(self, request_id: str) -> QuestionStatus | None:
        """Where request ``request_id`` stands (asked by any process); ``None`` if unknown."""
        status = _status(await self.store.get(request_id))
        if status is not None and status.is_open and isinstance(self.client, PacedWebClient):
            return replace(status, queued=self.client.scheduler.is_queued(request_id))
        return status

    async def wait_ended(self, request_id: str) -> QuestionStatus:
        """Wait until request ``request_id`` ends, wherever it is answered; cancel to stop."""
        return await wait_ended(self._endings, request_id)

    async def report_ending(self, request_id: str, report: Report) -> bool:
        """Report how request ``request_id`` ends to ``report``; ``False`` if it is unknown."""
        return await report_ending(self._endings, request_id, report)

    async def ask_approval(
        self,
        approval: ApprovalView,
        *,
        options: AskOptions,
        approvers: Sequence[str] | None = None,
        approver_groups: Sequence[str] | None = None,
        signal: AbortSignal | None = None,
    ) -> QuestionStatus:
        """Post a tool-permission approval (Allow once / Reject) and wait for its ending."""
        options = await owe_callback(self.webhooks, options)
        template = self.defaults.approval_record(approval, options, approvers, approver_groups)
        return status_of(await self._lifecycle.run(template, options, signal))

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The audit trail of request ``request_id``, oldest first."""
        return await self.store.events(request_id)

    def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every audit event with ``since <= at < until``, in the order appended."""
        return self.store.audit(since, until)

    async def abort(
        self, request_id: str, note: str, *, by: str | None = None
    ) -> QuestionStatus | None:
        """Abort an open request from any process: its waiter raises ``ASK_ABORTED``."""
        try:
            ended = await self._endings.end(request_id, "aborted", note, ASK_ABORTED, by=by)
        except UserQuestionError as exc:
            if exc.code == STORE_UNAVAILABLE:
                raise
            return None  # unknown, or it vanished meanwhile (expired)
        return status_of(ended)

    async def consume(
        self, request_id: str, *, by: str | None, lifetime: float
    ) -> tuple[str | None, QuestionStatus | None]:
        """Consume an answered request's decision once (``asks.status.consume``): ``(None,
        status)``, or the refusal's code (``REFUSALS``) and the request as it stands."""
        code, record = await consume(
            self.store, request_id, by=by, now=time.time(), lifetime=lifetime
        )
        return code, _status(record)

    async def release(self, request_id: str, note: str | None = None) -> QuestionStatus | None:
        """Leave an open request open, owned by no process, for the next asker to adopt."""
        released = await self._sync.write(
            request_id, lambda r: r.next(owner=None, note=note) if r.is_open else None
        )
        return _status(released)

    async def add_note(
        self, request_id: str, note: str, *, in_flight: bool = False
    ) -> QuestionStatus | None:
        """Show ``note`` on a request's message (open or finished); ``None`` if unknown.
        ``in_flight``: its answer is not yet taken by the asker (shown as sent, not answered)."""
        noted = await self._sync.write(request_id, lambda r: r.next(note=note, in_flight=in_flight))
        return _status(noted)

    async def resume(self) -> list[QuestionStatus]:
        """Adopt the open requests owned by no process (at start; the ones adopted): keep their
        deadlines, reopen "Interrupted" messages, post the unposted, look for lost posts."""
        await self.lost_posts.resume()
        return [status_of(record) for record in await self._lifecycle.resume()]

    async def aclose(self, *, grace: float = 5.0, note: str = SHUTDOWN_NOTE) -> None:
        """Stop taking questions, end every open request this process owns (not the detached
        or released ones), drain tasks; ``grace`` seconds in all."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        await self.lost_posts.aclose()
        await self._lifecycle.aclose(grace=grace, note=note)
        await self._sync.drain(max(0.0, deadline - loop.time()))
        if self._own_client is not None:
            await self._own_client.aclose()
