"""``Waits``: waiting on a request's ending, and keeping its deadlines while nobody waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from adapters.slack.asks.deadlines import DeadlineKeepers
from adapters.slack.asks.endings import Released, WaitReleased
from adapters.slack.model.audit_trail import event_for
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import CANCELLED_BY_ASKER
from adapters.slack.stores import Watch, settle
from bot.questions import AbortSignal, UserQuestionError
from bot.questions.errors import ASK_ABORTED, RECORD_LOST, STORE_UNAVAILABLE


class Waits(DeadlineKeepers):
    """Waits on requests' endings; keeps the deadlines of the requests it adopts."""

    _checked: set[str]
    """Requests whose message a rejoin here has checked (while their wait lasts)."""

    take_up: Callable[[list[PendingRecord]], None] | None = None
    """Posts (or finds in Slack) the messages of records adopted here without one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checked = set()

    async def rejoin(
        self,
        record: PendingRecord,
        signal: AbortSignal | None,
        note: str | None,
        owner: str | None,
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
                owner=owner,
            )
            if await self._store.compare_and_set(reopened, event_for(record, reopened)):
                record = reopened
                self._sync.refresh(record.id)
        if not record.is_open:
            return record
        adopted = None
        if owner is not None and record.owner != owner:
            # Ownership follows the waiter: this process waits on it now (its earlier owner
            # stopped, released it or died), so no orphan sweep may end it. A detached
            # asker leaves the owner as it is.
            me = owner
            _, adopted = await settle(
                self._store,
                record.id,
                lambda r: r.next(owner=me, note=note) if r.is_open and r.owner != me else None,
            )
            if adopted is not None:
                record = adopted
                if record.message_ts is None and self.take_up is not None:
                    self.take_up([record])  # its poster stopped before storing its message
                else:
                    self._sync.refresh(record.id)
        first = record.id not in self._checked
        if first and adopted is None:  # one chat.update per request and waiter: a message
            self._sync.refresh(record.id)  # deleted while no bot ran is posted again
        self._checked.add(record.id)
        watch = self._store.watch(record.id)
        try:
            return await self.wait(record.id, watch, signal)
        finally:
            watch.close()
            if first:
                self._checked.discard(record.id)

    async def wait(
        self,
        request_id: str,
        watch: Watch,
        signal: AbortSignal | None,
        *,
        placed: str | None = None,
    ) -> PendingRecord:
        """Wait for the request's ending or its abort signal, keeping its deadlines meanwhile
        (``placed``: its JSON as posted, put back failed should the store lose it)."""
        try:
            current = await self._store.get(request_id)
        except UserQuestionError as exc:
            if exc.code != STORE_UNAVAILABLE or placed is None:
                raise
            self._logger.warning(
                "the store could not be read as a wait began; waiting all the same",
                extra={"request": request_id, "error": exc.message},
            )
            current = PendingRecord.load(placed)
        if current is not None and current.is_open:
            self.keep(current)
            if signal is not None and isinstance(signal.reason, Released):
                raise WaitReleased()  # let go once posted: the request stays open
        del current  # not held for the hours a question may wait (10,000 of them at once)
        try:
            if signal is None:
                record = await watch.wait()
            else:
                record = await self._wait_signalled(request_id, watch, signal)
        except WaitReleased:
            raise  # open: its deadlines stay kept
        except BaseException as exc:
            self.forget(request_id)  # ended, or to be ended by whoever raised (fail_later)
            if isinstance(exc, UserQuestionError) and exc.code == RECORD_LOST and placed:
                await self._endings.put_back_lost(placed)
            raise
        self.forget(request_id)
        return record

    async def _wait_signalled(
        self, request_id: str, watch: Watch, signal: AbortSignal
    ) -> PendingRecord:
        """The request's ending, unless its signal aborts it first, with no task or future of
        its own: an abort interrupts the watch's wait (``CancelledError``, nobody cancelling)."""
        reasons: list[object] = []

        def on_abort(reason: object) -> None:
            if not reasons:
                reasons.append(reason)
                watch.interrupt()

        remove = signal.add_listener(on_abort)
        try:
            if signal.aborted:  # aborted since ``wait`` looked (a read)
                reasons.append(signal.reason)
            else:
                try:
                    return await watch.wait()
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if not reasons or (task is not None and task.cancelling()):
                        raise  # cancelled from outside (a timeout, a stop), not aborted
        finally:
            remove()
        return await self._aborted(request_id, reasons[0])

    async def _aborted(self, request_id: str, reason: object) -> PendingRecord:
        if isinstance(reason, Released):
            # The asker stops waiting, but the request stays open for whoever asks next;
            # an ending that came first (its watch not yet run) stands.
            try:
                ended = await self._store.get(request_id)
            except UserQuestionError:
                ended = None
            if ended is not None and not ended.is_open:
                return ended
            raise WaitReleased()
        return await self.end_aborted(request_id, reason)

    async def end_aborted(self, request_id: str, reason: object) -> PendingRecord:
        """End ``request_id`` ``aborted`` by its asker's signal (a text ``reason`` is the note);
        the record as ended."""
        note = reason if isinstance(reason, str) and reason else CANCELLED_BY_ASKER
        return await self._endings.end(request_id, "aborted", note, ASK_ABORTED)
