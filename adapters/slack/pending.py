"""Where pending requests live: the store protocol and its in-process implementation.

Every change is a compare-and-set on the record's ``version``, so whichever writer gets
there first wins and a losing writer re-reads and decides again (``mutate``). When a
record reaches a terminal state the store wakes the ``Watch`` that the owning process
registered before posting the question, in this process or (``RedisPendingStore``)
in another one.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from adapters.slack.record import TERMINAL_STATES, PendingRecord

__all__ = [
    "MemoryPendingStore",
    "OrphanHandler",
    "PendingStore",
    "ReportsOrphans",
    "StoreConflict",
    "StoreUnavailable",
    "Watch",
    "mutate",
]

FINISHED_TTL = 3600.0
"""How long a finished record is kept, so late clicks learn who answered."""


class StoreConflict(Exception):
    """A record kept changing under us; ``mutate`` gave up after its attempts."""


class StoreUnavailable(ConnectionError):
    """The store could not be reached when it started (the message names its setting)."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.url = url


class Watch(Protocol):
    """A registered interest in one request's ending."""

    async def wait(self) -> PendingRecord:
        """Return the record once it is terminal."""
        ...

    def close(self) -> None:
        """Stop watching (idempotent); the store forgets the waiter."""
        ...


OrphanHandler = Callable[[list[PendingRecord]], Awaitable[None]]
"""Called with the records a store failed because the process that asked is gone."""


@runtime_checkable
class ReportsOrphans(Protocol):
    """An optional store capability: it fails dead processes' requests and reports them.

    The provider sets ``on_orphans`` so those requests' messages say so in Slack.
    """

    on_orphans: OrphanHandler | None


class PendingStore(Protocol):
    """The records of open requests, shared by every process that can receive a click."""

    @property
    def process_id(self) -> str:
        """This process's id; records it creates name it as their owner."""
        ...

    async def start(self) -> None:
        """Connect and start background duties (heartbeats, notifications)."""
        ...

    async def close(self) -> None:
        """Stop background duties and release connections."""
        ...

    async def create(self, record: PendingRecord) -> bool:
        """Store a new record; ``False`` if one with its id exists already."""
        ...

    async def get(self, request_id: str) -> PendingRecord | None:
        """The record with this id, or ``None``."""
        ...

    async def compare_and_set(self, record: PendingRecord) -> bool:
        """Write ``record`` if the stored version is ``record.version - 1``.

        A terminal record wakes its owner's watch. Returns whether the write won.
        """
        ...

    def watch(self, request_id: str) -> Watch:
        """Register interest in this request's ending (before posting, so no click is missed)."""
        ...

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        """Every pending record (of ``owner``, when given)."""
        ...

    @property
    def watch_count(self) -> int:
        """How many watches are registered in this process (zero when nothing leaks)."""
        ...


async def mutate(
    store: PendingStore,
    request_id: str,
    change: Callable[[PendingRecord], PendingRecord | None],
    *,
    attempts: int = 16,
) -> tuple[PendingRecord | None, PendingRecord | None]:
    """Apply ``change`` with compare-and-set, re-reading on conflict.

    ``change`` gets the current record and returns the next one (``record.next(...)``) or
    ``None`` to leave it. Returns ``(seen, written)``: the record the decision was made on
    (``None`` if there is none) and the record written (``None`` if nothing was).
    """
    for _ in range(attempts):
        current = await store.get(request_id)
        if current is None:
            return None, None
        updated = change(current)
        if updated is None:
            return current, None
        if await store.compare_and_set(updated):
            return current, updated
    raise StoreConflict(f"request {request_id} kept changing; gave up after {attempts} tries")


class _MemoryWatch:
    def __init__(self, store: MemoryPendingStore, request_id: str) -> None:
        self._store = store
        self.request_id = request_id
        self.future: asyncio.Future[PendingRecord] = asyncio.get_running_loop().create_future()

    async def wait(self) -> PendingRecord:
        # Awaited directly (no shield): the ending resumes the waiter on the loop's very
        # next turn, ahead of the message update it schedules. A cancelled wait cancels
        # the future; the next wait starts a fresh one and finds the stored ending.
        if self.future.cancelled():
            self.future = asyncio.get_running_loop().create_future()
        if not self.future.done():
            ending = self._store._ending(self.request_id)
            if ending is not None:
                self.future.set_result(ending)
        return await self.future

    def close(self) -> None:
        self._store._forget(self)


