"""The durable stores (SQLite, Redis) across restarts; SQLite's schema, WAL and retention.

The restart cases of the store contract: a process writes records and is killed (SIGKILL,
no clean close), then a new process (SQLite: on the same file) or a new client (Redis)
finds every open record with its version and each question's audit trail, and carries on
writing where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.stores import PendingStore, SqlitePendingStore, mutate
from adapters.slack.stores.redis import RedisPendingStore
from adapters.slack.stores.sqlite_file import RUN
from adapters.slack.stores.sqlite_schema import SCHEMA_VERSION
from bot.questions.errors import RECORD_LOST, STORE_UNAVAILABLE, UserQuestionError
from tests.e2e.test_multiprocess import eventually
from tests.slack.stores.test_store_contract import finish_if_open, finished, make_record
from tests.sqlite_tools import store_connect

ROOT = Path(__file__).resolve().parents[3]
SqliteStoreFactory = Callable[..., Awaitable[SqlitePendingStore]]
RedisStoreFactory = Callable[..., Awaitable[RedisPendingStore]]

# A writer process: opens the store, creates three records (one with two draft saves, one
# finished; the second's asked event appended on its own, the others' with their writes),
# prints their JSON, their trails and the audit export, and waits to be killed.
_WRITER = """
import asyncio, json, sys, time
from adapters.slack.model.audit_trail import asked_event
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.stores import SqlitePendingStore, mutate
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions.models import AskUserQuestionItem

