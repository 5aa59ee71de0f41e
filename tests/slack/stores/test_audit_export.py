"""``python -m bot audit`` only reads: it writes nothing to the store it exports.

An operator exports while a bot is down, or from another host. Were the export a started
store, it would beat as a live process, purge, and sweep: the pending questions of the bot
that is down (its heartbeat gone) would be failed ``OWNER_LOST`` with no provider to close
their Slack messages. So each test leaves a dead bot's pending question in a real store,
runs the command as an operator does (a subprocess), and checks that the trail came out and
that the store is exactly as it was: SQLite's ``PRAGMA data_version`` (it changes when any
other connection commits) and Redis's count of writes (a private server: nothing else writes
to it) say that nothing at all was written, not merely that the last effects were undone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent, asked_event, event_for
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import SqlitePendingStore
from adapters.slack.stores.redis import RedisPendingStore
from adapters.slack.stores.sqlite_schema import _MIGRATIONS
from tests.bot_process import run_bot_command
from tests.conftest import TEST_REDIS_URL
from tests.redis_server import RedisServer
from tests.slack.stores.test_store_contract import make_record as contract_record
from tests.sqlite_tools import store_connect

DEAD = "bot-host-4242-0a0b0c"
"""The process that asked the pending question and is gone (crashed, or down for a deploy)."""


def make_record(owner: str | None) -> PendingRecord:
    """A fresh pending record with one question and a posted message."""
    return contract_record(owner or "").model_copy(
        update={"owner": owner, "message_channel": "C0123456", "message_ts": "1767225600.000100"}
    )


def answered(record: PendingRecord, at: float) -> tuple[PendingRecord, AuditEvent]:
    """``record`` answered by a person at ``at``, and the event of that write."""
    done = record.next(state="answered", finished_at=at, answered_by="U1", answered_by_name="alice")
    event = event_for(record, done, by="U1", by_name="alice", at=at)
    assert event is not None
    return done, event


class Trail:
    """What the dead bot left: its pending question, one answered, one long finished."""

    def __init__(self) -> None:
        self.now = time.time()
        self.pending = make_record(DEAD)
        self.done = make_record(None)
        self.ended, self.ending = answered(self.done, self.now - 60)
        self.old = answered(make_record(None), self.now - 100 * 86400)[0]
        """Finished past the 90 days kept: a purge would delete it."""

    async def leave_in(self, store: SqlitePendingStore | RedisPendingStore) -> None:
        """Write the trail as the bot did, then stop (its heartbeat goes with it)."""
        await store.start()
        try:
            for record in (self.pending, self.done):
                asked = asked_event(record, by="deploy-agent", link=None, at=self.now - 120)
                assert await store.create(record, asked)
            assert await store.compare_and_set(self.ended, self.ending)
            assert await store.create(self.old)
        finally:
            await store.close()

    @property
    def expected(self) -> list[tuple[str, str]]:
        """``(request id, kind)`` of each event the export prints, in order."""
        return [
            (self.pending.id, "asked"),
            (self.done.id, "asked"),
            (self.done.id, "answered"),
        ]


def exported(out: str) -> list[tuple[str, str]]:
    return [(e["requestId"], e["kind"]) for e in map(json.loads, out.splitlines())]


# -- SQLite -----------------------------------------------------------------------------------


def sqlite_env(path: Path) -> dict[str, str]:
    return {"STORE": "sqlite", "STORE_PATH": str(path), "RETENTION_DAYS": "90"}


@pytest.mark.slow
async def test_the_export_of_a_sqlite_store_writes_nothing_and_fails_no_dead_bots_question(
    tmp_path: Path,
) -> None:
    path = tmp_path / "questions.db"
    trail = Trail()
    await trail.leave_in(SqlitePendingStore(path, process_id=DEAD))
    last_beat = trail.now - 3600  # long past the 6 s a heartbeat lasts: any sweep fails it
    with contextlib.closing(store_connect(path, isolation_level=None)) as db:
        db.execute("INSERT INTO alive (process_id, beat_at) VALUES (?, ?)", (DEAD, last_beat))
        seen = db.execute("PRAGMA data_version").fetchone()[0]

        code, out, err = await run_bot_command(
            ["audit", "--since", "1h"], sqlite_env(path), cwd=tmp_path
        )

        assert code == 0, err
        assert exported(out) == trail.expected
        rows = db.execute("SELECT id, state, version FROM records ORDER BY id").fetchall()
        assert sorted(rows) == sorted(
            (r.id, r.state, r.version) for r in (trail.pending, trail.ended, trail.old)
        ), "the export purged or swept the store"
        assert db.execute("SELECT * FROM alive").fetchall() == [(DEAD, last_beat)]
        assert db.execute("PRAGMA data_version").fetchone()[0] == seen, (
            "the export wrote to the store (a heartbeat, a purge or a schema upgrade)"
        )


@pytest.mark.slow
async def test_the_export_reads_an_older_sqlite_schema_as_it_is(tmp_path: Path) -> None:
    """Schema 3 (records ``WITHOUT ROWID``) has the trail as today: it is read, not upgraded
    (the upgrade is the bot's to make, at its next start)."""
    path = tmp_path / "old.db"
    record = make_record(None)
    asked = asked_event(record, by="api", link=None, at=time.time() - 60)
    with contextlib.closing(store_connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode = WAL")
        for statement in (s for migration in _MIGRATIONS[:3] for s in migration):
            db.execute(statement)
        db.execute("PRAGMA user_version = 3")
        db.execute(
            "INSERT INTO records (id, version, state, owner, finished_at, json, event)"
            " VALUES (?, 0, 'pending', NULL, NULL, ?, ?)",
            (record.id, record.dump(), asked.dump()),
        )
        seen = db.execute("PRAGMA data_version").fetchone()[0]

        code, out, err = await run_bot_command(
            ["audit", "--since", "1h"], sqlite_env(path), cwd=tmp_path
        )

        assert code == 0, err
        assert exported(out) == [(record.id, "asked")]
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        assert db.execute("PRAGMA data_version").fetchone()[0] == seen


@pytest.mark.slow
async def test_the_export_refuses_a_missing_file_or_one_without_a_trail(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    code, out, err = await run_bot_command(
        ["audit", "--since", "1h"], sqlite_env(missing), cwd=tmp_path
    )
    assert (code, out) == (1, "")
    assert f"cannot read the pending store STORE_PATH={missing}" in err
    assert not missing.exists()  # an export makes no store

    first = tmp_path / "first.db"  # schema 1: before the trail was kept
    with contextlib.closing(store_connect(first, isolation_level=None)) as db:
        for statement in _MIGRATIONS[0]:
            db.execute(statement)
        db.execute("PRAGMA user_version = 1")
    code, out, err = await run_bot_command(
        ["audit", "--since", "1h"], sqlite_env(first), cwd=tmp_path
    )
    assert (code, out) == (1, "")
    assert "has schema 1, which keeps no audit trail" in err
    with contextlib.closing(store_connect(first)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1


# -- Redis ------------------------------------------------------------------------------------


async def writes_so_far(client: aioredis.Redis) -> int:
    """How many writes the server took since it started (it never snapshots: ``--save ""``)."""
    info = await client.info("persistence")
    return int(info["rdb_changes_since_last_save"])


@pytest.mark.slow
async def test_the_export_of_a_redis_store_writes_nothing_and_fails_no_dead_bots_question(
    tmp_path: Path, store_prefix: str
) -> None:
    async with (
        RedisServer.start(tmp_path / "redis") as server,
        contextlib.aclosing(aioredis.from_url(server.url, decode_responses=True)) as client,
    ):
        trail = Trail()
        await trail.leave_in(RedisPendingStore(server.url, prefix=store_prefix, process_id=DEAD))
        assert await client.exists(f"{store_prefix}:alive:{DEAD}") == 0  # the bot is gone
        assert await client.sismember(f"{store_prefix}:owners", DEAD)  # a sweep would fail it
        before = await writes_so_far(client)

        env = {"REDIS_URL": server.url, "REDIS_PREFIX": store_prefix, "RETENTION_DAYS": "90"}
        code, out, err = await run_bot_command(["audit", "--since", "1h"], env, cwd=tmp_path)

        assert code == 0, err
        assert exported(out) == trail.expected
        async with asyncio.timeout(5):
            alive = [key async for key in client.scan_iter(match=f"{store_prefix}:alive:*")]
            record = PendingRecord.load(await client.get(f"{store_prefix}:req:{trail.pending.id}"))
        assert (record.state, record.version, record.owner) == ("pending", 0, DEAD)
        assert alive == [], "the export beat as a live process"
        assert await writes_so_far(client) == before, (
            "the export wrote to Redis (a heartbeat or a sweep)"
        )


# -- the stores' reading, in process ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_store_opened_for_reading_starts_no_task_and_sweeps_nobody(
    kind: str, tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    """Heartbeats every 50 ms, lasting 100 ms: a started store would have swept the dead
    bot's question within the half second the reader stays open."""
    fast = {"heartbeat_interval": 0.05, "heartbeat_ttl": 0.1}
    path = tmp_path / "questions.db"
    prefix = store_prefix  # (``redis_admin`` deletes its keys afterwards)

    def store(**options: float | str) -> SqlitePendingStore | RedisPendingStore:
        if kind == "sqlite":
            return SqlitePendingStore(path, **options)  # type: ignore[arg-type]
        return RedisPendingStore(TEST_REDIS_URL, prefix=prefix, **options)  # type: ignore[arg-type]

    async def pending_record() -> PendingRecord:
        if kind == "sqlite":
            with contextlib.closing(store_connect(path)) as db:
                (raw,) = db.execute(
                    "SELECT json FROM records WHERE id = ?", (trail.pending.id,)
                ).fetchone()
        else:
            raw = await redis_admin.get(f"{prefix}:req:{trail.pending.id}")
        return PendingRecord.load(raw)

    trail = Trail()
    await trail.leave_in(store(process_id=DEAD))
    running = asyncio.all_tasks()
    async with asyncio.timeout(10), store(**fast).reading() as reader:
        assert asyncio.all_tasks() == running, "opened for reading, the store started a task"
        await asyncio.sleep(0.5)
        events = [(e.request_id, e.kind) async for e in reader.audit(trail.now - 3600)]
        assert events == trail.expected
        assert [e.kind for e in await reader.events(trail.done.id)] == ["asked", "answered"]
    record = await pending_record()
    assert (record.state, record.version, record.owner) == ("pending", 0, DEAD)
