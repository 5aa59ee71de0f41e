"""``MemoryPendingStore``: the pending store in this process's memory (tests, the sandbox)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from adapters.slack.model.audience import Audience
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import TERMINAL_STATES, PendingRecord
from adapters.slack.stores.contract import RETENTION, OpenCount, PendingStore
from adapters.slack.stores.watches import WatchRegistry


class MemoryPendingStore(PendingStore):
    """The default store: a dict in this process. Right for exactly one bot process."""

    def __init__(self, *, process_id: str = "local", finished_ttl: float = RETENTION) -> None:
        if finished_ttl <= 0:
            raise ValueError("finished_ttl must be positive")
        self._process_id = process_id
        self._finished_ttl = finished_ttl
        self._records: dict[str, _Stored] = {}
        self._watches = WatchRegistry(self._refresh)
        self._expiry: OrderedDict[str, float] = OrderedDict()  # each ended id's deadline, in order
        self._events: list[_Event] = []  # every kept event, in the order appended
        self._trails: dict[str, list[_Event]] = {}  # the same events, by request id

    async def create(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        self._expire()
        if record.id in self._records:
            return False
        self._records[record.id] = _Stored.of(record)
        self._keep(event)
        if record.state in TERMINAL_STATES:  # stored ended (a lost record put back)
            self._expire_later(record.id)
        return True

    async def get(self, request_id: str) -> PendingRecord | None:
        self._expire()
        stored = self._records.get(request_id)
        return None if stored is None else PendingRecord.load(stored.json)

    async def get_many(self, request_ids: Sequence[str]) -> list[PendingRecord | None]:
        self._expire()
        found = (self._records.get(request_id) for request_id in request_ids)
        return [None if stored is None else PendingRecord.load(stored.json) for stored in found]

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        stored = self._records.get(record.id)
        if stored is None or stored.version != record.version - 1:
            return False
        if stored.state in TERMINAL_STATES and record.state not in (stored.state, "pending"):
            return False  # an ending is final (reopening it, deliberately, is the exception)
        written = _Stored.of(record)
        self._records[record.id] = written
        self._keep(event)  # with the change, before any waiter wakes
        if record.state in TERMINAL_STATES and stored.state not in TERMINAL_STATES:
            self._expire_later(record.id)
            self._watches.resolve(record, written.json)
        return True

    def _expire_later(self, request_id: str) -> None:
        """``request_id`` ended now: it goes ``finished_ttl`` later, with its trail."""
        self._expiry[request_id] = time.monotonic() + self._finished_ttl
        self._expiry.move_to_end(request_id)  # (ended again: its later deadline counts)

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        self._expire()
        return [
            PendingRecord.load(stored.json)
            for stored in self._records.values()
            if stored.state == "pending" and (owner is None or stored.owner == owner)
        ]

    async def open_count(self) -> OpenCount:
        self._expire()
        owners = [s.owner for s in self._records.values() if s.state == "pending"]
        return OpenCount(len(owners), owners.count(self.process_id), owners.count(None))

    async def open_audiences(self) -> list[Audience]:
        self._expire()
        return [s.audience for s in self._records.values() if s.audience is not None]

    async def append_event(self, event: AuditEvent) -> None:
        self._keep(event)

    async def events(self, request_id: str) -> list[AuditEvent]:
        self._expire()
        return [AuditEvent.load(kept.json) for kept in self._trails.get(request_id, ())]

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        self._expire()
        for kept in list(self._events):
            if kept.at >= since and (until is None or kept.at < until):
                yield AuditEvent.load(kept.json)

    def _keep(self, event: AuditEvent | None) -> None:
        """Append ``event`` to the trail (in the same step as the write it goes with)."""
        if event is not None:
            kept = _Event(event.at, event.request_id, event.dump())
            self._events.append(kept)
            self._trails.setdefault(event.request_id, []).append(kept)

    def _expire(self) -> None:
        """Drop the records that ended ``finished_ttl`` ago, each with its trail (a trail
        is kept as long as its record: its retention counts from the ending)."""
        now = time.monotonic()
        gone: set[str] = set()
        while self._expiry and next(iter(self._expiry.values())) <= now:
            request_id, _ = self._expiry.popitem(last=False)
            if self._records[request_id].state != "pending":  # (reopened: it stays)
                del self._records[request_id]
                if self._trails.pop(request_id, None):
                    gone.add(request_id)
        if gone:  # one pass over the events for all of them
            self._events = [e for e in self._events if e.request_id not in gone]


@dataclass(frozen=True, slots=True)
class _Event:
    """An audit event as the memory store keeps it: its JSON, and what ``audit`` filters on."""

    at: float
    request_id: str
    json: str


@dataclass(frozen=True, slots=True)
class _Stored:
    """A record as the memory store keeps it: its JSON, and what compare-and-set reads."""

    version: int
    state: str
    owner: str | None
    json: str
    audience: Audience | None

    @classmethod
    def of(cls, record: PendingRecord) -> _Stored:
        return cls(record.version, record.state, record.owner, record.dump(), Audience.of(record))
