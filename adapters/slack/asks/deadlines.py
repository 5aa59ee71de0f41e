"""Deadlines, reminders and escalation of requests, on an injectable clock: each request's
schedule, and ``DeadlineKeepers``, which keeps them all (waited on here, adopted at start, or
followed as other processes ask them) on one timer: a heap of when each is next due."""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.endings import DeadlineUnkept, Endings
from adapters.slack.asks.synchroniser import SLACK_FAILURES, BackgroundTasks, MessageSynchroniser
from adapters.slack.model.audit_trail import SLACK_URL, permalink
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.parts import answer_by
from adapters.slack.render.messages import SHUTDOWN_NOTE, no_answer_within
from adapters.slack.stores import PendingStore, mutate
from bot.questions.errors import ASK_TIMEOUT

TOP_REMINDER: Final = ":alarm_clock: Reminder:"
"""How a reminder that mentions nobody starts (it is posted at the top level)."""
ESCALATE_TO_PATTERN: Final = re.compile(r"^[UWS][A-Z0-9]{2,20}\Z")
"""A user id (``U…``/``W…``) or a user group id (``S…``) to mention on escalation."""


class Clock(Protocol):
    """Where a schedule reads the time (seconds since the epoch) and waits."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real time: ``time.time`` and ``asyncio.sleep``."""

    now = staticmethod(time.time)
    sleep = staticmethod(asyncio.sleep)


@dataclass(frozen=True, slots=True)
class Crew:
    """What the parts of an ask's life share: Slack, the store, the messages, the endings, the
    clock and the log."""

    client: AsyncWebClient
    store: PendingStore
    sync: MessageSynchroniser
    endings: Endings
    clock: Clock
    logger: logging.Logger


class Part:
    """A part of an ask's life (deadlines, posts, lookups, the lifecycle): its crew at hand."""

    def __init__(self, crew: Crew) -> None:
        self._client = crew.client
        self._store = crew.store
        self._sync = crew.sync
        self._endings = crew.endings
        self._clock = crew.clock
        self._logger = crew.logger


@dataclass(frozen=True, slots=True, order=True)
class Event:
    """One thing due at ``at``: a reminder, the escalation, or the deadline itself."""

    at: float
    kind: Literal["remind", "escalate", "expire"]
    index: int = 0
    """Which reminder (its place in ``record.reminders``)."""


def schedule(record: PendingRecord, late: float = 0.0) -> list[Event]:
    """What is due for ``record``, in time order (the expiry ``late`` s past the deadline)."""
    events = [Event(at, "remind", i) for i, at in enumerate(record.reminders)]
    if record.escalate_at is not None and record.escalate_to:
        events.append(Event(record.escalate_at, "escalate"))
    if record.deadline is not None:
        events = [e for e in events if e.at < record.deadline]
        events.append(Event(record.deadline + late, "expire"))
    return sorted(events, key=lambda e: (e.at, e.kind == "expire"))


def mention_of(target: str) -> str:
    """A user (``U…``/``W…``) or user group (``S…``) id as a Slack mention."""
    return f"<!subteam^{target}>" if target.startswith("S") else f"<@{target}>"


def reminder_text(record: PendingRecord) -> str:
    """The reminder, mentioning who may answer and whom ``remind`` names; with nobody to
    mention, a top-level line linking the question (a reply mentioning nobody notifies nobody)."""
    reviewers = record.review.reviewers if record.review else None
    who = [*reviewers.users, *reviewers.usergroups] if reviewers else []
    who += [*(record.allowed_users or []), *(record.allowed_usergroups or [])]
    people = " ".join(mention_of(p) for p in dict.fromkeys(who + (record.remind or [])))
    when = f" {answer_by(record.deadline)}." if record.deadline is not None else ""
    if people:
        return (
            f":alarm_clock: {people} Reminder: this question is still waiting for an answer.{when}"
        )
    link = permalink(SLACK_URL, record.message_channel or record.channel, record.message_ts)
    return f"{TOP_REMINDER} a question is still waiting for an answer: <{link}|open it>.{when}"


def escalation_text(record: PendingRecord) -> str:
    """The escalation reply: the escalation user or group, mentioned."""
    target = mention_of(record.escalate_to or "")
    when = f" {answer_by(record.deadline)}." if record.deadline is not None else ""
    return f":rotating_light: {target} this question has had no answer yet; can you help?{when}"


def overtaken(event: Event, events: list[Event], now: float) -> bool:
    """Whether a later event of the same kind is due already (``event`` was missed)."""
    return any(e.kind == event.kind and event.at < e.at <= now for e in events)


