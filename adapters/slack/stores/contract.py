"""The pending store protocol, the base of every store (memory, SQLite, Redis), and ``settle``."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from adapters.slack.model.audience import Audience
from adapters.slack.model.audit_trail import AuditEvent, ChainCheck, event_for
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import STORE_BUSY
from adapters.slack.stores.watches import Watch, WatchRegistry
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

if TYPE_CHECKING:
    from adapters.slack.stores.duties import Upkeep

RETENTION: Final = 90 * 86400.0
"""How long finished records (and their audit trail) are kept by default: 90 days."""

OWNER_LOST_NOTE: Final = "The bot process that asked this question stopped before it was answered."
"""The note on a record a sweep failed because its owner's heartbeat stopped."""


class StoreConflict(Exception):
    """A record kept changing under us; ``mutate`` gave up after its attempts."""


class StoreUnavailable(ConnectionError):
    """The store could not be reached when it started (the message names its setting)."""


@dataclass(frozen=True, slots=True)
class OpenCount:
    """How many records are pending: in all, this process's (its ``ask()`` waits on each),
    and owned by none (the HTTP API's)."""

    total: int
    mine: int
    unowned: int


EventFor = Callable[[PendingRecord, PendingRecord], AuditEvent | None]
"""The audit event of a write, from the record before and after (``None``: bookkeeping)."""


class TrailReader(Protocol):
    """The reading half of a store's audit trail."""

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""

    def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order they were appended."""

    async def check_chain(self, kept_since: float) -> ChainCheck | None:
        """What ``audit_trail.verify`` finds; by default ``None``: this store keeps no chain."""
        return None


class PendingStore(TrailReader, Protocol):
    """The records of open requests, shared by every process that can receive a click; the
    base of every store (its process id, its watches)."""

    _process_id: str
    _watches: WatchRegistry

    @property
    def process_id(self) -> str:
        """This process's id; records it creates name it as their owner."""
        return self._process_id

    @property
    def watch_count(self) -> int:
        """How many watches are registered in this process (zero when nothing leaks)."""
        return self._watches.count

    def watch(self, request_id: str) -> Watch:
        """Register interest in this request's ending (before posting, so no click is missed)."""
        return self._watches.watch(request_id)

    def fail_watches(self, request_id: str, error: UserQuestionError) -> int:
        """End this process's waits on ``request_id`` with ``error``; how many there were."""
        return self._watches.fail(request_id, error)

    async def _refresh(self, request_id: str) -> None:
        """A watch starts waiting: its record may have ended already."""
        record = await self.get(request_id)
        if record is not None and not record.is_open:
            self._watches.resolve(record)

    async def start(self) -> None:
        """Connect and start background duties (none for a store in this process's memory)."""
        return None

    async def close(self) -> None:
        """Stop background duties and release connections (likewise)."""
        return None

    async def create(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        """Store a new record and ``event`` with it, in one write."""

    async def get(self, request_id: str) -> PendingRecord | None:
        """The record with this id, or ``None``."""

    async def get_many(self, request_ids: Sequence[str]) -> list[PendingRecord | None]:
        """The records with these ids, in their order (``None`` for each unknown)."""

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        """Write ``record`` if stored at ``record.version - 1``, and ``event`` (both or neither)."""

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        """Every pending record (of ``owner``, when given)."""

    async def open_count(self) -> OpenCount:
        """How many records are pending, counted in the store (no record is parsed)."""

    async def open_audiences(self) -> list[Audience]:
        """Who may answer each open question (tool approvals left out), in no order."""

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` (one that goes with no write of its record) to its trail."""


class DurableStore(PendingStore):
    """The durable stores' base: purge and sweep go to ``_upkeep``; they fail dead processes'
    requests and report them (``on_orphans``)."""

    _upkeep: Upkeep
    on_orphans: Callable[[list[PendingRecord]], Awaitable[None]] | None = None
    """Called with the records a periodic sweep failed (set by the provider)."""

    async def purge(self, now: float | None = None) -> int:
        """Delete what ended longer than the retention ago; how many records (or entries)."""
        return await self._upkeep.purge(now)

    async def sweep_orphans(self) -> list[PendingRecord]:
        """Fail the pending records of processes whose heartbeat is gone (``OWNER_LOST``)."""
        return await self._upkeep.sweep_orphans()


async def mutate(
    store: PendingStore,
    request_id: str,
    change: Callable[[PendingRecord], PendingRecord | None],
    *,
    attempts: int = 16,
    by: str | None = None,
    by_name: str | None = None,
    event: EventFor | None = None,
    known: PendingRecord | None = None,
    seam: bool = False,
) -> tuple[PendingRecord | None, PendingRecord | None]:
    """Apply ``change`` with compare-and-set, re-reading on conflict; giving up raises
    ``StoreConflict`` (with ``seam``, the seam's ``STORE_UNAVAILABLE`` caused by it)."""
    audit_of = event or functools.partial(event_for, by=by, by_name=by_name)
    for attempt in range(attempts):
        current = known if attempt == 0 and known is not None else await store.get(request_id)
        if current is None:
            return None, None
        updated = change(current)
        if updated is None:
            return current, None
        if await store.compare_and_set(updated, audit_of(current, updated)):
            return current, updated
    conflict = StoreConflict(f"request {request_id} kept changing; gave up after {attempts} tries")
    if seam:
        busy = f"{STORE_BUSY}: {conflict}"
        raise UserQuestionError(busy, STORE_UNAVAILABLE, cause=conflict) from conflict
    raise conflict


settle = functools.partial(mutate, seam=True)
"""``mutate``, whose giving up is the seam's ``STORE_UNAVAILABLE`` rather than a conflict."""


_T = TypeVar("_T")


async def until_back(
    attempt: Callable[[], Awaitable[_T]], pauses: Iterable[float], *, conflicts: bool = False
) -> _T:
    """``attempt``, again after each of ``pauses`` while the store is out of reach (and, with
    ``conflicts``, while its record keeps changing); the last failure is raised."""
    for pause in pauses:
        try:
            return await attempt()
        except UserQuestionError as exc:
            conflict = isinstance(exc.__cause__, StoreConflict)
            if exc.code != STORE_UNAVAILABLE or (conflict and not conflicts):
                raise
        await asyncio.sleep(pause)
    return await attempt()


async def append_quietly(store: PendingStore, event: AuditEvent) -> None:
    """Append ``event`` (one without a write of its record); a store failure is logged."""
    try:
        await store.append_event(event)
    except UserQuestionError as exc:
        _log.warning("audit event %s of %s not kept: %s", event.kind, event.request_id, exc)


_log = logging.getLogger("adapters.slack.stores")
