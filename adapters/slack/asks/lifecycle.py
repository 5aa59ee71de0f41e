"""``AskLifecycle``: one request's life in Slack: store, post, wait, end (endings.py); and
``TakeUp``, which posts (or finds in Slack) the messages of questions another process left."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from adapters.slack.asks.deadlines import Crew, Part
from adapters.slack.asks.endings import Released
from adapters.slack.asks.posting import Poster
from adapters.slack.asks.reconcile import LostPosts, Place, adopt_predecessor, posted_in
from adapters.slack.asks.synchroniser import question_error
from adapters.slack.asks.waits import Waits
from adapters.slack.model import ids
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.approval import render_record
from adapters.slack.render.blocks.parts import Rendered
from adapters.slack.render.messages import (
    ABORTED_MESSAGE,
    CANCELLED_BY_ASKER,
    SHUTDOWN_NOTE,
    SHUTTING_DOWN,
)
from adapters.slack.stores import MemoryPendingStore, settle
from bot.questions import AbortSignal, AskOptions, UserQuestionError
from bot.questions.errors import ASK_ABORTED, STORE_UNAVAILABLE


class TakeUp(Poster):
    """A ``Poster`` that also claims unposted questions for this process and posts them (one
    search per place), and posts again those whose message is gone."""

    async def claim(self, records: Iterable[PendingRecord]) -> list[PendingRecord]:
        """Take for this process those of ``records`` still open, unowned and unposted."""
        me = self._store.process_id

        def claim(r: PendingRecord) -> PendingRecord | None:
            free = r.is_open and r.owner is None and r.message_ts is None
            return r.next(owner=me, detached=True) if free else None

        claimed: list[PendingRecord] = []
        for record in records:
            _, written = await settle(self._store, record.id, claim)
            if written is not None:
                claimed.append(written)
        return claimed

    def take_up(self, records: list[PendingRecord]) -> None:
        """Post (or find in Slack) the messages of ``records``, in the background."""
        if self.closing:
            return  # stopping: they stay this process's until its heartbeat is gone
        places: dict[Place, list[PendingRecord]] = defaultdict(list)
        for record in records:
            places[(record.channel, record.thread_ts)].append(record)
        for place, waiting in places.items():
            self._sync.spawn(self._take_up(place, waiting), "take up posts")

    async def _take_up(self, place: Place, records: list[PendingRecord]) -> None:
        found = await posted_in(self._client, place, min(r.created_at for r in records))
        for record in records:
            ts = found.get(record.id)
            if ts is not None:
                await self._adopt(record, ts)
            else:
                self._sync.spawn(self._post_taken(record), f"post taken up {record.id}")
        self._logger.info(
            "took up %d question(s) whose message was not stored (%d found in Slack)",
            len(records),
            sum(r.id in found for r in records),
            extra={"channel": place[0]},
        )

    async def _adopt(self, record: PendingRecord, ts: str) -> None:
        """Slack has ``record``'s message: the record learns it (owned by no process)."""
        me = self._store.process_id

        def found(r: PendingRecord) -> PendingRecord | None:
            if not r.is_open or r.message_ts is not None or r.owner != me:
                return None
            return r.next(message_ts=ts, message_channel=record.channel, owner=None)

        await self._sync.write(record.id, found, event=self.asked)

    async def _post_taken(self, record: PendingRecord) -> None:
        try:
            await self.post(record, render_record(record))
        except UserQuestionError as exc:  # failed (the record says so) or handed over
            self._logger.info(
                "a question taken up was not posted",
                extra={"request": record.id, "code": exc.code},
            )

    async def post_again(self, record: PendingRecord) -> None:
        """Post an open request again whose message is gone (deleted while no bot ran)."""
        gone = record.message_ts

        def unplaced(r: PendingRecord) -> PendingRecord | None:
            return r.next(message_ts=None) if r.is_open and r.message_ts == gone else None

        _, written = await settle(self._store, record.id, unplaced)
        if written is not None:
            await self.post(written, render_record(written))


