"""The SQLite store's wake-ups from other processes on the same file."""

from __future__ import annotations

import asyncio
import logging
import time

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.sqlite_file import SqliteFile
from adapters.slack.stores.watches import LOST_CHECK_INTERVAL, WatchRegistry
from bot.questions.errors import UserQuestionError

__all__ = ["SqliteEndings"]


class SqliteEndings:
    """Notices endings written by other processes and resolves this process's watches."""

    def __init__(
        self,
        file: SqliteFile,
        watches: WatchRegistry,
        *,
        poll_interval: float,
        log: logging.Logger,
    ) -> None:
        self._file = file
        self._watches = watches
        self._poll_interval = poll_interval
        self._log = log
        self._data_version = -1
        self._seen_seq = 0
        self._lost_checked = 0.0
        self._lost_due = False
        """Another process committed since the last check for deleted records."""

    async def begin(self) -> None:
        """Start from now: what ended before is read by the watches themselves."""
        self._seen_seq = int(await self._file.scalar("SELECT COALESCE(MAX(seq), 0) FROM endings"))
        self._data_version = int(await self._file.scalar("PRAGMA data_version"))

    async def poll(self) -> None:
        """Look every ``poll_interval`` while the file is open (run as a task)."""
        while self._file.is_open:
            await asyncio.sleep(self._poll_interval)
            try:
                await self.poll_once()
            except Exception:  # never let one failure stop the wake-ups
                self._log.exception("pending store poll failed")

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
        self._resolve(
            await self._file.rows_in("SELECT id, json FROM records WHERE id IN ({ids})", wanted)
        )

    async def _check_lost(self) -> None:
        """Fail the waits on records another process deleted (``RECORD_LOST``); resolve those
        on records stored ended by an insert (put back failed), which feeds no ending."""
        ids = self._watches.waiting_ids()
        rows = await self._file.rows_in("SELECT id, state FROM records WHERE id IN ({ids})", ids)
        states: dict[str, str] = dict(rows)
        for request_id in ids:
            if request_id not in states:
                self._log.error("pending store lost record %s (deleted)", request_id)
                self._watches.lost(request_id)
        ended = [request_id for request_id, state in states.items() if state != "pending"]
        # (one reopened since the look at its state is not ended: ``_resolve`` leaves it)
        self._resolve(
            await self._file.rows_in("SELECT id, json FROM records WHERE id IN ({ids})", ended)
        )

    def _resolve(self, rows: list[tuple[str, str]]) -> None:
        """Resolve the watches of the ended records in ``rows`` (id, JSON); one this version
        cannot read fails its own waits (``STORE_UNAVAILABLE``)."""
        for request_id, raw in rows:
            try:
                record = PendingRecord.load(raw, of=request_id)
            except UserQuestionError as exc:
                self._log.error("%s; its waits in this process end", exc.message)
                self._watches.fail(request_id, exc)
                continue
            if not record.is_open:
                self._watches.resolve(record, raw)
