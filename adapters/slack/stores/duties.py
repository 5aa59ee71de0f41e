"""The background duties of the durable stores (SQLite, Redis): liveness and its sweep,
and the retention's purge.

Every process beats (its heartbeat) every interval. The pending records of a process whose
heartbeat is gone are failed with ``OWNER_LOST`` (``fail_orphans``, a compare-and-set per
record, so a record answered meanwhile is left alone) and the store's ``on_orphans`` is
told, so those requests' messages say so in Slack. A detached record (asked over the HTTP
API) whose message its lost process never posted is taken for the sweeping process instead,
and reported (still open) for it to post.

The purge (finished records, old audit entries) runs every ``PURGE_EVERY`` in a task of its
own (``run_purges``), not in the heartbeat: a purge that took longer than the heartbeat's TTL
would let the beat lapse, and other processes would fail this one's questions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Sequence

from adapters.slack.record import PendingRecord
from adapters.slack.stores.protocol import (
    OWNER_LOST_NOTE,
    PendingStore,
    ReportsOrphans,
    StoreConflict,
    mutate,
)
from bot.questions.errors import OWNER_LOST

__all__ = [
    "PURGE_EVERY",
    "default_process_id",
    "fail_orphans",
    "log_orphans",
    "run_heartbeats",
    "run_purges",
    "stop_tasks",
]


def default_process_id() -> str:
    """An id unique to this process: host, pid and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


async def fail_orphans(store: PendingStore, owner: str) -> list[PendingRecord]:
    """Fail the pending records of the lost process ``owner``; the records written.

    A detached record (the HTTP API's, its message not posted yet) is not failed: it is
    taken for this process (still open), whose provider posts it."""
    failed: list[PendingRecord] = []
    for record in await store.open_records(owner=owner):
        written = await _fail_orphan(store, record.id, owner)
        if written is not None:
            failed.append(written)
    return failed


async def _fail_orphan(store: PendingStore, request_id: str, owner: str) -> PendingRecord | None:
    now = time.time()

    def lost(current: PendingRecord) -> PendingRecord | None:
        if not current.is_open or current.owner != owner:
            return None
        if current.detached:  # its message was never stored: this process posts it
            return current.next(owner=store.process_id)
        return current.next(
            state="failed", error_code=OWNER_LOST, note=OWNER_LOST_NOTE, finished_at=now
        )

    try:
        _, written = await mutate(store, request_id, lost)
    except StoreConflict:
        return None
    return written


def log_orphans(log: logging.Logger, failed: Sequence[PendingRecord]) -> None:
    """Say (once per sweep) how many questions of which lost processes were failed."""
    failed = [record for record in failed if not record.is_open]  # not the ones taken up
    if failed:
        lost = ", ".join(sorted({str(record.owner) for record in failed}))
        log.warning("pending store failed %d question(s) of lost process(es) %s", len(failed), lost)


async def run_heartbeats(
    interval: float,
    stopped: Callable[[], bool],
    duty: Callable[[], Awaitable[list[PendingRecord]]],
    store: ReportsOrphans,
    log: logging.Logger,
) -> None:
    """Every ``interval`` until ``stopped()``: run ``duty`` and report what it failed.

    A failing duty is logged and tried again next time; so is a failing ``on_orphans``.
    """
    while not stopped():
        await asyncio.sleep(interval)
        try:
            orphans = await duty()
        except Exception:  # never let one failure stop the heartbeats
            log.exception("pending store heartbeat failed")
            continue
        if orphans and store.on_orphans is not None:
            try:
                await store.on_orphans(orphans)
            except Exception:
                log.exception("on_orphans failed")


PURGE_EVERY = 3600.0
"""Seconds between two purges while a store runs (read when it starts)."""


async def run_purges(
    every: float,
    stopped: Callable[[], bool],
    purge: Callable[[], Awaitable[int]],
    log: logging.Logger,
) -> None:
    """Every ``every`` until ``stopped()``: ``purge``. A failure is logged and tried again
    next time."""
    while not stopped():
        await asyncio.sleep(every)
        try:
            await purge()
        except Exception as exc:  # never let one failure stop the purges
            log.warning("pending store purge failed: %s", exc)


async def stop_tasks(
    tasks: Sequence[asyncio.Task[None]], log: logging.Logger, patience: float | None = None
) -> None:
    """Cancel ``tasks`` and wait for them (``patience``: then warn and go on)."""
    for task in tasks:
        task.cancel()
    if tasks:
        _, stuck = await asyncio.wait(tasks, timeout=patience)
        if stuck:
            log.warning("pending store background tasks did not stop in time")
