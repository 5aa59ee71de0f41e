"""``Endings``: how a request ends, and what its waiter then gets."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable

from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.model.audit_trail import SLACK_URL, event_for, permalink
from adapters.slack.model.record import PendingRecord, State
from adapters.slack.render.messages import (
    ABORTED_MESSAGE,
    CANCELLED_MESSAGE,
    QUESTION_FAILED,
    RECORD_LOST_NOTE,
    STORE_DOWN_NOTE,
    SUPERSEDED_NOTE,
)
from adapters.slack.stores import PendingStore, settle, until_back
from bot.questions import AskUserQuestionAnswer, UserQuestionError
from bot.questions.errors import (
    ASK_ABORTED,
    ASK_CANCELLED,
    DELIVERY_FAILED,
    RECORD_LOST,
    STORE_UNAVAILABLE,
)

_BACK_PAUSES = [min(2.0**i, 30.0) for i in range(59)]
"""Pauses between tries at an ending that waits for the store (about half an hour)."""


class Released:
    """An abort reason that stops the waiter but leaves its request open (see ``release``)."""

    __slots__ = ()


class DeadlineUnkept(UserQuestionError):
    """``STORE_UNAVAILABLE`` for the waiters of a request whose deadline came while the store
    was out of reach: they end at their deadline; the request ends so once the store is back."""

    def __init__(self) -> None:
        super().__init__(
            "the pending store could not be reached at the deadline", STORE_UNAVAILABLE
        )


class WaitReleased(UserQuestionError):
    """``ASK_ABORTED`` for a waiter stopped by ``Released()`` while its request stayed open
    (a later process serves it); a request that had ended by then gives its own outcome."""

    def __init__(self) -> None:
        super().__init__(ABORTED_MESSAGE, ASK_ABORTED)


class Endings:
    """Ends requests in the store (from any process) and shows the ending in Slack."""

    def __init__(self, store: PendingStore, sync: MessageSynchroniser) -> None:
        self.store = store
        self.sync = sync

    async def end(
        self,
        request_id: str,
        state: State,
        note: str,
        code: str | None = None,
        *,
        by: str | None = None,
        replaced_by: str | None = None,
    ) -> PendingRecord:
        """Move an open request to a terminal state (unless someone else already did);
        ``replaced_by``: the link to the revision that superseded it."""
        ended = {"state": state, "note": note, "error_code": code, "finished_at": time.time()}
        seen, written = await settle(
            self.store,
            request_id,
            lambda r: r.next(**ended, replaced_by=replaced_by) if r.is_open else None,
            by=by or self.store.process_id,
        )
        if written is not None:
            self.sync.refresh(request_id)
            return written
        if seen is None:  # the record expired or vanished: report the ending we meant
            raise UserQuestionError(note, code or DELIVERY_FAILED)
        return seen

    async def end_or_later(
        self, request_id: str, state: State, note: str, code: str, **kinds: str | None
    ) -> None:
        """End the request now, or, if the store cannot be reached, the same way once it
        is back (a cancelled ask still reads Cancelled); a request gone meanwhile is left."""
        try:
            await self.end(request_id, state, note, code, **kinds)
        except UserQuestionError as exc:
            if exc.code == STORE_UNAVAILABLE:
                self._later(request_id, state, note, code, **kinds)

    async def supersede(self, earlier: str, revision: PendingRecord) -> None:
        """``revision`` is posted: the review it revises, if still open, ends aborted (its
        message links to ``revision``), so that nobody approves the plan it replaced."""
        link = permalink(SLACK_URL, revision.message_channel, revision.message_ts)
        by = f"revision {revision.id}"
        await self.end_or_later(
            earlier, "aborted", SUPERSEDED_NOTE, ASK_ABORTED, by=by, replaced_by=link
        )

    def fail_later(self, request_id: str) -> None:
        """Fail a request its store outage ended (its waiter got ``STORE_UNAVAILABLE``) once
        the store is back; its message says so in a fixed sentence (``STORE_DOWN_NOTE``)."""
        self._later(request_id, "failed", STORE_DOWN_NOTE, STORE_UNAVAILABLE)

    def _later(
        self, request_id: str, state: State, note: str, code: str, **kinds: str | None
    ) -> None:
        ending = functools.partial(self.end, request_id, state, note, code, **kinds)
        self.sync.spawn(_quietly(until_back(ending, _BACK_PAUSES, conflicts=True)), "end later")

    async def put_back_lost(self, copy: str) -> None:
        """The store lost an open record (``copy``, its JSON as last seen): put it back as
        failed (``RECORD_LOST``), and close its message."""
        last = PendingRecord.load(copy)
        tomb = lost_record(last)
        try:
            put = await self.store.create(tomb, event_for(last, tomb, by=self.store.process_id))
        except UserQuestionError:  # down as well: the message says so all the same
            put = True
        if put:  # (another waiter put it back first: its copy is the one shown)
            self.sync.show(tomb)
        elif tomb.message_ts is not None:
            # unless that copy knew no message (taken before the post): this one closes it
            with contextlib.suppress(UserQuestionError):
                stored = await self.store.get(tomb.id)
                if stored is not None and stored.message_ts is None:
                    self.sync.show(tomb)


async def _quietly(ending: Awaitable[object]) -> None:
    with contextlib.suppress(UserQuestionError):  # still out of reach after half an hour
        await ending


def lost_record(record: PendingRecord) -> PendingRecord:
    """``record`` (open when last seen) as failed with ``RECORD_LOST``: what it ended as
    when the store lost it."""
    return record.next(
        state="failed", error_code=RECORD_LOST, note=RECORD_LOST_NOTE, finished_at=time.time()
    )


def ending_error(record: PendingRecord) -> UserQuestionError | None:
    """The error a terminal record's waiter gets; ``None`` for an answer."""
    if record.state == "answered" and record.answer is not None:
        return None
    if record.state == "cancelled":
        return UserQuestionError(CANCELLED_MESSAGE, ASK_CANCELLED)
    if record.state == "aborted":
        return UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
    return UserQuestionError(record.note or QUESTION_FAILED, record.error_code or DELIVERY_FAILED)


def outcome(record: PendingRecord) -> AskUserQuestionAnswer:
    """The waiter's result for a terminal record: the answer, or the seam's error."""
    error = ending_error(record)
    if error is not None:
        raise error
    assert record.answer is not None  # (no error: answered)
    return record.answer
