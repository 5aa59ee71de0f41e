"""``DeadlineKeepers``: keeps the deadlines of open requests nobody waits on here (adopted at
start, or followed as other processes ask them)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Final

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.deadlines import Clock, keep_deadlines, schedule
from adapters.slack.asks.endings import Endings
from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import SHUTDOWN_NOTE, no_answer_within
from adapters.slack.stores import PendingStore, settle
from bot.questions.errors import ASK_TIMEOUT

__all__ = ["FOLLOW_EVERY", "FOLLOW_GRACE", "RELOOK_OWNED", "DeadlineKeepers"]

FOLLOW_EVERY: Final = 5.0
"""Seconds between two looks for requests other processes asked (``Waits.follow``)."""
FOLLOW_GRACE = 30.0
"""Seconds past a followed request's deadline before this process ends it ``ASK_TIMEOUT``:
the process that asked, when alive, ends it at the deadline itself, or with the reason it
already gave its waiter (a store outage at the deadline: ``STORE_UNAVAILABLE``, written once
the store is back). Reminders and escalation are on time (taken by compare-and-set)."""
_READ_AT_ONCE: Final = 500
"""Records read in one ``get_many`` while following (the loop runs between two)."""
RELOOK_OWNED: Final = 6
"""Every how many looks the requests a waiter elsewhere owned are read again: a process
that stops releases the requests of a host that asks again (``owner`` set to none), which
from then on are everyone's to keep; the open list alone does not show that."""


class DeadlineKeepers:
    """Keeps the deadlines of the requests it adopts or follows, with no waiter here."""

    def __init__(
        self,
        client: AsyncWebClient,
        store: PendingStore,
        sync: MessageSynchroniser,
        endings: Endings,
        clock: Clock,
        logger: logging.Logger,
    ) -> None:
        self._client = client
        self._store = store
        self._sync = sync
        self._endings = endings
        self.clock = clock
        self._logger = logger
        self._keepers: dict[str, asyncio.Task[None]] = {}
        self._waited: Counter[str] = Counter()
        """Requests whose deadlines a waiter here keeps (``wait``), and how many wait."""
        self._seen: set[str] = set()
        self._owned: set[str] = set()
        """Among ``_seen``, those a waiter's process owned when read: read again every
        ``RELOOK_OWNED`` looks."""
        self._looks = 0
        """Open requests already looked at while following: kept here, or none of ours."""
        self._listed: set[str] = set()
        """The open questions the last look listed."""
        self._follower: asyncio.Task[None] | None = None

    @property
    def keeper_count(self) -> int:
        """Deadline keepers running for adopted requests (no waiter in this process)."""
        return len(self._keepers)

    async def resume(self) -> list[PendingRecord]:
        """Adopt the open requests owned by no process (at start); returns them."""
        found = await self._store.open_records()
        self._note(found)
        adopted = [r for r in found if r.owner is None]
        for record in adopted:
            if record.note == SHUTDOWN_NOTE:
                _, written = await settle(
                    self._store,
                    record.id,
                    lambda r: r.next(note=None) if r.is_open and r.note == SHUTDOWN_NOTE else None,
                )
                if written is not None:
                    self._sync.refresh(record.id)
            self.keep(record)
        return adopted

    def follow(self, every: float = FOLLOW_EVERY) -> None:
        """Look for requests other processes ask from now on, every ``every`` seconds, and
        keep their deadlines (``follow_once``); until ``close``."""
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
        """Keep the deadlines of the open requests owned by no process that are neither kept
        nor waited on here yet (asked by another process, which may stop or die unreplaced);
        stop the keepers of requests that ended. How many keepers it started."""
        open_ids = {audience.request_id for audience in await self._store.open_audiences()}
        self._looks += 1
        if self._looks % RELOOK_OWNED == 0:  # released meanwhile? read them again
            self._seen -= self._owned
            self._owned.clear()
        self._seen &= open_ids
        self._owned &= open_ids
        for request_id in self._listed - open_ids:  # ended (anywhere): nothing left to keep
            if (keeper := self._keepers.get(request_id)) is not None:
                keeper.cancel()
        self._listed = open_ids  # (one kept since the list was read is not in it: kept on)
        new = [i for i in open_ids if i not in self._seen and i not in self._keepers]
        started = 0
        for at in range(0, len(new), _READ_AT_ONCE):
            found = await self._store.get_many(new[at : at + _READ_AT_ONCE])
            for record in self._note(r for r in found if r is not None and r.is_open):
                started += self.keep(record, late=FOLLOW_GRACE)
        return started

    def _note(self, records: Iterable[PendingRecord]) -> list[PendingRecord]:
        """Note ``records`` (open) as looked at; those owned by no process, to keep. One
        whose post waits in its process's queue (detached, owned until posted) is looked
        at again next time; one owned by a waiter's process is that process's to keep."""
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
        """Keep the deadlines of ``record`` (adopted, with no waiter here) from now on,
        ending it ``late`` seconds past its deadline; whether a keeper started (not: none
        are due, or they are kept here already)."""
        if record.id in self._waited or record.id in self._keepers or not schedule(record):
            return False
        keeper = self._keeper(record, late)
        self._keepers[record.id] = keeper
        keeper.add_done_callback(functools.partial(self._kept, record.id))
        return True

    def _kept(self, request_id: str, task: asyncio.Task[None]) -> None:
        if self._keepers.get(request_id) is task:
            del self._keepers[request_id]
        if not task.cancelled() and task.exception() is not None:
            # Stopped by a failure (the store out of reach at a due time): the next look
            # reads the request again and keeps it anew, if it is still open.
            self._seen.discard(request_id)
            error = task.exception()
            self._logger.warning(
                "deadline keeper stopped", extra={"request": request_id, "error": repr(error)}
            )

    async def close(self) -> None:
        """Stop following and the keepers of adopted requests (the requests stay open)."""
        if self._follower is not None:
            self._follower.cancel()
            self._follower = None
        keepers = list(self._keepers.values())
        for keeper in keepers:
            keeper.cancel()
        if keepers:
            await asyncio.wait(keepers)

    def _keeper(self, record: PendingRecord, late: float = 0.0) -> asyncio.Task[None]:
        """A task keeping ``record``'s reminders, escalation and expiry (deadlines.py), the
        expiry ``late`` seconds past the deadline."""

        timeout = (record.deadline or 0) - record.created_at  # not the record: hours held

        async def expire(rid: str) -> object:
            if late > 0:
                await asyncio.sleep(late)  # ended meanwhile: the ending below changes nothing
            # Shielded: a keeper stopped as its request ends (its wait over, or ``follow_once``
            # seeing it gone) never cuts the ending short between its write and its refresh.
            return await asyncio.shield(
                self._endings.end(rid, "failed", no_answer_within(timeout), ASK_TIMEOUT)
            )

        return asyncio.ensure_future(
            keep_deadlines(record.id, self._store, self._client, expire, self.clock, self._logger)
        )
