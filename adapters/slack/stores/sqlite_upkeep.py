"""The SQLite store's upkeep: heartbeats, the sweep of lost processes' records, retention,
and the WAL's checkpoints.

Every process beats in ``alive`` every ``heartbeat_interval``; the pending records of a
process whose beat is older than ``heartbeat_ttl`` are failed with ``OWNER_LOST`` by the next
sweep. Finished records, the endings feed and audit events older than their keeping time are
deleted at start and then every hour: a pending record is never purged, nor its trail; a
finished record goes the retention after it ended, and its trail with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from adapters.slack.record import PendingRecord
from adapters.slack.stores.duties import fail_orphans, log_orphans
from adapters.slack.stores.protocol import PendingStore
from adapters.slack.stores.sqlite_audit import SqliteAudit
from adapters.slack.stores.sqlite_file import SqliteFile, batch_delete
from bot.questions.errors import UserQuestionError

__all__ = ["SqliteUpkeep"]

_ENDINGS_KEPT: Final = 3600.0
"""How long an entry of the endings feed is kept (pollers look every fraction of a second)."""
_PURGE_RECORDS: Final = batch_delete(
    "records", "rowid", "state != 'pending' AND finished_at < ?"
)  # through the partial index records_finished
_PURGE_ENDINGS: Final = batch_delete("endings", "seq", "at < ?")


class SqliteUpkeep:
    """This process's heartbeat, the sweep for other processes' orphans, the retention."""

    def __init__(
        self,
        file: SqliteFile,
        store: PendingStore,
        audit: SqliteAudit,
        *,
        retention: float,
        heartbeat_ttl: float,
        log: logging.Logger,
    ) -> None:
        self._file = file
        self._store = store
        self._audit = audit
        self._retention = retention
        self._heartbeat_ttl = heartbeat_ttl
        self._log = log

    async def beat(self) -> None:
        """Say this process is alive."""
        await self._file.rows(
            "INSERT INTO alive (process_id, beat_at) VALUES (?, ?)"
            " ON CONFLICT (process_id) DO UPDATE SET beat_at = excluded.beat_at RETURNING 1",
            (self._store.process_id, time.time()),
        )

    async def stop_beating(self) -> None:
        """Delete this process's heartbeat (at close; a failure is logged)."""
        try:
            await self._file.rows(
                "DELETE FROM alive WHERE process_id = ? RETURNING 1", (self._store.process_id,)
            )
        except UserQuestionError as exc:
            self._log.warning("pending store could not delete its heartbeat: %s", exc)

    async def duty(self) -> list[PendingRecord]:
        """One heartbeat: beat, sweep (the purge runs beside it: ``duties.run_purges``)."""
        await self.beat()
        return await self.sweep_orphans()

    async def checkpoints(self, interval: float) -> None:
        """Copy the WAL into the file every ``interval`` while it is open (run as a task):
        writes, a click's among them, never wait for a checkpoint (``sqlite_file``). A
        failure is logged once until one succeeds again, and tried again next time."""
        failing = False
        while self._file.is_open:
            await asyncio.sleep(interval)
            try:
                await self._file.checkpoint()
            except UserQuestionError as exc:
                if not failing:
                    self._log.warning("pending store checkpoint failed: %s", exc)
                failing = True
            else:
                failing = False

    async def purge(self, now: float | None = None) -> int:
        """Delete the records that ended longer than the retention ago, and their trails.

        Returns how many records went (a pending record is never purged, nor its trail).
        """
        now = time.time() if now is None else now
        # a batch at a time (``delete_batches``): the heartbeat never waits for all of it
        purged = await self._file.delete_batches(_PURGE_RECORDS, (now - self._retention,))
        await self._file.delete_batches(_PURGE_ENDINGS, (now - _ENDINGS_KEPT,))
        await self._audit.purge(now - self._retention)
        return purged

    async def sweep_orphans(self) -> list[PendingRecord]:
        """Fail the pending records of processes whose heartbeat is gone (``OWNER_LOST``)."""
        stale = time.time() - self._heartbeat_ttl
        rows = await self._file.rows(
            "SELECT DISTINCT r.owner FROM records r LEFT JOIN alive a"
            " ON a.process_id = r.owner WHERE r.state = 'pending' AND r.owner IS NOT NULL"
            " AND r.owner != ? AND (a.beat_at IS NULL OR a.beat_at < ?)",
            (self._store.process_id, stale),
        )
        failed: list[PendingRecord] = []
        for (owner,) in rows:
            failed += await fail_orphans(self._store, owner)
        log_orphans(self._log, failed)
        return failed
