"""A rolling deploy across the chained audit trail: a process of an earlier release keeps
writing the store while this release runs on it.

SQLite: the earlier release writes with its own SQL (verbatim from git history, below) on a
connection that registers no function; this release upgrades the file under it. Its writes
go through, unchained, and ``python -m bot audit --verify`` and the export report them as
such (how many, where), exit 0; an edited chained event is still named by its position,
exit 1. Redis: the earlier release appended ``XADD … e <event>`` to both streams.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent, asked_event, chain_hash
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import SqlitePendingStore
from adapters.slack.stores.redis import RedisPendingStore
from adapters.slack.stores.sqlite_schema import _MIGRATIONS
from tests.bot_process import run_bot_command
from tests.conftest import TEST_REDIS_URL
from tests.slack.stores.test_audit_export import answered, make_record

pytestmark = pytest.mark.timeout(90)

# The release before the chain (schema 4, ``git show 9fe2423^:adapters/slack/stores/``):
# a write's event rides in the ``event`` column, a trigger appends it; an event without a
# write is inserted as it is.
EARLIER_CREATE = (
    "INSERT INTO records (id, version, state, owner, finished_at, json, event)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING version"
)
EARLIER_CAS = (
    "UPDATE records SET version = ?, state = ?, owner = ?, finished_at = ?, json = ?,"
    " event = ? WHERE id = ? AND version = ?"
    " AND (state = 'pending' OR ? = 'pending' OR state = ?)"
    " RETURNING version"
)
EARLIER_APPEND = "INSERT INTO events (request_id, at, json) VALUES (?, ?, ?) RETURNING seq"

# Schema 5 as the first chained release made it (``git show 9fe2423:…/sqlite_schema.py``):
# its trigger calls ``chain_hash``, a function each of its connections registered.
CHAINED_BY_FUNCTION = """CREATE TRIGGER event_chained AFTER INSERT ON events BEGIN
            UPDATE events SET prev = (SELECT hash FROM chain_head), question_prev = (
                SELECT e.hash FROM events e WHERE e.request_id = NEW.request_id
                AND e.seq < NEW.seq ORDER BY e.seq DESC LIMIT 1) WHERE seq = NEW.seq;
            UPDATE events SET hash = chain_hash(prev, question_prev, json) WHERE seq = NEW.seq;
            INSERT INTO chain_head (one, seq, hash) SELECT 1, seq, hash FROM events
                WHERE seq = NEW.seq ON CONFLICT (one) DO UPDATE
                SET seq = excluded.seq, hash = excluded.hash; END"""
PURGED_CHAINED = """CREATE TRIGGER event_purged AFTER DELETE ON events
            WHEN OLD.hash IS NOT NULL BEGIN
            INSERT OR REPLACE INTO purged (seq, at, hash) VALUES (OLD.seq, OLD.at, OLD.hash); END"""


class EarlierRelease:
    """A process of an earlier release writing the file with its own SQL."""

    def __init__(self, path: Path, schema: int) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=5)
        if schema == 5:  # that release registered its trigger's function
            self.db.create_function("chain_hash", 3, chain_hash, deterministic=True)

    def create(self, record: PendingRecord, event: AuditEvent) -> None:
        shown = (record.id, record.version, record.state, record.owner, record.finished_at)
        assert self.db.execute(EARLIER_CREATE, (*shown, record.dump(), event.dump())).fetchall()

    def compare_and_set(self, record: PendingRecord, event: AuditEvent) -> None:
        fields = (record.version, record.state, record.owner, record.finished_at, record.dump())
        where = (record.id, record.version - 1, record.state, record.state)
        assert self.db.execute(EARLIER_CAS, (*fields, event.dump(), *where)).fetchall()

    def append(self, event: AuditEvent) -> None:
        self.db.execute(EARLIER_APPEND, (event.request_id, event.at, event.dump())).fetchall()


def file_at(path: Path, schema: int) -> None:
    """A store file as the release of ``schema`` left it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        for statement in (s for migration in _MIGRATIONS[:schema] for s in migration):
            db.execute(statement)
        if schema == 5:
            db.execute(CHAINED_BY_FUNCTION)
            db.execute(PURGED_CHAINED)
        db.execute(f"PRAGMA user_version = {schema}")
    path.chmod(0o600)


def asked(record: PendingRecord, at: float) -> AuditEvent:
    return asked_event(record, by="deploy-agent", link=None, at=at)