def take(event: Event, record: PendingRecord) -> PendingRecord | None:
    """``record`` with ``event`` (a reminder or the escalation) taken; ``None`` if it was."""
    if not record.is_open:
        return None
    if event.kind == "remind":
        return record.next(reminded=event.index + 1) if record.reminded <= event.index else None
    return None if record.escalated else record.next(escalated=True)


FOLLOW_EVERY: Final = 5.0
"""Seconds between two looks for requests other processes asked (``Waits.follow``)."""
FOLLOW_GRACE = 30.0
"""Seconds past a followed request's deadline before this process ends it ``ASK_TIMEOUT``
(the process that asked, when alive, ends it at the deadline itself)."""
_READ_AT_ONCE: Final = 500
"""Records read in one ``get_many`` while following (the loop runs between two)."""
Kept = tuple[float, float, float, float]
"""When the next event is due, the point the schedule is sent from, how late it expires, when."""
RETRY: Final = 5.0  # seconds before what was due is tried again (the store out of reach)
RELOOK_OWNED: Final = 6
"""Every how many looks the requests a waiter elsewhere owned are read again: a process
that stops releases the requests of a host that asks again (``owner`` set to none), which
from then on are everyone's to keep; the open list alone does not show that."""


class DeadlineKeepers(Part):
    """Keeps the deadlines of the requests asked, adopted or followed here (no task each)."""

    def __init__(self, crew: Crew) -> None:
        super().__init__(crew)
        self._due: dict[str, Kept] = {}  # id -> (at, since, late, expires)
        self._heap: list[tuple[float, str]] = []
        self._timer: asyncio.Task[None] | None = None
        self._sending = BackgroundTasks(crew.logger)
        self._seen: set[str] = set()  # open requests looked at while following
        self._owned: set[str] = set()  # among them, those a waiter's process owned
        self._looks = 0
        self._listed: set[str] = set()  # kept here: listed open by the last look, or kept since
        self._follower: asyncio.Task[None] | None = None

    @property
    def keeper_count(self) -> int:
        """Requests whose deadlines are kept here."""
        return len(self._due)

    async def resume(self) -> list[PendingRecord]:
        """Adopt the open requests owned by no process (at start); returns them."""
        adopted = self._note(await self._store.open_records())
        for record in adopted:
            if record.note == SHUTDOWN_NOTE:
                await self._sync.write(
                    record.id,
                    lambda r: r.next(note=None) if r.is_open and r.note == SHUTDOWN_NOTE else None,
                )
            self.keep(record)
        return adopted

    def follow(self, every: float = FOLLOW_EVERY) -> None:
        """Keep the deadlines of requests other processes ask, looking every ``every`` s."""
        if self._follower is None or self._follower.done():
            self._follower = asyncio.ensure_future(self._follow(every))

    async def _follow(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.follow_once()
            except Exception as exc:  # the store down for a moment: look again next time
                self._logger.warning("could not look for other processes' questions: %s", exc)

    async def follow_once(self) -> int:
        """Keep the deadlines of open requests owned by no process not kept here yet, forget
        those that ended; how many it started keeping."""
        listed, self._listed = self._listed, set()  # one kept during the read: at the next look
        try:
            open_ids = {audience.request_id for audience in await self._store.open_audiences()}
        except BaseException:
            self._listed |= listed
            raise
        self._looks += 1
        if self._looks % RELOOK_OWNED == 0:  # released meanwhile? read them again
            self._seen -= self._owned
            self._owned.clear()
        self._seen &= open_ids
        self._owned &= open_ids
        for request_id in listed - open_ids:  # ended (anywhere): nothing left to keep
            self.forget(request_id)
        new = [i for i in open_ids if i not in self._seen and i not in self._due]
        started = 0
        for at in range(0, len(new), _READ_AT_ONCE):
            found = await self._store.get_many(new[at : at + _READ_AT_ONCE])
            for record in self._note(r for r in found if r is not None and r.is_open):
                started += self.keep(record, late=FOLLOW_GRACE)
        self._listed |= open_ids & self._due.keys()
        return started

    def _note(self, records: Iterable[PendingRecord]) -> list[PendingRecord]:
        """Note ``records`` (open) as looked at; those owned by no process, to keep (one whose
        post waits in its process's queue is looked at again next time)."""
        unowned: list[PendingRecord] = []
        for record in records:
            if record.owner is not None and record.detached:
                continue
            self._seen.add(record.id)
            if record.owner is None:
                unowned.append(record)
            elif record.owner != self._store.process_id:  # this one's: released at its stop
                self._owned.add(record.id)
        return unowned

    def keep(self, record: PendingRecord, *, late: float = 0.0) -> bool:
        """Keep ``record``'s deadlines, expiring it ``late`` s past; whether it is new here."""
        events = schedule(record, late)
        kept = self._due.get(record.id)
        if not events or (kept is not None and kept[2] <= late):
            return False
        expires = events[-1].at if events[-1].kind == "expire" else math.inf
        self._at(record.id, (events[0].at, events[0].at, late, expires))  # (from the start)
        self._listed.add(record.id)  # the next look forgets it if it ended meanwhile
        return kept is None

    def forget(self, request_id: str) -> None:
        """Keep nothing more of ``request_id`` (it ended); its heap entry goes stale."""
        self._due.pop(request_id, None)
        if len(self._heap) > 2 * len(self._due) + 64:  # mostly stale: rebuilt
            self._heap = [(kept[0], rid) for rid, kept in self._due.items()]
            heapq.heapify(self._heap)

    def _at(self, request_id: str, kept: Kept) -> None:
        self._due[request_id] = kept
        heapq.heappush(self._heap, (kept[0], request_id))
        if self._timer is None or self._timer.done() or self._heap[0][1] == request_id:
            if self._timer is not None:
                self._timer.cancel()  # (sooner than it sleeps for: it sleeps anew)
            self._timer = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        """Sleep until the soonest entry is due, send it (a short task); until none is left."""
        while self._heap:
            at, request_id = self._heap[0]
            kept = self._due.get(request_id)
            if kept is None or kept[0] != at:
                heapq.heappop(self._heap)  # stale
                continue
            if at > self._clock.now():
                await self._clock.sleep(at - self._clock.now())
                continue
            heapq.heappop(self._heap)
            self._sending.spawn(self._send(request_id, kept), "deadlines")

    async def _send(self, request_id: str, kept: Kept) -> None:
        _, since, late, expires = kept
        try:
            due = await self._send_due(request_id, since, late)
            after = None if due is None else (due, due, late, expires)
        except Exception as exc:  # the store out of reach: tried again from the same point
            extra = {"request": request_id, "error": repr(exc)}
            self._logger.warning("deadline not kept", extra=extra)
            after = (self._clock.now() + RETRY, since, late, expires)
            if expires <= self._clock.now() and self._store.fail_watches(
                request_id, DeadlineUnkept()
            ):
                # Its waiters here end at their deadline, saying why; so does the question,
                # once the store is back.
                self._endings.fail_later(request_id)
                after = None
        if self._due.get(request_id) == kept:  # (not forgotten nor kept anew meanwhile)
            self.forget(request_id) if after is None else self._at(request_id, after)

    async def _send_due(self, request_id: str, since: float, late: float) -> float | None:
        """Send what of ``request_id``'s schedule is due from ``since`` on; when the next of it
        is due, ``None`` once nothing is left."""
        record = await self._store.get(request_id)
        if record is None or not record.is_open:
            return None
        events = schedule(record, late)
        for event in events:
            now = self._clock.now()
            if event.at < since:
                continue  # sent before
            if event.at > now:
                return event.at
            if event.kind == "expire":  # shielded: a stop never cuts an ending short
                note = no_answer_within((record.deadline or 0) - record.created_at)
                await asyncio.shield(self._endings.end(request_id, "failed", note, ASK_TIMEOUT))
                return None
            if record.message_ts is None or overtaken(event, events, now):
                continue  # not in Slack yet, or a later reminder is due as well: send that one
            _, taken = await mutate(self._store, request_id, functools.partial(take, event))
            if taken is None:
                continue  # sent already: by another process, or before a restart
            text = reminder_text(taken) if event.kind == "remind" else escalation_text(taken)
            top = text.startswith(TOP_REMINDER)  # nobody to mention: seen unread
            try:
                await self._client.chat_postMessage(
                    channel=taken.message_channel or taken.channel,
                    thread_ts=None if top else taken.thread_ts or taken.message_ts,
                    text=text,
                )
            except SLACK_FAILURES as exc:  # a missed reminder must not end the question
                extra = {"request": request_id, "error": type(exc).__name__}
                self._logger.warning("reminder not sent", extra=extra)
        return None

    async def close(self) -> None:
        """Stop following and keeping deadlines (the requests stay open)."""
        if self._follower is not None:
            self._follower.cancel()
            self._follower = None
        if self._timer is not None:
            self._timer.cancel()
        await self._sending.drain(0)
        self._due.clear()
        self._heap.clear()
