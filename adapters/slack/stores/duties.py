"""The durable stores' background duties: liveness and its sweep, the retention's purge."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final

from adapters.httpguard import RefusalLog
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import (
    OWNER_LOST_NOTE,
    DurableStore,
    PendingStore,
    StoreConflict,
    mutate,
)
from bot.questions.errors import OWNER_LOST, UserQuestionError

FAILURE_LOG_EVERY: Final = 60.0
"""Seconds between two log lines of a failure that keeps repeating (``RepeatedFailures``)."""
PURGE_EVERY = 3600.0
"""Seconds between two purges while a store runs (read when it starts)."""

Duty = tuple[str, float, Callable[[], Awaitable[object]]]
"""A store's periodic duty: its name, its interval (seconds), its work."""


def default_process_id() -> str:
    """An id unique to this process: host, pid and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class OrphanSweep:
    """One pass of a sweep: the records it wrote, and the writes whose answer never came."""

    def __init__(self, store: PendingStore, *, budget: float, log: logging.Logger) -> None:
        self.store = store
        self.budget = budget
        self.deadline: float | None = None  # set by the first record (or to stop the pass)
        self.between: Callable[[], Awaitable[None]] | None = None
        self.log = log
        self.written: list[PendingRecord] = []
        self.unsure: list[PendingRecord] = []

    async def owner(self, owner: str) -> bool:
        """Fail (or take up) the open records of the lost process ``owner``, ``False`` once past
        the deadline (the pass ends); a store error stops the pass, another is only logged."""
        for record in await self.store.open_records(owner=owner):
            if self.deadline is None:
                self.deadline = time.monotonic() + self.budget
            elif time.monotonic() >= self.deadline:
                return False
            if self.between is not None:
                await self.between()
            try:
                await self._one(record, owner)
            except UserQuestionError:
                raise  # the store cannot answer: the rest waits for the next pass
            except Exception:
                self.log.exception(
                    "pending store could not sweep request %s of lost process %s",
                    record.id,
                    owner,
                )
        return True

    async def _one(self, record: PendingRecord, owner: str) -> None:
        now = time.time()
        sent: list[PendingRecord] = []

        def lost(current: PendingRecord) -> PendingRecord | None:
            if not current.is_open or current.owner != owner:
                return None
            if current.detached:  # its message was never stored: this process posts it
                following = current.next(owner=self.store.process_id)
            else:
                following = current.next(
                    state="failed", error_code=OWNER_LOST, note=OWNER_LOST_NOTE, finished_at=now
                )
            sent.append(following)
            return following

        try:
            _, written = await mutate(self.store, record.id, lost, known=record)
        except StoreConflict:
            return
        except BaseException:
            self.unsure += sent[-1:]  # the last write sent may have been made
            raise
        if written is not None:
            self.written.append(written)


class Upkeep:
    """A durable store's duties: the heartbeat with a pass of the sweep, the hourly purge."""

    def __init__(
        self, store: DurableStore, *, interval: float, ttl: float, log: logging.Logger
    ) -> None:
        if interval <= 0 or ttl <= interval:
            raise ValueError("heartbeat_ttl must be longer than a positive heartbeat_interval")
        self._store = store
        self._interval = interval
        self._ttl = ttl
        self._log = log
        self._beaten_at = 0.0  # when (monotonic) this process's last beat was written
        self._unsure: list[PendingRecord] = []  # writes with no answer: maybe made
        self._tasks: list[asyncio.Task[None]] = []

    async def duty(self) -> list[PendingRecord]:
        """One heartbeat: beat, and a pass of the sweep; the records it failed."""
        raise NotImplementedError

    async def purge(self, now: float | None = None) -> int:
        """Delete what the retention no longer keeps; how many records (or entries) went."""
        raise NotImplementedError

    async def _sweep(self, sweep: OrphanSweep) -> None:
        """Give ``sweep`` the lost processes, one by one."""
        raise NotImplementedError

    async def sweep_orphans(self) -> list[PendingRecord]:
        """One pass of the sweep (``OWNER_LOST``), a third of the TTL at most, reporting too
        the unsure writes of earlier passes that were made; a store error is only logged
        once something was written."""
        sweep = OrphanSweep(self._store, budget=self._ttl / 3, log=self._log)
        sweep.unsure, self._unsure = self._unsure, []  # carried on unless read now
        try:
            if sweep.unsure:
                sweep.written += await _landed(self._store, sweep.unsure)
                sweep.unsure = []
            await self._sweep(sweep)
        except UserQuestionError as exc:
            if not sweep.written:
                raise
            self._log.warning("pending store sweep stopped early: %s", exc)
        finally:
            self._unsure += sweep.unsure
            failed = [record for record in sweep.written if not record.is_open]  # not taken up
            if failed:
                lost = ", ".join(sorted({str(record.owner) for record in failed}))
                self._log.warning(
                    "pending store failed %d question(s) of lost process(es) %s", len(failed), lost
                )
        return sweep.written

    def loops(
        self,
        kind: str,
        stopped: Callable[[], bool],
        *duties: Duty,
        **more: Coroutine[Any, Any, None],
    ) -> list[asyncio.Task[None]]:
        """Start the store's tasks (each named ``{kind}-store-{name}``; ``stop`` ends them): a
        loop for each of the heartbeat (reporting what it failed), the purge and ``duties``
        (name, interval, work), apart (a long purge delays no beat), and ``more``."""

        async def beat() -> None:
            orphans = await self.duty()
            if orphans and self._store.on_orphans is not None:
                try:
                    await self._store.on_orphans(orphans)
                except Exception:
                    self._log.exception("on_orphans failed")

        async def every(name: str, interval: float, work: Callable[[], Awaitable[object]]) -> None:
            failures = RepeatedFailures(self._log, f"pending store {name}")
            while not stopped():
                await asyncio.sleep(interval)
                try:
                    await work()
                except Exception as exc:  # never let one failure stop the loop
                    failures.failed(exc)
                else:
                    failures.succeeded()

        own: list[Duty] = [("heartbeat", self._interval, beat), ("purge", PURGE_EVERY, self.purge)]
        named = {duty[0]: every(*duty) for duty in own + list(duties)}
        loop = asyncio.get_running_loop()
        tasks = (named | more).items()
        self._tasks = [loop.create_task(work, name=f"{kind}-store-{name}") for name, work in tasks]
        return self._tasks

    async def stop(self, patience: float | None = None) -> None:
        """Cancel the store's tasks and wait for them (``patience``: then warn and go on)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=patience)
            if stuck:
                self._log.warning("pending store background tasks did not stop in time")


async def _landed(store: PendingStore, sent: Sequence[PendingRecord]) -> list[PendingRecord]:
    """Of the writes whose answer never came, those made (stored with the same ending)."""
    stored = await store.get_many([record.id for record in sent])
    return [
        now
        for record, now in zip(sent, stored, strict=True)
        if now is not None
        and now.version >= record.version
        and (now.owner, now.state, now.error_code, now.finished_at)
        == (record.owner, record.state, record.error_code, record.finished_at)
    ]


class RepeatedFailures:
    """The log of a duty failing at every round: a cause at most once per ``every``
    seconds, and once when the duty works again."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        every: float = FAILURE_LOG_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._what = what
        self._throttle = RefusalLog(log, interval=every, clock=clock)
        self._failed = 0  # since the last success
        self._reported = False  # whether one of them was logged

    def failed(self, exc: Exception) -> None:
        """Count ``exc``; log it unless its cause was logged less than ``every`` ago."""
        self._failed += 1
        cause = exc.code if isinstance(exc, UserQuestionError) else type(exc).__name__
        count = self._throttle.due(cause)
        if not count:
            return
        self._reported = True
        more = f" ({count - 1} more since the last report)" if count > 1 else ""
        if isinstance(exc, UserQuestionError):  # the store cannot answer: its message says why
            self._log.warning("%s failed: %s%s", self._what, exc.message, more)
        else:
            self._log.error("%s failed%s", self._what, more, exc_info=exc)

    def succeeded(self) -> None:
        """A round that worked: after failures of which one was logged, say so (once)."""
        if self._reported:
            self._log.info("%s works again after %d failure(s)", self._what, self._failed)
        self._failed = 0
        self._reported = False