@pytest.mark.slow
@pytest.mark.parametrize("schema", [4, 5], ids=["before the chain", "chained by a function"])
async def test_an_earlier_release_writes_on_and_verify_reports_its_events_unchained(
    sqlite_path: Path, tmp_path: Path, schema: int
) -> None:
    now = time.time()
    file_at(sqlite_path, schema)
    earlier = EarlierRelease(sqlite_path, schema)
    shared, mine, theirs = make_record(None), make_record(None), make_record(None)
    earlier.create(shared, asked(shared, now - 50))  # position 1, before the upgrade
    store = SqlitePendingStore(sqlite_path, process_id="new-release")
    await store.start()  # the upgrade, with the earlier release's connection open
    try:
        assert await store.create(mine, asked(mine, now - 40))  # 2
        earlier.create(theirs, asked(theirs, now - 30))  # 3
        earlier.append(AuditEvent.load(asked(shared, now - 29).dump()))  # 4
        done, ending = answered(shared, now - 20)
        assert await store.compare_and_set(done, ending)  # 5: same question as 1 and 4
        their_done, their_ending = answered(theirs, now - 10)
        earlier.compare_and_set(their_done, their_ending)  # 6
        await store.append_event(asked(theirs, now - 5))  # 7: same question as 3 and 6
        found = await store.check_chain(now - 86400)
    finally:
        await store.close()
        earlier.db.close()
    assert found is not None and found.breaks == []
    with sqlite3.connect(sqlite_path) as db:
        bare = [seq for (seq,) in db.execute("SELECT seq FROM events WHERE hash IS NULL")]
        assert db.execute("PRAGMA user_version").fetchone()[0] == 6
    # the earlier release's, every one kept (schema 5's trigger chained the first)
    first = [(1, "at position 1")] if schema == 4 else []
    assert bare == [1, 3, 4, 6][schema - 4 :]
    assert found.unchained == [*first, (2, "at positions 3-4"), (1, "at position 6")]
    told = f"{len(bare)} events not chained"
    env = {"STORE": "sqlite", "STORE_PATH": str(sqlite_path)}
    code, _, err = await run_bot_command(["audit", "--verify"], env, cwd=tmp_path)
    assert code == 0 and "intact" in err, err
    assert told in err and "at positions 3-4" in err and "TAMPERED" not in err, err
    code, out, err = await run_bot_command(["audit", "--since", "1d"], env, cwd=tmp_path)
    assert code == 0 and len(out.splitlines()) == 7 and told in err, err
    with sqlite3.connect(sqlite_path) as db:  # a chained event edited: still tampering
        db.execute("UPDATE events SET json = replace(json, 'alice', 'mallory') WHERE seq = 5")
    code, out, err = await run_bot_command(["audit", "--since", "1d"], env, cwd=tmp_path)
    assert code == 1 and "TAMPERED: position 5" in err and told in err, err


async def test_a_chained_event_stripped_of_its_hash_is_not_taken_for_an_earlier_releases(
    sqlite_path: Path,
) -> None:
    """Passing an edited event off as unchained breaks the link of the chained one after it
    (or, the newest, the checkpointed head)."""
    now = time.time()
    store = SqlitePendingStore(sqlite_path, process_id="new-release")
    await store.start()
    try:
        for n, record in enumerate(make_record(None) for _ in range(3)):
            await store.append_event(asked(record, now + n))
    finally:
        await store.close()
    for seq, named in ((2, "position 3: it does not follow position 1"), (3, "position 3: the")):
        with sqlite3.connect(sqlite_path) as db:
            db.execute(f"UPDATE events SET hash = NULL, prev = NULL WHERE seq = {seq}")
        reader = SqlitePendingStore(sqlite_path)
        async with reader.reading() as trail:
            found = await trail.check_chain(now - 86400)
        assert found is not None and any(named in b for b in found.breaks), found


@pytest.mark.slow
async def test_redis_an_earlier_releases_events_are_reported_unchained(
    redis_admin: aioredis.Redis, store_prefix: str, tmp_path: Path
) -> None:
    now = time.time()
    store = RedisPendingStore(TEST_REDIS_URL, prefix=store_prefix, process_id="new-release")
    record = make_record(None)
    await store.start()

    async def earlier(event: AuditEvent) -> None:
        for key in (f"{store_prefix}:audit", f"{store_prefix}:events:{event.request_id}"):
            await redis_admin.xadd(key, {"e": event.dump()})

    try:
        await store.append_event(asked(record, now - 30))  # position 1
        for n in range(20):  # more than a page of the script's look back
            await earlier(asked(record, now - 29 + n))
        await store.append_event(answered(record, now - 5)[1])  # 2: after 20 unchained
        found = await store.check_chain(now - 86400)
    finally:
        await store.close()
    assert found == ([], [(20, "after position 1")])
    env: dict[str, Any] = {"REDIS_URL": TEST_REDIS_URL, "REDIS_PREFIX": store_prefix}
    code, _, err = await run_bot_command(["audit", "--verify"], env, cwd=tmp_path)
    assert code == 0 and "20 events not chained" in err and "after position 1" in err, err
