"""The SQLite store's export of a time range reads that range, not the whole trail.

``audit(since, until)`` runs at every bot start (``LostPosts.resume``: the last minutes)
and for ``python -m bot audit``. Read by ``seq`` from the first event ever, it walked the
whole ``events`` table each time; the range is found through the ``events_at`` index. The
statements the store runs are captured as it runs them and SQLite's plan of each is
checked (not a timing). The export's contents and order stay what every store promises:
each event of the range once, in the order appended, over several pages, including
events whose ``at`` is out of append order (several processes' clocks).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.stores.sqlite_file import CHUNK, SqliteFile

pytestmark = pytest.mark.timeout(60)


def event(at: float, n: int) -> AuditEvent:
    return AuditEvent(
        request_id=f"r{n % 37:04d}",
        at=at,
        kind="changed",
        version=n,
        shown_sha256="0" * 64,
        detail={"n": n},
    )


def spread(now: float, count: int) -> list[AuditEvent]:
    """``count`` events a hundredth of a second apart, in append order; every fifth one's
    ``at`` is 35 ms early (behind the three appended before it: another process's clock)."""
    return [event(now + n * 0.01 - (0.035 if n % 5 == 4 else 0.0), n) for n in range(count)]


async def fill(store: Any, events: Sequence[AuditEvent]) -> None:
    for each in events:
        await store.append_event(each)


def statements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements (and their parameters) the SQLite store runs from now on."""
    seen: list[tuple[str, tuple[Any, ...]]] = []
    rows = SqliteFile.rows

    async def spy(self: SqliteFile, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        seen.append((sql, tuple(params)))
        return await rows(self, sql, params)

    monkeypatch.setattr(SqliteFile, "rows", spy)
    return seen


def plan(path: Path, sql: str, params: tuple[Any, ...]) -> list[str]:
    """SQLite's plan of ``sql`` on the store's file (the details, one per step)."""
    db = sqlite3.connect(path)
    try:
        return [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    finally:
        db.close()


def reads_a_range(steps: list[str]) -> bool:
    """A plan that reads ``events`` only between two bounds: through ``events_at``, or by
    ``seq`` (the rowid) between a first and a last."""
    return all(
        not step.startswith("SCAN") and ("INDEX events_at" in step or "rowid>? AND rowid<?" in step)
        for step in steps
        if "events" in step
    )


@pytest.mark.slow
@pytest.mark.parametrize("closed", [False, True], ids=["since", "since-until"])
async def test_an_export_of_a_time_range_is_read_through_the_events_at_index(
    sqlite_store: Any, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch, closed: bool
) -> None:
    now = time.time()
    events = spread(now, 1200)
    await fill(sqlite_store, events)
    since = events[900].at
    until = events[1000].at if closed else None
    ran = statements(monkeypatch)
    exported = [e async for e in sqlite_store.audit(since, until)]
    assert exported  # (what it holds: the next test)
    reads = [(sql, params) for sql, params in ran if "events" in sql]
    assert reads
    plans = [plan(sqlite_path, sql, params) for sql, params in reads]
    # The range is found through the index on ``at`` ...
    assert any("INDEX events_at" in step for step in plans[0]), plans
    # ... and nothing walks the table from its first event (or scans it).
    assert all(reads_a_range(steps) for steps in plans), plans


@pytest.mark.slow
async def test_an_export_over_several_pages_has_each_event_of_the_range_once_in_append_order(
    sqlite_store: Any, memory_store: Any
) -> None:
    now = time.time()
    events = spread(now, 4 * CHUNK)
    # Appended late with an early ``at`` (inside the range, after its last event) and
    # appended in the middle with an ``at`` before the range: in, and out.
    late = event(events[700].at + 0.001, 10_001)
    stray = event(events[10].at, 10_002)
    events = [*events[:1100], stray, *events[1100:], late]
    for store in (sqlite_store, memory_store):
        await fill(store, events)
    for since, until in (
        (events[300].at, events[1500].at),  # several pages, both ends cut
        (events[300].at, None),  # on to the newest
        (now - 60, None),  # all of them
        (events[1950].at, events[1951].at),  # a few, or none
        (now + 3600, None),  # none
    ):
        expected = [e for e in events if e.at >= since and (until is None or e.at < until)]
        exported = [e async for e in sqlite_store.audit(since, until)]
        assert [e.version for e in exported] == [e.version for e in expected], (since, until)
        assert exported == expected
        # the same as the memory store's (the order every store promises)
        assert exported == [e async for e in memory_store.audit(since, until)]
    several = [e async for e in sqlite_store.audit(events[300].at, events[1500].at)]
    assert len(several) > 2 * CHUNK
    assert late in several and stray not in several
    assert len({e.version for e in several}) == len(several)  # none twice


async def test_an_old_event_appended_last_is_exported_once(sqlite_store: Any) -> None:
    # The range's first event by ``seq`` is the one appended last: the range's one page
    # starts there (not at its earliest ``at``).
    now = time.time()
    events = spread(now, 50)
    old = event(now - 30, 999)
    await fill(sqlite_store, [*events, old])
    exported = [e async for e in sqlite_store.audit(now - 31, now - 29)]
    assert exported == [old]
    assert [e async for e in sqlite_store.audit(now - 31)] == [*events, old]