class AskLifecycle(Part):
    """Asks in Slack and waits; ends requests (answered elsewhere, aborted, failed)."""

    def __init__(self, crew: Crew, team_url: str | None, lost: LostPosts) -> None:
        super().__init__(crew)
        self._in_process = isinstance(crew.store, MemoryPendingStore)
        """Whether the store lives and dies with this process (the memory store)."""
        self.waits = Waits(crew)
        self._inflight: set[asyncio.Task[Any]] = set()
        self._started = time.monotonic()
        self.poster = TakeUp(crew, lost, team_url)
        crew.sync.on_gone = self.poster.post_again
        self.waits.take_up = self.poster.take_up

    async def run(
        self,
        template: PendingRecord,
        options: AskOptions,
        signal: AbortSignal | None,
        extra: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> PendingRecord:
        """Store, post and wait for one request (``template`` gets its id), to its end."""
        if self.poster.closing:
            raise UserQuestionError(SHUTTING_DOWN, ASK_ABORTED)
        if signal is not None and signal.aborted:
            raise UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
        request_id = options.request_id or (
            ids.key_request_id(options.key) if options.key else ids.new_request_id()
        )
        # The waiter's process owns the request; none owns a detached one once it is posted
        # (unless the store dies with this process).
        owner = None if options.detached and not self._in_process else self._store.process_id
        if options.key or options.request_id:
            existing = await self._store.get(request_id)
            if existing is not None:
                return await self.waits.rejoin(existing, signal, options.note, owner)
        record = template.model_copy(
            update={
                "id": request_id,
                "label": options.label,
                "key": options.key,
                "note": options.note,
                **(await extra() if extra is not None else {}),
                "owner": self._store.process_id,  # (a detached one's until it is posted)
                "detached": owner is None,
            }
        )
        del template, extra  # a question may wait for hours: hold only what waiting needs
        rendered = render_record(record)  # raises SLACK_LIMIT before anything is stored
        if options.key:  # a restarted bot without its records: its predecessor's message?
            record = await adopt_predecessor(self._client, record, self._started)
        watch = self._store.watch(request_id)
        current = asyncio.current_task()
        if current is not None:
            self._inflight.add(current)
        try:
            # A message found again gets its asked event now (no post of this process writes it).
            asked = None if record.message_ts is None else self.poster.asked(record, record)
            if not await self._store.create(record, asked):
                existing = await self._store.get(request_id)
                if existing is not None:
                    watch.close()
                    return await self.waits.rejoin(existing, signal, None, owner)
            self.waits.keep(record)  # its deadlines, from now on (while its post waits too)
            if record.message_ts is None:
                placed = await self._post(record, rendered, signal)
            else:  # found again: bring it up to date (open, with live buttons)
                placed = record
                self._sync.refresh(request_id)
            if placed.revision is not None:
                await self._endings.supersede(placed.revision.previous_id, placed)
            # The rendered blocks and the record are not needed while waiting (the store
            # has the record): keep only its JSON, should the store lose it (one in this
            # process cannot: nothing else deletes an open record there).
            copy = None if self._in_process else placed.dump()
            del rendered, record, placed
            if options.on_posted is not None:
                options.on_posted(request_id)
            del options
            return await self.waits.wait(request_id, watch, signal, placed=copy)
        except asyncio.CancelledError:
            # The awaiting task was cancelled (before or after Slack took the message).
            await self._endings.end_or_later(request_id, "aborted", CANCELLED_BY_ASKER, ASK_ABORTED)
            raise
        except Exception as exc:
            error = question_error(exc)
            if error is exc:
                if error.code == STORE_UNAVAILABLE:
                    self._endings.fail_later(request_id)
                raise
            # not ours yet: the record says why it failed
            await self._endings.end_or_later(request_id, "failed", error.message, error.code)
            raise error from exc
        finally:
            watch.close()
            if current is not None:
                self._inflight.discard(current)

    async def _post(
        self, record: PendingRecord, rendered: Rendered, signal: AbortSignal | None
    ) -> PendingRecord:
        """Post ``record``; an abort while the post waits its turn ends the question now
        (``Released()`` only stops the wait: the post goes on)."""
        if signal is None:
            return await self.poster.post(record, rendered)
        endings: set[asyncio.Task[PendingRecord]] = set()

        def aborted(reason: object) -> None:
            if not isinstance(reason, Released):  # a failure is logged; the wait ends it again
                ending = self.waits.end_aborted(record.id, reason)
                endings.add(self._sync.spawn(ending, f"end {record.id}, aborted while posting"))

        remove = signal.add_listener(aborted)
        if signal.aborted:  # aborted on the way here: a listener added now is never called
            aborted(signal.reason)
        try:
            return await self.poster.post(record, rendered)
        finally:
            remove()
            if endings:
                await asyncio.wait(endings)

    async def resume(self) -> list[PendingRecord]:
        """At start: adopt the open requests owned by no process and follow those asked from
        now on; post the unposted."""
        adopted = await self.waits.resume()
        if not self._in_process:  # a store of this process only: nobody else asks
            self.waits.follow()
        unposted = [record for record in adopted if record.message_ts is None]
        self.poster.take_up(await self.poster.claim(unposted))  # (none: nothing to do)
        return adopted

    async def orphans(self, records: list[PendingRecord]) -> None:
        """A sweep took these for this process from a lost one (``stores.duties``): the
        detached ones, open, are posted here; the others, failed, say so in Slack."""
        for record in records:
            self.waits.keep(record) if record.is_open else self._sync.refresh(record.id)
        self.poster.take_up([record for record in records if record.is_open])

    async def aclose(self, *, grace: float = 5.0, note: str = SHUTDOWN_NOTE) -> None:
        """Stop taking questions, end every open request this process owns, let asks finish."""
        self.poster.hand_over()
        await self.waits.close()
        for record in await self._store.open_records(owner=self._store.process_id):
            if record.detached:  # not posted yet: the next process posts it (posting.py)
                continue
            await self._endings.end_or_later(record.id, "aborted", note, ASK_ABORTED)
        if self._inflight:  # asks still delivering: let them see the ending and finish
            await asyncio.wait(set(self._inflight), timeout=grace)