class MemoryPendingStore:
    """The default store: a dict in this process. Right for exactly one bot process.

    Records are kept as their JSON (``PendingRecord.dump``), as Redis keeps them: each
    reader gets its own object, nothing a caller does to one can change the store, and a
    question waiting for hours costs its JSON rather than a graph of objects.
    """

    def __init__(self, *, process_id: str = "local", finished_ttl: float = FINISHED_TTL) -> None:
        self._process_id = process_id
        self._finished_ttl = finished_ttl
        self._records: dict[str, _Stored] = {}
        self._watches: dict[str, set[_MemoryWatch]] = {}
        self._expiry: deque[tuple[float, str]] = deque()
        self._deadlines: dict[str, float] = {}  # the latest ending's deadline of each record

    @property
    def process_id(self) -> str:
        return self._process_id

    @property
    def watch_count(self) -> int:
        return sum(len(watches) for watches in self._watches.values())

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def create(self, record: PendingRecord) -> bool:
        self._expire()
        if record.id in self._records:
            return False
        self._records[record.id] = _Stored.of(record)
        return True

    async def get(self, request_id: str) -> PendingRecord | None:
        self._expire()
        stored = self._records.get(request_id)
        return None if stored is None else PendingRecord.load(stored.json)

    async def compare_and_set(self, record: PendingRecord) -> bool:
        stored = self._records.get(record.id)
        if stored is None or stored.version != record.version - 1:
            return False
        if stored.state in TERMINAL_STATES and record.state not in (stored.state, "pending"):
            return False  # an ending is final (reopening it, deliberately, is the exception)
        written = _Stored.of(record)
        self._records[record.id] = written
        if record.state in TERMINAL_STATES and stored.state not in TERMINAL_STATES:
            deadline = time.monotonic() + self._finished_ttl
            self._deadlines[record.id] = deadline
            self._expiry.append((deadline, record.id))
            for watch in self._watches.get(record.id, ()):
                if not watch.future.done():
                    watch.future.set_result(PendingRecord.load(written.json))
        return True

    def watch(self, request_id: str) -> Watch:
        watch = _MemoryWatch(self, request_id)
        self._watches.setdefault(request_id, set()).add(watch)
        return watch

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        self._expire()
        return [
            PendingRecord.load(stored.json)
            for stored in self._records.values()
            if stored.state == "pending" and (owner is None or stored.owner == owner)
        ]

    def _ending(self, request_id: str) -> PendingRecord | None:
        """The stored record if it has ended (for a watch that starts waiting late)."""
        stored = self._records.get(request_id)
        if stored is None or stored.state not in TERMINAL_STATES:
            return None
        return PendingRecord.load(stored.json)

    def _forget(self, watch: _MemoryWatch) -> None:
        watches = self._watches.get(watch.request_id)
        if watches is None:
            return
        watches.discard(watch)
        if not watches:
            del self._watches[watch.request_id]

    def _expire(self) -> None:
        now = time.monotonic()
        while self._expiry and self._expiry[0][0] <= now:
            deadline, request_id = self._expiry.popleft()
            if self._deadlines.get(request_id) != deadline:
                continue  # reopened and ended again since: a later deadline counts
            del self._deadlines[request_id]
            stored = self._records.get(request_id)
            if stored is not None and stored.state != "pending":
                del self._records[request_id]


@dataclass(frozen=True, slots=True)
class _Stored:
    """A record as the memory store keeps it: its JSON, and what compare-and-set reads."""

    version: int
    state: str
    owner: str
    json: str

    @classmethod
    def of(cls, record: PendingRecord) -> _Stored:
        return cls(record.version, record.state, record.owner, record.dump())