async def main() -> None:
    kind, where, prefix = sys.argv[1:4]
    if kind == "sqlite":
        store = SqlitePendingStore(where, process_id="writer")
    else:
        store = RedisPendingStore(where, prefix=prefix, process_id="writer")
    await store.start()
    item = AskUserQuestionItem(id="q1", question="Still there?")
    ids = [f"r-{prefix[-6:]}-{n}" for n in range(3)]
    records = [PendingRecord(id=request_id, owner=None, questions=[item], channel="C1")
               for request_id in ids]
    for record in records:
        asked = asked_event(record, by="api:writer", link=None)
        assert await store.create(record, None if record is records[1] else asked)
    await store.append_event(asked_event(records[1], by="api:writer", link=None))
    for n in range(2):
        await mutate(store, ids[0], lambda r: r.next(drafts=[Draft(selected=[n])]), by="U1")
    await mutate(store, ids[2], lambda r: r.next(state="answered", answered_by="U1",
                                                  finished_at=time.time()))
    written = [await store.get(request_id) for request_id in ids]
    trails = [[e.dump() for e in await store.events(request_id)] for request_id in ids]
    export = [e.dump() async for e in store.audit(0)]
    print(json.dumps({"records": [r.dump() for r in written if r is not None],
                      "trails": trails, "export": export}), flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


@dataclass(frozen=True)
class _Written:
    """What the writer process wrote, as it read it back just before it was killed."""

    records: list[PendingRecord]
    trails: list[list[AuditEvent]]
    """Each record's trail, in the records' order."""
    export: list[AuditEvent]
    """``audit(0)``: every event, in the order appended."""


async def _write_and_kill(kind: str, where: str, prefix: str) -> _Written:
    """Run the writer in its own process, SIGKILL it once it has written; what it wrote."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _WRITER,
        kind,
        where,
        prefix,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), 30)
    finally:
        child.kill()
        await child.wait()
    assert line, "the writer process printed nothing"
    printed = json.loads(line)
    return _Written(
        records=[PendingRecord.load(raw) for raw in printed["records"]],
        trails=[[AuditEvent.load(raw) for raw in trail] for trail in printed["trails"]],
        export=[AuditEvent.load(raw) for raw in printed["export"]],
    )


async def _check_survivors(
    store: SqlitePendingStore | RedisPendingStore, written: _Written
) -> None:
    """Every record is back as written, each question's trail and the export too (the same
    events in the same order); the open ones are open; writing carries on after them."""
    records = written.records
    assert [[(e.kind, e.version) for e in trail] for trail in written.trails] == [
        [("asked", 0), ("changed", 1), ("changed", 2)],
        [("asked", 0)],
        [("asked", 0), ("answered", 1)],
    ]
    assert len(written.export) == 6
    for record, trail in zip(records, written.trails, strict=True):
        assert await store.get(record.id) == record
        assert await store.events(record.id) == trail
    assert [event async for event in store.audit(0)] == written.export
    assert records[0].version == 2 and records[0].drafts == [Draft(selected=[1])]
    assert {r.id for r in await store.open_records()} == {records[0].id, records[1].id}
    _, done = await mutate(store, records[0].id, finish_if_open(answered_by="U2"))
    assert done is not None and done.version == 3 and done.state == "answered"
    trail = await store.events(records[0].id)
    assert trail[:-1] == written.trails[0]
    assert (trail[-1].kind, trail[-1].version) == ("answered", 3)
    stale = records[1].model_copy(update={"version": 5})  # a skipped version is still refused
    assert not await store.compare_and_set(stale)


@pytest.mark.slow
async def test_sqlite_a_new_process_on_the_same_file_keeps_everything(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    async with asyncio.timeout(40):
        sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        prefix = f"t-{uuid.uuid4().hex[:6]}"
        written = await _write_and_kill("sqlite", str(sqlite_path), prefix)
        store = await sqlite_store_factory()
        await _check_survivors(store, written)


@pytest.mark.slow
async def test_redis_a_new_client_keeps_everything(
    redis_store_factory: RedisStoreFactory, redis_url: str, store_prefix: str
) -> None:
    async with asyncio.timeout(40):
        written = await _write_and_kill("redis", redis_url, store_prefix)
        store = await redis_store_factory()
        await _check_survivors(store, written)


@pytest.mark.slow
async def test_sqlite_watch_in_one_process_wakes_on_an_ending_written_by_another(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    """Two stores on one file stand for two processes on one host: polling wakes the watch."""
    async with asyncio.timeout(10):
        asker = await sqlite_store_factory(poll_interval=0.05)
        clicker = await sqlite_store_factory()
        records = [make_record(asker.process_id) for _ in range(3)]
        for record in records:
            await asker.create(record)
        watches = [asker.watch(r.id) for r in records]
        try:
            waits = [asyncio.ensure_future(w.wait()) for w in watches]
            await asyncio.sleep(0.2)
            assert not any(w.done() for w in waits)
            _, done = await mutate(clicker, records[1].id, finish_if_open(answered_by="U3"))
            assert await asyncio.wait_for(waits[1], 5) == done
            await asyncio.sleep(0.2)
            assert not waits[0].done() and not waits[2].done()
        finally:
            for watch in watches:
                watch.close()
        assert asker.watch_count == 0


async def test_sqlite_file_is_in_wal_mode_with_the_current_schema(
    sqlite_store: SqlitePendingStore, sqlite_path: Path
) -> None:
    with store_connect(sqlite_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert sqlite_store.path == sqlite_path


async def test_sqlite_refuses_a_schema_newer_than_it_knows(sqlite_path: Path) -> None:
    sqlite_path.parent.mkdir(parents=True)
    with store_connect(sqlite_path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = SqlitePendingStore(sqlite_path)
    with pytest.raises(RuntimeError, match="newer than this bot's"):
        await store.start()
    await store.close()


async def test_sqlite_unusable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = SqlitePendingStore(blocker / "questions.db")
    with pytest.raises(OSError, match="STORE_PATH="):
        await store.start()
    await store.close()


async def test_sqlite_retention_purges_old_finished_records_only(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    async with asyncio.timeout(10):
        store = await sqlite_store_factory(retention=100.0)
        old, recent, open_ = (make_record(store.process_id) for _ in range(3))
        for record in (old, recent, open_):
            await store.create(record)
        now = time.time()
        await mutate(store, old.id, finish_if_open(finished_at=now - 101))
        await mutate(store, recent.id, finish_if_open(finished_at=now - 99))
        assert await store.purge(now) == 1
        assert await store.get(old.id) is None
        assert await store.get(recent.id) is not None
        assert await store.get(open_.id) is not None  # pending: never purged, however old
        assert await store.purge(now + 10_000) == 1
        assert await store.get(open_.id) is not None


async def test_sqlite_sweep_fails_the_questions_of_a_process_that_stopped_beating(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    async with asyncio.timeout(10):
        doomed = await sqlite_store_factory(heartbeat_interval=0.1, heartbeat_ttl=0.3)
        sweeper = await sqlite_store_factory(heartbeat_interval=0.1, heartbeat_ttl=0.3)
        mine = make_record(doomed.process_id)
        nobodys = make_record(doomed.process_id).model_copy(update={"owner": None})
        for record in (mine, nobodys):
            await doomed.create(record)
        assert await sweeper.sweep_orphans() == []  # alive
        await doomed.close()
        failed = await sweeper.sweep_orphans()
        assert [(r.id, r.state, r.error_code) for r in failed] == [
            (mine.id, "failed", "OWNER_LOST")
        ]
        reread = await sweeper.get(nobodys.id)
        assert reread is not None and reread.is_open  # owned by no process: nobody loses it


@pytest.mark.slow
async def test_redis_a_record_deleted_under_a_waiting_watch_fails_it_with_record_lost(
    redis_store_factory: RedisStoreFactory, redis_admin: Any
) -> None:
    async with asyncio.timeout(15):
        store = await redis_store_factory(heartbeat_interval=0.5, heartbeat_ttl=2.0)
        record = make_record(store.process_id)
        await store.create(record)
        idle = store.watch(record.id)  # registered, never waited on: not judged
        watch = store.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.2)
            started = time.monotonic()
            assert await redis_admin.delete(f"{store.prefix}:req:{record.id}") == 1
            with pytest.raises(UserQuestionError) as info:
                await waiting
            assert time.monotonic() - started < 5
            assert info.value.code == RECORD_LOST
            assert not idle.future.done()  # nobody waited on it: nothing to end
        finally:
            watch.close()
            idle.close()


async def test_sqlite_a_record_deleted_by_another_process_fails_its_waits_with_record_lost(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    async with asyncio.timeout(15):
        store = await sqlite_store_factory(poll_interval=0.05)
        record = make_record(store.process_id)
        await store.create(record)
        watch = store.watch(record.id)
        try:
            waiting = asyncio.ensure_future(watch.wait())
            await asyncio.sleep(0.2)
            started = time.monotonic()
            with store_connect(sqlite_path) as db:
                assert db.execute("DELETE FROM records WHERE id = ?", (record.id,)).rowcount == 1
            with pytest.raises(UserQuestionError) as info:
                await waiting
            assert time.monotonic() - started < 5
            assert info.value.code == RECORD_LOST
        finally:
            watch.close()


@pytest.mark.slow
async def test_an_in_process_ask_whose_redis_record_is_deleted_ends_with_record_lost(
    redis_store_factory: RedisStoreFactory, redis_admin: Any
) -> None:
    """An ``ask()`` waiting in this process: it raises ``RECORD_LOST`` within seconds, its
    message loses its buttons and says why, and nothing is left waiting."""
    from tests.slack_harness import SlackHarness, all_text, interactive_elements, until

    store = await redis_store_factory()
    question = {"questions": [{"id": "q", "question": "Ship it?", "options": [{"label": "Yes"}]}]}
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        asking = h.ask(question)
        message = await h.posted()
        (record,) = await store.open_records()
        for _ in range(500):  # until the message's ts is in the store
            stored = await store.get(record.id)
            if stored is not None and stored.message_ts is not None:
                break
            await asyncio.sleep(0.02)
        request_id = record.id
        started = time.monotonic()
        assert await redis_admin.delete(f"{store.prefix}:req:{request_id}") == 1
        with pytest.raises(UserQuestionError) as info:
            await asking
        assert time.monotonic() - started < 5
        assert info.value.code == RECORD_LOST
        assert h.provider.pending_count == 0

        def retired() -> bool:
            now = h.current(message)
            return not interactive_elements(now.blocks) and "lost" in all_text(now.blocks)

        await until(retired, what="the message to close", within=10)


@pytest.mark.slow
async def test_a_wait_begun_before_the_post_closes_the_message_of_a_record_lost_after_it(
    redis_store_factory: RedisStoreFactory, redis_admin: Any
) -> None:
    """Guards ``wait_ended`` looking again at a record it began waiting on before it had a
    message (the post still queued, or made by another process): the post lands, the ts is
    written, then Redis loses the record. The put-back used the copy read when the wait
    began, with no ``message_ts``, so it was put back without its message, and the message
    kept its buttons for good."""
    from adapters.slack.render.approval import render_record
    from tests.slack_harness import SlackHarness, all_text, interactive_elements, until

    store = await redis_store_factory()
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        request_id = h.provider.request_id_for()  # (one its message's blocks can carry)
        record = make_record(store.process_id, request_id).model_copy(update={"channel": h.channel})
        assert await store.create(record)  # no message yet
        waiting = asyncio.ensure_future(h.provider.wait_ended(record.id))
        await until(lambda: h.provider.pending_count == 1, what="the wait")
        rendered = render_record(record)  # the post, as a poster elsewhere makes it
        reply = await h.client.chat_postMessage(
            channel=h.channel, text=rendered.text, blocks=rendered.blocks
        )
        ts = str(reply["ts"])
        assert await store.compare_and_set(record.next(message_channel=h.channel, message_ts=ts))
        message = h.slack.workspace.message(h.channel, ts)
        assert interactive_elements(message.blocks)
        await asyncio.sleep(3.0)  # the wait has looked again (every 2 s while unposted)
        assert await redis_admin.delete(f"{store.prefix}:req:{record.id}") == 1
        status = await asyncio.wait_for(waiting, 5)
        assert status.state == "failed"
        assert status.error is not None and status.error.code == RECORD_LOST

        def closed() -> bool:
            now = h.current(message)
            return not interactive_elements(now.blocks)

        await until(closed, what="the message to close", within=5)
        assert "lost this question" in all_text(h.current(message).blocks)
        back = await store.get(record.id)
        assert back is not None
        assert (back.state, back.error_code) == ("failed", RECORD_LOST)
        assert (back.message_channel, back.message_ts) == (h.channel, ts)


@pytest.mark.slow
@pytest.mark.parametrize("old", [1, 2, 3])
async def test_sqlite_an_older_file_is_upgraded_in_place_keeping_records_and_events(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path, old: int
) -> None:
    """A file written by an older schema opens: upgraded to the current one, every record and
    event kept; then a write's event lands in the trail by the new trigger."""
    from adapters.slack.model.audit_trail import asked_event, event_for
    from adapters.slack.stores.sqlite_schema import _MIGRATIONS

    sqlite_path.parent.mkdir(parents=True)
    record = make_record("old-process").model_copy(update={"owner": None})
    now = time.time()  # (the start's purge deletes events older than the retention)
    asked = asked_event(record, by="api", link=None, at=now)
    with store_connect(sqlite_path) as db:
        for statement in (s for migration in _MIGRATIONS[:old] for s in migration):
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {old}")
        db.execute(
            "INSERT INTO records (id, version, state, owner, finished_at, json)"
            " VALUES (?, 0, 'pending', NULL, NULL, ?)",
            (record.id, record.dump()),
        )
        if old >= 2:  # the trail as schema 2 wrote it
            db.execute(
                "INSERT INTO events (request_id, at, json) VALUES (?, ?, ?)",
                (asked.request_id, asked.at, asked.dump()),
            )
    db.close()
    async with asyncio.timeout(10):
        store = await sqlite_store_factory()
        with store_connect(sqlite_path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
            # schema 4: records is a rowid table (large rows), with its indexes and triggers
            (table,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'records'").fetchone()
            assert "WITHOUT ROWID" not in table.upper()
            around = db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'records'")
            assert {name for (name,) in around} >= {
                "records_open",
                "records_finished",
                "record_ended",
                "record_event_created",
                "record_event_written",
            }
        db.close()
        assert await store.get(record.id) == record
        assert [r.id for r in await store.open_records()] == [record.id]
        if old < 2:
            await store.append_event(asked)
        assert await store.events(record.id) == [asked]
        done = record.next(state="answered", answered_by="U1", finished_at=now + 1)
        answered = event_for(record, done, by="U1", at=now + 1.25)
        assert answered is not None
        assert await store.compare_and_set(done, answered)
        assert await store.get(record.id) == done
        assert await store.events(record.id) == [asked, answered]
        assert [e.kind async for e in store.audit(now + 1, now + 2)] == ["answered"]
        # chained from the upgrade on; the event an older schema wrote is reported unchained
        unchained = [(1, "at position 1")] if old >= 2 else []
        assert await store.check_chain(now - 86400) == ([], unchained)


async def test_sqlite_only_a_write_that_carries_an_event_appends_one(
    sqlite_store: SqlitePendingStore, sqlite_path: Path
) -> None:
    """The trigger appends a write's own event once: a later write without one appends
    nothing, and neither does an update that leaves the ``event`` column alone (such as a
    process of the previous schema's code writing the record)."""
    from adapters.slack.model.audit_trail import asked_event

    async with asyncio.timeout(10):
        record = make_record(sqlite_store.process_id)
        asked = asked_event(record, by="api", link=None)
        assert await sqlite_store.create(record, asked)
        assert not await sqlite_store.create(record, asked)  # it exists: no write, no event
        with store_connect(sqlite_path) as db:  # the column still holds the asked event
            db.execute("UPDATE records SET owner = 'other' WHERE id = ?", (record.id,))
        db.close()
        saved = record.next(drafts=[Draft(selected=[0])])
        assert await sqlite_store.compare_and_set(saved)
        assert await sqlite_store.get(record.id) == saved
        assert await sqlite_store.events(record.id) == [asked]


async def test_sqlite_a_read_sees_at_once_what_another_process_just_wrote(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    # A click's statements run on a connection in the loop's thread: each read is its own
    # read transaction, so nothing committed before it is missed.
    async with asyncio.timeout(10):
        reader, writer = await sqlite_store_factory(), await sqlite_store_factory()
        record = make_record(writer.process_id)
        assert await writer.create(record)
        for n in range(1, 51):
            current = await reader.get(record.id)
            assert current is not None and current.version == n - 1
            assert await writer.compare_and_set(current.next(note=f"note {n}"))
        final = await reader.get(record.id)
        assert final is not None and (final.version, final.note) == (50, "note 50")


class _Turns:
    """Counts the turns another task gets on the loop (one every ``every`` seconds at most)."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            self.count += 1

    def __enter__(self) -> _Turns:
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@pytest.mark.slow
async def test_sqlite_a_write_while_another_holds_the_file_waits_in_the_store_thread(
    sqlite_store: SqlitePendingStore, sqlite_path: Path
) -> None:
    # The loop's own connection never waits for a lock (the loop would stop with it): a
    # compare-and-set that finds another writer mid-transaction goes to aiosqlite's thread,
    # which waits for the file, and the loop goes on meanwhile.
    async with asyncio.timeout(10):
        record = make_record(sqlite_store.process_id)
        assert await sqlite_store.create(record)
        other = store_connect(sqlite_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # holds the write lock
            with _Turns(every=0.01) as turns:
                writing = asyncio.ensure_future(
                    sqlite_store.compare_and_set(finished(record, answered_by="U1"))
                )
                await asyncio.sleep(0.3)
                assert not writing.done() and turns.count >= 10  # waiting; the loop runs on
                other.execute("COMMIT")
                assert await writing
        finally:
            other.close()
        stored = await sqlite_store.get(record.id)
        assert stored is not None and stored.answered_by == "U1"


async def test_sqlite_a_failing_read_is_store_unavailable(
    sqlite_store: SqlitePendingStore,
) -> None:
    record = make_record(sqlite_store.process_id)
    assert await sqlite_store.create(record)
    inline = sqlite_store._file._inline
    assert inline is not None
    inline.close()  # a connection that cannot read any more
    with pytest.raises(UserQuestionError) as caught:
        await sqlite_store.get(record.id)
    assert caught.value.code == STORE_UNAVAILABLE
    assert str(sqlite_store.path) in caught.value.message


async def _size(path: Path) -> int:
    return (await asyncio.to_thread(path.stat)).st_size


async def _write_pages(store: SqlitePendingStore, count: int) -> None:
    """``count`` writes of about a page each (a 4,000-character note)."""
    record = make_record(store.process_id)
    assert await store.create(record)
    for n in range(count):
        record = record.next(note=f"{n} " + "x" * 4000)
        assert await store.compare_and_set(record)


@pytest.mark.slow
async def test_sqlite_writes_never_checkpoint_the_wal_themselves(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    # A click's write must not be the one that copies the WAL into the file (page copies
    # and an fsync): SQLite's own threshold (1,000 pages) is passed here, and the file
    # itself does not change, its checkpoints being the store's (none within this test).
    async with asyncio.timeout(30):
        store = await sqlite_store_factory(checkpoint_interval=3600)
        size = await _size(sqlite_path)
        await _write_pages(store, 1500)
        wal = sqlite_path.with_name(sqlite_path.name + "-wal")
        assert await _size(wal) > 1000 * 4096  # past SQLite's default threshold
        assert await _size(sqlite_path) == size


async def test_sqlite_the_store_checkpoints_the_wal_in_the_background(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    async with asyncio.timeout(30):
        store = await sqlite_store_factory(checkpoint_interval=0.05)
        size = await _size(sqlite_path)
        await _write_pages(store, 300)

        async def grown() -> bool:
            return await _size(sqlite_path) > size

        await eventually(grown, what="the pages copied into the file")
        # and a new process reads what they hold
        other = await sqlite_store_factory()
        (record,) = await other.open_records()
        assert record.version == 300 and record.note is not None and record.note.startswith("299 ")


async def test_sqlite_a_run_of_writes_lets_the_loop_serve_others_between_them(
    sqlite_store: SqlitePendingStore,
) -> None:
    # Writes in the loop's thread still give others their turn, at least once every RUN
    # statements: a stop ending thousands of questions never holds the loop.
    async with asyncio.timeout(20):
        records = [make_record(sqlite_store.process_id) for _ in range(200)]
        for record in records:
            assert await sqlite_store.create(record)
        written = 0
        between: list[int] = []  # writes done between two turns of the other task

        async def other() -> None:
            last = 0
            while True:
                await asyncio.sleep(0)
                between.append(written - last)
                last = written

        watcher = asyncio.ensure_future(other())
        try:
            await asyncio.sleep(0)
            for record in records:
                assert await sqlite_store.compare_and_set(finished(record))
                written += 1
        finally:
            watcher.cancel()
        assert sum(between) >= len(records) - RUN and max(between) <= RUN


async def test_sqlite_a_clicks_read_and_write_run_straight_through(
    sqlite_store: SqlitePendingStore,
) -> None:
    # A click reads its record and writes the next in one step of its task: no other task
    # runs in between (the waiter is resumed at once), as long as the run is short.
    async with asyncio.timeout(10):
        record = make_record(sqlite_store.process_id)
        assert await sqlite_store.create(record)
        await asyncio.sleep(0)  # a fresh run
        ran: list[str] = []
        asyncio.get_running_loop().call_soon(ran.append, "other")
        current = await sqlite_store.get(record.id)
        assert current is not None
        assert await sqlite_store.compare_and_set(finished(current))
        assert ran == []  # nobody else ran between the read and the write
        await asyncio.sleep(0)
        assert ran == ["other"]


async def _lost_and_put_back_wakes_the_other(
    here: PendingStore, there: PendingStore, lose: Callable[[str], Awaitable[None]]
) -> None:
    """``there`` waits on a record of ``here``; ``lose`` deletes it and ``here`` puts it
    back as failed at once, between two of ``there``'s looks: ``there``'s wait wakes."""
    from adapters.slack.asks.endings import lost_record

    record = make_record(here.process_id)
    assert await here.create(record)
    watch = there.watch(record.id)
    try:
        waiting = asyncio.ensure_future(watch.wait())
        await asyncio.sleep(0.2)  # its wait has begun
        assert not waiting.done()
        await lose(record.id)
        assert await here.create(lost_record(record))
        ended = await asyncio.wait_for(waiting, 5)
        assert (ended.state, ended.error_code) == ("failed", RECORD_LOST)
    finally:
        watch.close()


async def test_a_lost_record_put_back_by_one_process_wakes_another_ones_waiters(
    redis_store_factory: RedisStoreFactory, redis_admin: Any
) -> None:
    """Redis loses a record two processes wait on; one puts it back as failed before the
    other's periodic check looked (so that one never sees it missing). Storing a record
    already ended tells every process, as ending one by a write does: the other waiter
    wakes with the failed record instead of waiting for its own timeout."""
    here, there = await redis_store_factory(), await redis_store_factory()

    async def lose(request_id: str) -> None:
        assert await redis_admin.delete(f"{here.prefix}:req:{request_id}") == 1

    await _lost_and_put_back_wakes_the_other(here, there, lose)


@pytest.mark.slow
async def test_sqlite_a_lost_record_put_back_by_one_process_wakes_another_ones_waiters(
    sqlite_store_factory: Callable[..., Awaitable[SqlitePendingStore]], sqlite_path: Path
) -> None:
    """The same on one SQLite file, the row deleted by hand: the put-back's insert feeds no
    ending (only an update of an open record does), so the other process's look at the
    records it waits on wakes the wait."""
    here = await sqlite_store_factory()
    there = await sqlite_store_factory(poll_interval=0.05)

    async def lose(request_id: str) -> None:
        with store_connect(sqlite_path) as db:
            db.execute("DELETE FROM records WHERE id = ?", (request_id,))

    await _lost_and_put_back_wakes_the_other(here, there, lose)
