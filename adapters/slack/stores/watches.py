"""Watches in this process: the waiters for requests' endings, as every store keeps them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import RECORD_LOST_NOTE
from bot.questions.errors import RECORD_LOST, STORE_UNAVAILABLE, UserQuestionError

REFRESH_RETRY: Final = 0.5
"""Seconds between looks when the store cannot be read as a wait begins."""
LOST_CHECK_INTERVAL: Final = 2.0
"""Seconds between two checks that the records being waited on still exist."""


class Watch:
    """A waiter in this process for one request's ending (a registered interest in it)."""

    __slots__ = ("_registry", "future", "request_id", "waiting")

    def __init__(self, registry: WatchRegistry, request_id: str) -> None:
        self._registry = registry
        self.request_id = request_id
        # the ended record's JSON: each waiter parses its own copy (after the click's ack)
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting = False  # once waited on, its record is checked for loss

    async def wait(self) -> PendingRecord:
        """Return the record once it is terminal (looking first: it may be already)."""
        self.waiting = True
        if self.future.cancelled():
            self.future = asyncio.get_running_loop().create_future()
        await self._look()
        if self._registry.shielded:
            return PendingRecord.load(await asyncio.shield(self.future))
        return PendingRecord.load(await self.future)

    async def _look(self) -> None:
        """Ask the store to look at the record, until it answers or the ending arrives."""
        while not self.future.done():
            try:
                await self._registry.refresh(self.request_id)
                return
            except UserQuestionError as exc:
                if exc.code != STORE_UNAVAILABLE:
                    raise
            await asyncio.wait((self.future,), timeout=REFRESH_RETRY)

    def close(self) -> None:
        """Stop watching (idempotent); the store forgets the waiter."""
        self._registry.forget(self)

    def interrupt(self) -> None:
        """End the wait in progress with ``CancelledError`` (its asker gave up); an ending
        that came first stands, the next wait starts afresh."""
        self.future.cancel()

    def fail(self, error: Exception) -> None:
        """End the wait with ``error`` (an ending that came first stands)."""
        if not self.future.done():
            self.future.set_exception(error)
            self.future.exception()  # retrieved: the waiter re-raises it; never "unretrieved"

    def then(self, report: Callable[[str | BaseException], None]) -> None:
        """Report the ending (record JSON, or the error) to ``report``, with no task waiting."""
        self.waiting = True

        def reported(future: asyncio.Future[str]) -> None:
            self.close()
            if not future.cancelled():
                report(future.exception() or future.result())

        self.future.add_done_callback(reported)


class WatchRegistry:
    """The watches of one store in this process, by request id."""

    def __init__(
        self, refresh: Callable[[str], Awaitable[None]], *, shielded: bool = False
    ) -> None:
        self.refresh = refresh  # looks at one watched record now, resolving it if it ended
        self.shielded = shielded
        self._groups: dict[str, list[Watch]] = {}
        self._closed: UserQuestionError | None = None

    @property
    def count(self) -> int:
        """How many watches are registered (zero when nothing leaks)."""
        return sum(len(group) for group in self._groups.values())

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._groups

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def watch(self, request_id: str) -> Watch:
        """A new watch of ``request_id``; after ``close`` one that fails at once."""
        watch = Watch(self, request_id)
        if self._closed is not None:
            watch.fail(self._closed)
            return watch
        self._groups.setdefault(request_id, []).append(watch)  # (a list: smaller than a set)
        return watch

    def forget(self, watch: Watch) -> None:
        """Drop ``watch`` (idempotent)."""
        group = self._groups.get(watch.request_id)
        if group is None or watch not in group:
            return
        group.remove(watch)
        if not group:
            del self._groups[watch.request_id]

    def resolve(self, record: PendingRecord, dumped: str | None = None) -> None:
        """End the waits on ``record`` (terminal) with a copy of it each."""
        waiting = [w for w in self._groups.get(record.id, ()) if not w.future.done()]
        if not waiting:
            return
        raw = record.dump() if dumped is None else dumped
        for watch in waiting:
            watch.future.set_result(raw)

    def ended(self, request_id: str, raw: str, log: logging.Logger) -> None:
        """Resolve the waits on ``request_id`` if its stored JSON ``raw`` has ended (one this
        version cannot read fails them)."""
        try:
            record = PendingRecord.load(raw, of=request_id)
        except UserQuestionError as exc:
            log.error("%s; its waits in this process end", exc.message)
            self.fail(request_id, exc)
            return
        if not record.is_open:
            self.resolve(record, raw)

    def waiting_ids(self) -> list[str]:
        """The ids whose watches are being waited on and have not ended."""
        return sorted(
            request_id
            for request_id, group in self._groups.items()
            if any(w.waiting and not w.future.done() for w in group)
        )

    def fail(self, request_id: str, error: UserQuestionError) -> int:
        """End every wait on ``request_id`` still pending with ``error``; how many watch it."""
        watches = self._groups.get(request_id, ())
        for watch in watches:
            watch.fail(error)
        return len(watches)

    def lost(self, request_ids: list[str], log: logging.Logger, how: str) -> None:
        """End every wait on each of ``request_ids`` with ``RECORD_LOST`` (its record is gone)."""
        for request_id in request_ids:
            log.error("pending store lost record %s (%s)", request_id, how)
            error = UserQuestionError(f"{RECORD_LOST_NOTE} (request {request_id})", RECORD_LOST)
            for watch in self._groups.get(request_id, ()):
                if watch.waiting:
                    watch.fail(error)

    def fail_all(self, error: UserQuestionError) -> None:
        """End every wait still pending with ``error`` (the watches stay registered)."""
        for group in self._groups.values():
            for watch in group:
                watch.fail(error)

    def close(self, error: UserQuestionError) -> None:
        """End every wait with ``error``, forget them all; later watches fail at once."""
        self.fail_all(error)
        self._groups.clear()
        self._closed = error
