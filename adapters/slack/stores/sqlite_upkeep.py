"""The SQLite store's background work: others' endings, heartbeat, sweep, purge."""

from __future__ import annotations

import functools
import time
from typing import Final

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import DurableStore
from adapters.slack.stores.duties import OrphanSweep, Upkeep
from adapters.slack.stores.sqlite_file import SqliteFile
from adapters.slack.stores.watches import LOST_CHECK_INTERVAL, WatchRegistry
from bot.questions.errors import UserQuestionError

_ENDINGS_KEPT: Final = 3600.0
"""How long an entry of the endings feed is kept (pollers look every fraction of a second)."""
_TRAIL_GONE: Final = (
    "at < ? AND NOT EXISTS (SELECT 1 FROM records WHERE records.id = events.request_id)"
)
"""The events purged: a trail goes with its record (a pending question keeps it whole); an
event whose question has no record goes by its age (through ``events_at`` and the records'
key; ``NOT IN`` would match nothing after a NULL)."""
_NOW: Final = "((julianday('now') - 2440587.5) * 86400.0)"
"""The time (Unix seconds) as SQLite reads it when it runs the statement: a beat that waited
for another writer's lock is stamped when it is written, and is not stale on arrival."""
_LOST_OWNERS: Final = (
    "SELECT DISTINCT r.owner FROM records r LEFT JOIN alive a"
    " ON a.process_id = r.owner WHERE r.state = 'pending' AND r.owner IS NOT NULL"
    f" AND r.owner != ? AND (a.beat_at IS NULL OR a.beat_at < {_NOW} - ?)"
)
"""The owners of pending records whose heartbeat is gone or older than the TTL."""


class SqliteUpkeep(Upkeep):
    """The endings other processes write, noticed to resolve this process's ``watches``; this
    process's heartbeat, the sweep for other processes' orphans, the retention."""

    def __init__(
        self,
        file: SqliteFile,
        store: DurableStore,
        watches: WatchRegistry,
        *,
        retention: float,
        heartbeat_interval: float,
        heartbeat_ttl: float,
    ) -> None:
        super().__init__(store, interval=heartbeat_interval, ttl=heartbeat_ttl, log=file.log)
        self._file = file
        self._watches = watches
        self._retention = retention
        self._sweep_from = 0.0
        """No sweep before this (monotonic): ``_beat_or_hold``."""
        self._data_version = -1
        self._seen_seq = 0
        self._lost_checked = 0.0
        self._lost_due = False
        """Another process committed since the last check for deleted records."""

    async def begin(self, began: float) -> None:
        """Start from now (what ended before is read by the watches themselves) with a beat;
        a start since ``began`` (monotonic) that waited for the file (or upgraded it) longer
        than a beat's interval holds the sweep: so did the others' beats."""
        self._seen_seq = int(await self._file.scalar("SELECT COALESCE(MAX(seq), 0) FROM endings"))
        self._data_version = int(await self._file.scalar("PRAGMA data_version"))
        await self._beat_or_hold(began)

    async def poll_once(self) -> None:
        """One look: resolve the watches of what other processes ended since the last."""
        version = int(await self._file.scalar("PRAGMA data_version"))
        changed, self._data_version = version != self._data_version, version
        self._lost_due |= changed  # (a commit within the interval is checked after it)
        if self._lost_due and time.monotonic() - self._lost_checked >= LOST_CHECK_INTERVAL:
            self._lost_checked, self._lost_due = time.monotonic(), False
            await self._check_lost()
        if not changed:
            return  # nobody else committed since the last look
        rows = await self._file.rows(
            "SELECT seq, id FROM endings WHERE seq > ? ORDER BY seq", (self._seen_seq,)
        )
        if not rows:
            return
        self._seen_seq = int(rows[-1][0])
        wanted = sorted({request_id for _, request_id in rows if request_id in self._watches})
        await self._resolve(wanted)

    async def _check_lost(self) -> None:
        """Fail the waits on records another process deleted (``RECORD_LOST``); resolve those
        on records stored ended by an insert (put back failed), which feeds no ending."""
        ids = self._watches.waiting_ids()
        rows = await self._file.rows_in("SELECT id, state FROM records WHERE id IN ({ids})", ids)
        states: dict[str, str] = dict(rows)
        self._watches.lost([i for i in ids if i not in states], self._log, "deleted")
        ended = [request_id for request_id, state in states.items() if state != "pending"]
        await self._resolve(ended)  # (one reopened since is not ended: left waiting)

    async def _resolve(self, ids: list[str]) -> None:
        """Resolve the watches of those of ``ids`` whose records have ended."""
        sql = "SELECT id, json FROM records WHERE id IN ({ids})"
        for request_id, raw in await self._file.rows_in(sql, ids):
            self._watches.ended(request_id, raw, self._log)

    async def beat(self) -> None:
        """Say this process is alive (stamped by SQLite when written: ``_NOW``)."""
        await self._file.rows(
            f"INSERT INTO alive (process_id, beat_at) VALUES (?, {_NOW})"
            " ON CONFLICT (process_id) DO UPDATE SET beat_at = excluded.beat_at RETURNING 1",
            (self._store.process_id,),
        )
        self._beaten_at = time.monotonic()

    async def stop_beating(self) -> None:
        """Delete this process's heartbeat (at close; a failure is logged)."""
        try:
            await self._file.rows(
                "DELETE FROM alive WHERE process_id = ? RETURNING 1", (self._store.process_id,)
            )
        except UserQuestionError as exc:
            self._log.warning("pending store could not delete its heartbeat: %s", exc)

    async def duty(self) -> list[PendingRecord]:
        """One heartbeat: beat, then a pass of the sweep unless the beat was late or failed."""
        await self._beat_or_hold()
        if time.monotonic() < self._sweep_from:
            return []
        return await self.sweep_orphans()

    async def purge(self, now: float | None = None) -> int:
        """Delete the records that ended longer than the retention ago, and their trails."""
        now = time.time() if now is None else now
        # a batch at a time: the heartbeat never waits for all of it
        ended = "state != 'pending' AND finished_at < ?"  # through the index records_finished
        purged = await self._file.delete_batches("records", "rowid", ended, now - self._retention)
        await self._file.delete_batches("endings", "seq", "at < ?", now - _ENDINGS_KEPT)
        await self._file.delete_batches("events", "seq", _TRAIL_GONE, now - self._retention)
        return purged

    async def _sweep(self, sweep: OrphanSweep) -> None:
        sweep.between = functools.partial(self._keep_beating, sweep)
        for (owner,) in await self._file.rows(_LOST_OWNERS, (self._store.process_id, self._ttl)):
            if not await sweep.owner(owner):
                return

    async def _beat_or_hold(self, began: float | None = None) -> bool:
        """Beat; whether it was on time, counted from ``began`` (monotonic; by default now).
        One late or failed judges nobody lost for one TTL: the others' beats waited too."""
        began = time.monotonic() if began is None else began
        on_time = False
        try:
            await self.beat()
            on_time = time.monotonic() - began <= self._interval
        finally:
            if not on_time:
                self._sweep_from = time.monotonic() + self._ttl
        return on_time

    async def _keep_beating(self, sweep: OrphanSweep) -> None:
        """Before each record of a sweep: beat every heartbeat interval. A beat that waited
        longer than that ends the pass (and holds the next)."""
        if time.monotonic() - self._beaten_at < self._interval:
            return
        if not await self._beat_or_hold():
            sweep.deadline = time.monotonic()  # the next record waits for another pass
