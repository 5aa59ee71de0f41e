"""Issue 38, item 14: the audit trail is tamper-evident (SQLite and Redis alike).

Each event carries the hash of the one before it in the trail and in its question's trail,
the newest is checkpointed, and ``python -m bot audit --verify`` (and the export) name every
edited, removed or reordered event by its position and exit 1. The tampering is done as an
attacker would: straight in the SQLite file, or by rewriting the Redis stream.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.stores.redis import CHAIN_TRIES, RedisPendingStore
from adapters.slack.stores.sqlite import SqlitePendingStore
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError
from tests.bot_process import run_bot_command
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.timeout(60)

QUESTIONS = ["a1b2c3d4e5", "f6a7b8c9d0"]
DAY = 86400.0


def _event(n: int, count: int, now: float, question: str | None = None) -> AuditEvent:
    kind = "asked" if n < 2 else "answered" if n >= count - 2 else "changed"
    return AuditEvent(
        request_id=question or QUESTIONS[n % 2],
        at=now + n,
        kind=kind,
        version=n,
        by="U0ALICE",
        shown_sha256="0" * 64,
        detail={"answer": ["Deploy"]} if kind == "answered" else {},
    )


class Backend(Protocol):
    """One store kind: how to open it, how to tamper with it, how the CLI finds it."""

    env: dict[str, str]

    def store(self) -> Any: ...

    async def edit(self, seq: int, old: str, new: str) -> None: ...

    async def remove(self, *seqs: int, as_purged_at: float | None = None) -> None: ...

    async def swap(self, first: int, second: int) -> None: ...


class SqliteBackend:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = {"STORE": "sqlite", "STORE_PATH": str(path)}

    def store(self) -> SqlitePendingStore:
        return SqlitePendingStore(self.path, process_id=f"chain-{uuid.uuid4().hex[:6]}")

    def _sql(self, *statements: str) -> None:
        with sqlite3.connect(self.path) as db:
            for statement in statements:
                db.execute(statement)

    async def edit(self, seq: int, old: str, new: str) -> None:
        self._sql(f"UPDATE events SET json = replace(json, '{old}', '{new}') WHERE seq = {seq}")

    async def remove(self, *seqs: int, as_purged_at: float | None = None) -> None:
        listed = ",".join(map(str, seqs))
        # The purge trigger records any deletion (as now: within the retention).
        trace = [] if as_purged_at is not None else ["DROP TRIGGER event_purged"]
        self._sql(*trace, f"DELETE FROM events WHERE seq IN ({listed})")

    async def swap(self, first: int, second: int) -> None:
        self._sql(
            f"UPDATE events SET seq = 1000 WHERE seq = {first}",
            f"UPDATE events SET seq = {first} WHERE seq = {second}",
            f"UPDATE events SET seq = {second} WHERE seq = 1000",
        )


class RedisBackend:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client, self.prefix = client, prefix
        self.env = {"REDIS_URL": TEST_REDIS_URL, "REDIS_PREFIX": prefix}

    def store(self) -> RedisPendingStore:
        process = f"chain-{uuid.uuid4().hex[:6]}"
        return RedisPendingStore(TEST_REDIS_URL, prefix=self.prefix, process_id=process)

    async def _rewrite(self, change: Any) -> None:
        """Rewrite the audit stream as someone with the Redis password could: entries
        changed, dropped or moved, each keeping its id."""
        key = f"{self.prefix}:audit"
        entries = [(i, dict(f)) for i, f in await self.client.xrange(key)]
        fields = change([f for _, f in entries])
        await self.client.delete(key)
        for (entry_id, _), kept in zip(entries, fields, strict=False):
            if kept is not None:
                await self.client.xadd(key, kept, id=entry_id)

    async def edit(self, seq: int, old: str, new: str) -> None:
        def change(rows: list[dict[str, str]]) -> list[dict[str, str]]:
            for row in rows:
                if row.get("n") == str(seq):
                    row["e"] = row["e"].replace(old, new)
            return rows

        await self._rewrite(change)

    async def remove(self, *seqs: int, as_purged_at: float | None = None) -> None:
        wanted = {str(seq) for seq in seqs}
        for row in await self.client.xrange(f"{self.prefix}:audit"):
            if row[1].get("n") in wanted and as_purged_at is not None:
                trace = f"{as_purged_at} {row[1]['h']}"
                await self.client.hset(f"{self.prefix}:audit:purged", row[1]["n"], trace)
        await self._rewrite(lambda rows: [None if r.get("n") in wanted else r for r in rows])

    async def swap(self, first: int, second: int) -> None:
        def change(rows: list[dict[str, str]]) -> list[dict[str, str]]:
            at = {row["n"]: k for k, row in enumerate(rows)}
            i, j = at[str(first)], at[str(second)]
            rows[i], rows[j] = rows[j], rows[i]
            return rows

        await self._rewrite(change)


@pytest.fixture(params=["sqlite", "redis"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, store_prefix: str, redis_admin: aioredis.Redis
) -> Backend:
    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "q.db")
    return RedisBackend(redis_admin, store_prefix)


async def _trail(backend: Backend, count: int = 6) -> None:
    store = backend.store()
    await store.start()
    try:
        now = time.time()
        for n in range(count):
            await store.append_event(_event(n, count, now))
        assert await store.check_chain(now - DAY) == ([], [])
    finally:
        await store.close()


async def _check(backend: Backend, kept_since: float | None = None) -> list[str]:
    store = backend.store()
    async with store.reading() as trail:
        found = await trail.check_chain(time.time() - DAY if kept_since is None else kept_since)
    assert found is not None and found.unchained == []
    return found.breaks


async def test_an_untouched_trail_verifies(backend: Backend) -> None:
    await _trail(backend)
    assert await _check(backend) == []


async def test_two_stores_appending_at_once_make_one_unbroken_chain(backend: Backend) -> None:
    """Two store instances (as two processes would) append 60 events at once, to the same
    questions and to their own: every event is chained once, the chain verifies whole."""
    first, second = backend.store(), backend.store()
    await first.start()
    await second.start()
    try:
        now = time.time()

        async def write(store: Any, tag: str) -> None:
            for n in range(30):
                question = QUESTIONS[n % 2] if n % 3 else f"{tag}{n:04d}"
                await store.append_event(_event(n, 30, now, question))

        await asyncio.gather(write(first, "aaaa"), write(second, "bbbb"))
        assert await first.check_chain(now - DAY) == ([], [])
        assert len([e async for e in second.audit(now - 1)]) == 60
    finally:
        await first.close()
        await second.close()
    assert await _check(backend) == []


async def test_an_answer_edited_is_named_by_its_position(backend: Backend) -> None:
    await _trail(backend)
    await backend.edit(5, "Deploy", "Rollback")
    assert any("position 5" in p and "edited" in p for p in await _check(backend))


async def test_a_person_swapped_is_caught(backend: Backend) -> None:
    await _trail(backend)
    await backend.edit(6, "U0ALICE", "U0MALLORY")
    assert any("position 6" in p for p in await _check(backend))


async def test_a_removed_event_is_named(backend: Backend) -> None:
    await _trail(backend)
    await backend.remove(3)  # without a trace of a purge
    problems = await _check(backend)
    assert any("position 3" in p and "removed" in p for p in problems), problems


async def test_a_deletion_within_the_retention_is_not_taken_for_a_purge(
    backend: Backend,
) -> None:
    await _trail(backend)
    await backend.remove(4, as_purged_at=time.time())  # its trace left, but recent
    assert any("position 4" in p and "removed" in p for p in await _check(backend))


async def test_reordered_events_are_named(backend: Backend) -> None:
    await _trail(backend)
    await backend.swap(2, 3)
    problems = await _check(backend)
    assert any("position 2" in p or "position 3" in p for p in problems), problems


async def test_the_newest_events_removed_are_caught_by_the_checkpointed_head(
    backend: Backend,
) -> None:
    await _trail(backend)
    await backend.remove(5, 6)
    problems = await _check(backend)
    assert any("position 6" in p and "removed" in p for p in problems), problems


async def test_the_retention_purge_leaves_the_purged_hashes_so_the_chain_goes_on(
    backend: Backend,
) -> None:
    """Events of questions without a record go with the retention; the next event is
    chained to the purged head, and the chain verifies past them."""
    await _trail(backend)
    store = backend.store()
    await store.start()
    try:
        later = time.time() + 200 * DAY
        await store.purge(later)
        assert [e async for e in store.audit(0)] == []
        await store.append_event(_event(9, 10, time.time()))
        await store.append_event(_event(8, 10, time.time()))
        assert await store.check_chain(later) == ([], [])
    finally:
        await store.close()
    await backend.remove(8, as_purged_at=later)  # the newest, "purged": the head names it
    assert any("position 8" in p and "removed" in p for p in await _check(backend, later + 1))


async def test_python_m_bot_audit_verify_and_the_export_exit_1_naming_the_position(
    backend: Backend, tmp_path: Path
) -> None:
    await _trail(backend)
    env = backend.env
    code, _, err = await run_bot_command(["audit", "--verify"], env, cwd=tmp_path)
    assert code == 0 and "intact" in err, err
    await backend.edit(5, "Deploy", "Rollback")
    code, _, err = await run_bot_command(["audit", "--verify"], env, cwd=tmp_path)
    assert code == 1 and "position 5" in err, err
    code, out, err = await run_bot_command(["audit", "--since", "1d"], env, cwd=tmp_path)
    assert code == 1 and "position 5" in err and len(out.splitlines()) == 6, (out, err)


@pytest.mark.parametrize("moves", [3, CHAIN_TRIES])
async def test_redis_a_chained_append_gives_up_under_constant_contention(
    redis_admin: aioredis.Redis, store_prefix: str, moves: int
) -> None:
    """Another process appends (a real append, moving the head) before each of ``moves`` of
    this store's tries: fewer than ``CHAIN_TRIES`` and the append goes through; that many
    and it fails ``STORE_UNAVAILABLE``, nothing of it written. The chain verifies either way."""
    backend = RedisBackend(redis_admin, store_prefix)
    mine, other = backend.store(), backend.store()
    await mine.start()
    await other.start()
    tries, now = 0, time.time()
    script = mine._append_script

    async def contended(**call: Any) -> Any:
        nonlocal tries
        tries += 1
        if tries <= moves:
            await other.append_event(_event(tries, 99, now, f"cc{tries:06d}"))
        return await script(**call)

    mine._append_script = contended
    try:
        event = _event(0, 99, now, "dd000000")
        if moves < CHAIN_TRIES:
            await mine.append_event(event)
            assert tries == moves + 1
        else:
            with pytest.raises(UserQuestionError) as info:
                await mine.append_event(event)
            assert info.value.code == STORE_UNAVAILABLE, info.value
            assert f"before each of {CHAIN_TRIES} tries" in str(info.value)
            assert tries == CHAIN_TRIES
        kept = await redis_admin.xlen(f"{store_prefix}:events:dd000000")
        assert kept == (1 if moves < CHAIN_TRIES else 0)
        assert await mine.check_chain(now - DAY) == ([], [])
    finally:
        await mine.close()
        await other.close()
