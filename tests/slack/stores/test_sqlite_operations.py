"""The SQLite store as an operator runs it: other writers holding the file (a ``sqlite3``
shell, ``VACUUM``, a new release upgrading the schema during a rolling deploy), a disk that
fills during an upgrade, the WAL's size, a read-only export by a user who cannot write the
folder, a ``STORE_PATH`` SQLite cannot share, and the one line a failed start prints.

A write lock is held from another connection (``BEGIN IMMEDIATE``) for as long as a case
needs, so a slow upgrade or a busy file is made deterministically, without big files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from adapters.slack.model.audit_trail import asked_event
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import SqlitePendingStore, sqlite_file
from adapters.slack.stores.sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from bot.questions.errors import OWNER_LOST, UserQuestionError
from tests.bot_process import clean_environment, run_command
from tests.e2e.test_multiprocess import eventually
from tests.slack.stores.test_store_contract import make_record
from tests.sqlite_tools import store_connect

SqliteStoreFactory = Callable[..., Awaitable[SqlitePendingStore]]

BOT_ENV = {
    "SLACK_BOT_TOKEN": "xoxb-1-x",
    "SLACK_SIGNING_SECRET": "s" * 32,
    "SLACK_CHANNEL": "C0123456",
    "BOT_API_TOKEN": "t" * 32,
    "PORT": "0",
}
"""Enough for ``python -m bot`` to get as far as opening its store."""


@contextlib.contextmanager
def write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold the file's write lock from another connection (as a ``sqlite3`` shell, a
    ``VACUUM`` or another process's schema upgrade does) until the block ends."""
    holder = store_connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield holder
        holder.execute("COMMIT")
    finally:
        holder.close()


def schema_3_file(path: Path, records: int = 0, size: int = 3000) -> None:
    """A store file as the previous release left it (schema 3), with ``records`` pending
    records of about ``size`` bytes each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(store_connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("BEGIN")
        for statement in (s for migration in _MIGRATIONS[:3] for s in migration):
            db.execute(statement)
        db.execute("PRAGMA user_version = 3")
        for n in range(records):
            record = make_record("old-bot").model_copy(update={"note": f"{n} " + "x" * size})
            db.execute(
                "INSERT INTO records (id, version, state, owner, finished_at, json)"
                " VALUES (?, 0, 'pending', NULL, NULL, ?)",
                (record.id, record.dump()),
            )
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def leave_ghost(path: Path, records: int = 1) -> list[str]:
    """The pending records of a process that died long ago (its last beat in 1970)."""
    ids = [f"ghost-{n}" for n in range(records)]
    with contextlib.closing(store_connect(path)) as db, db:  # (one transaction)
        db.execute("INSERT INTO alive (process_id, beat_at) VALUES ('ghost', 1.0)")
        for request_id in ids:
            record = make_record("ghost", request_id)
            db.execute(
                "INSERT INTO records (id, version, state, owner, finished_at, json)"
                " VALUES (?, ?, 'pending', 'ghost', NULL, ?)",
                (record.id, record.version, record.dump()),
            )
    return ids


def stop_heartbeat(store: SqlitePendingStore) -> None:
    """Cancel the store's own heartbeat task: the test runs its duty itself."""
    for task in store._upkeep._tasks:
        if task.get_name() == "sqlite-store-heartbeat":
            task.cancel()


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def size_of(path: Path) -> int:
    return path.stat().st_size


# -- 1. heartbeats through a held write lock ------------------------------------------------


@pytest.mark.slow
async def test_a_beat_that_waited_for_the_write_lock_is_stamped_when_it_is_written(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    """A beat queued while another writer holds the file records the time it was written,
    not the time it was queued: else it is stale the moment it lands."""
    store = await sqlite_store_factory(heartbeat_interval=60, heartbeat_ttl=120)
    async with asyncio.timeout(20):
        with write_lock(sqlite_path):
            beating = asyncio.ensure_future(store._upkeep.beat())
            await asyncio.sleep(1.5)
            released = time.time()
        await beating
    with contextlib.closing(store_connect(sqlite_path)) as db:
        (beat_at,) = db.execute(
            "SELECT beat_at FROM alive WHERE process_id = ?", (store.process_id,)
        ).fetchone()
    # (SQLite's clock has millisecond steps)
    assert beat_at >= released - 0.01, f"stamped {released - beat_at:.2f} s before it was written"


@pytest.mark.slow
async def test_live_processes_keep_their_questions_through_a_write_lock_longer_than_the_ttl(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    """The reviewer's case scaled down (heartbeat 0.3 s, TTL 1.5 s): two live processes,
    another writer holds the file for 2.5 s. Neither process's question is failed
    ``OWNER_LOST``, and no orphan is reported, while both go on beating after it."""
    options = {"heartbeat_interval": 0.3, "heartbeat_ttl": 1.5}
    asker = await sqlite_store_factory(**options)
    other = await sqlite_store_factory(**options)
    reported: list[PendingRecord] = []

    async def on_orphans(records: list[PendingRecord]) -> None:
        reported.extend(records)

    asker.on_orphans = other.on_orphans = on_orphans
    mine, theirs = make_record(asker.process_id), make_record(other.process_id)
    assert await asker.create(mine) and await other.create(theirs)
    async with asyncio.timeout(30):
        with write_lock(sqlite_path):
            await asyncio.sleep(2.5)
        await asyncio.sleep(3.0)  # two TTLs of ordinary beating and sweeping after it
    assert reported == []
    for record in (mine, theirs):
        now = await asker.get(record.id)
        assert now is not None and now.is_open, now and (now.state, now.error_code)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("busy_timeout", "hold", "fails"),
    [(3.0, 0.6, False), (0.3, 0.8, True)],
    ids=["slow-beat", "failed-beat"],
)
async def test_no_sweep_for_a_ttl_after_a_beat_that_waited_or_failed(
    sqlite_store_factory: SqliteStoreFactory,
    sqlite_path: Path,
    busy_timeout: float,
    hold: float,
    fails: bool,
) -> None:
    """A beat that waited longer than the heartbeat interval for the file (or gave up on it)
    means the other processes' beats waited too: no sweep judges them for one TTL. After
    that the sweep runs again (a process dead all along is failed then)."""
    store = await sqlite_store_factory(
        heartbeat_interval=0.2, heartbeat_ttl=1.0, busy_timeout=busy_timeout
    )
    stop_heartbeat(store)
    (ghost,) = leave_ghost(sqlite_path)
    upkeep = store._upkeep
    async with asyncio.timeout(20):
        with write_lock(sqlite_path):
            duty = asyncio.ensure_future(upkeep.duty())
            await asyncio.sleep(hold)
        if fails:
            with pytest.raises(UserQuestionError):
                await duty
            assert await upkeep.duty() == []  # a quick beat, but right after a failed one
        else:
            assert await duty == []
        swept: list[PendingRecord] = await eventually(upkeep.duty, what="the sweep again")
    assert [(r.id, r.error_code) for r in swept] == [(ghost, OWNER_LOST)]


@pytest.mark.slow
async def test_a_sweep_cut_short_by_a_store_error_reports_what_it_wrote(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A lost process left three questions; the store fails the write of the second (a
    real SQLite error, from a trigger). The first, already failed ``OWNER_LOST``, reaches
    ``on_orphans`` all the same; once the store works again the others follow, each
    reported once."""
    sweeper = await sqlite_store_factory(heartbeat_interval=0.2, heartbeat_ttl=0.6)
    reported: list[str] = []

    async def on_orphans(records: list[PendingRecord]) -> None:
        reported.extend(record.id for record in records)

    ids = leave_ghost(sqlite_path, 3)
    with contextlib.closing(store_connect(sqlite_path, isolation_level=None)) as db:
        db.execute(
            f"CREATE TRIGGER test_failing BEFORE UPDATE ON records WHEN OLD.id = '{ids[1]}'"
            " BEGIN SELECT RAISE(ABORT, 'disk trouble (test)'); END"
        )
        sweeper.on_orphans = on_orphans
        async with asyncio.timeout(20):
            await eventually(lambda: reported == ids[:1], what="the first one reported")
            await asyncio.sleep(0.5)  # a few more passes, each stopped at the second
            assert reported == ids[:1]
            db.execute("DROP TRIGGER test_failing")
            await eventually(lambda: len(reported) >= 3, what="the others reported")
    assert reported == ids
    assert "sweep stopped early" in caplog.text or "disk trouble" in caplog.text


async def test_sweep_orphans_returns_what_it_wrote_before_a_store_error(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    sweeper = await sqlite_store_factory(heartbeat_interval=60, heartbeat_ttl=120)
    ids = leave_ghost(sqlite_path, 3)
    with contextlib.closing(store_connect(sqlite_path, isolation_level=None)) as db:
        db.execute(
            f"CREATE TRIGGER test_failing BEFORE UPDATE ON records WHEN OLD.id = '{ids[1]}'"
            " BEGIN SELECT RAISE(ABORT, 'disk trouble (test)'); END"
        )
        async with asyncio.timeout(20):
            first = await sweeper.sweep_orphans()
            assert [r.id for r in first] == ids[:1]
            with pytest.raises(UserQuestionError, match="disk trouble"):
                await sweeper.sweep_orphans()  # nothing written before the error: raised
            db.execute("DROP TRIGGER test_failing")
            rest = await sweeper.sweep_orphans()
    assert [r.id for r in rest] == ids[1:]


@pytest.mark.slow
async def test_a_sweep_pass_is_bounded_and_the_next_ones_sweep_the_rest(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path
) -> None:
    """A pass lasts a third of the TTL at most (here 0.1 s, far less than 3,000 records'
    writes take); the passes after it sweep the rest, each record reported once."""
    sweeper = await sqlite_store_factory(heartbeat_interval=0.1, heartbeat_ttl=0.3)
    stop_heartbeat(sweeper)
    ids = leave_ghost(sqlite_path, 3000)
    swept: list[str] = []
    async with asyncio.timeout(60):
        first = await sweeper.sweep_orphans()
        assert 0 < len(first) < len(ids)
        swept += [record.id for record in first]
        while len(swept) < len(ids):
            passed = await sweeper.sweep_orphans()
            assert passed, "a pass swept nothing"
            swept += [record.id for record in passed]
    assert sorted(swept) == sorted(ids)


# -- 2. a second worker starting during another's upgrade ----------------------------------


@pytest.mark.slow
async def test_a_worker_starting_during_another_process_upgrade_waits_for_it(
    sqlite_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first worker upgrades (here: another connection holds the write lock for 1.5 s,
    seven busy timeouts of the second); the second waits, says so, and starts."""
    schema_3_file(sqlite_path, records=3)
    store = SqlitePendingStore(sqlite_path, busy_timeout=0.2)
    caplog.set_level(logging.INFO, logger="adapters.slack.stores.sqlite")
    try:
        async with asyncio.timeout(30):
            with write_lock(sqlite_path):
                starting = asyncio.ensure_future(store.start())
                await asyncio.sleep(1.5)
                assert not starting.done() or starting.exception() is None
            await starting
        assert len(await store.open_records()) == 3
    finally:
        await store.close()
    assert "waiting" in caplog.text and str(sqlite_path) in caplog.text
    with contextlib.closing(store_connect(sqlite_path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.slow
async def test_the_wait_for_another_upgrade_is_bounded_and_says_who_holds_the_file(
    sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema_3_file(sqlite_path)
    monkeypatch.setattr(sqlite_file, "UPGRADE_WAIT", 0.6, raising=False)
    store = SqlitePendingStore(sqlite_path, busy_timeout=0.2)
    try:
        async with asyncio.timeout(30):
            with write_lock(sqlite_path), pytest.raises(OSError) as caught:
                await store.start()
    finally:
        await store.close()
    message = str(caught.value)
    assert f"STORE_PATH={sqlite_path}" in message
    assert "another process" in message and "upgrad" in message


# -- 3. a disk that fills during the upgrade ------------------------------------------------

_SMALL_DISK = """
import resource, runpy, signal, sys
limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.argv = ["python -m bot"]
runpy.run_module("bot", run_name="__main__", alter_sys=True)
"""
"""``python -m bot`` where no file may grow past ``argv[1]`` bytes (``RLIMIT_FSIZE``, which
binds root too): the disk is full for the upgrade's copy of ``records``."""


@pytest.mark.slow
async def test_an_upgrade_that_runs_out_of_disk_says_why_and_leaves_the_file_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store" / "questions.db"
    schema_3_file(path, records=300)
    limit = size_of(path) + 64 * 1024  # room for the WAL's first pages, not the copy
    code, _, err = await run_command(
        [sys.executable, "-c", _SMALL_DISK, str(limit)],
        clean_environment({"STORE": "sqlite", "STORE_PATH": str(path), **BOT_ENV}),
        cwd=tmp_path,
    )
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("python -m bot: "), err
    assert f"STORE_PATH={path}" in last
    assert "disk I/O error" in last or "disk is full" in last, last
    assert "cannot rollback" not in err
    with contextlib.closing(store_connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 300


# -- 4. the WAL's size ------------------------------------------------------------------------


async def test_the_wal_is_not_left_large_after_an_upgrade(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upgrading a 1.3 MB file writes its copy to the WAL; the WAL does not keep that size
    for the life of the process (here with a 128 KiB limit instead of 64 MiB)."""
    monkeypatch.setattr(sqlite_file, "WAL_LIMIT", 128 * 1024, raising=False)
    schema_3_file(sqlite_path, records=300)
    assert size_of(sqlite_path) > 1_000_000
    async with asyncio.timeout(20):
        store = await sqlite_store_factory(checkpoint_interval=3600)
        assert len(await store.open_records()) == 300
    assert size_of(wal_of(sqlite_path)) <= 128 * 1024


async def test_the_wal_shrinks_back_to_its_limit_after_a_burst_of_writes(
    sqlite_store_factory: SqliteStoreFactory, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_file, "WAL_LIMIT", 128 * 1024, raising=False)
    async with asyncio.timeout(30):
        store = await sqlite_store_factory(checkpoint_interval=0.05)
        record = make_record(store.process_id)
        assert await store.create(record)
        for n in range(400):  # about a page each: 1.6 MB of WAL
            record = record.next(note=f"{n} " + "x" * 4000)
            assert await store.compare_and_set(record)
        assert size_of(wal_of(sqlite_path)) > 1_000_000

        async def small() -> bool:
            nonlocal record
            record = record.next(note="small")
            assert await store.compare_and_set(record)
            return size_of(wal_of(sqlite_path)) <= 128 * 1024

        await eventually(small, what="the WAL back within its limit", every=0.1)


# -- 5. the read-only export by a user who cannot write the folder ---------------------------


def unprivileged(argv: list[str]) -> list[str]:
    """``argv`` run without the right to write a folder it does not own the write bit of:
    as root, without the capabilities that override file permissions (``setpriv``)."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to drop root's override of file permissions")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *argv]


def audit_env(path: Path) -> dict[str, str]:
    return clean_environment({"STORE": "sqlite", "STORE_PATH": str(path)})


async def bot_wrote_and_stopped(path: Path) -> list[str]:
    """A bot asked two questions on ``path`` and stopped cleanly (the WAL's side files
    gone with it); the ids."""
    store = SqlitePendingStore(path)
    await store.start()
    ids = []
    try:
        for _ in range(2):
            record = make_record(store.process_id)
            assert await store.create(record, asked_event(record, by="api", link=None))
            ids.append(record.id)
    finally:
        await store.close()
    return ids


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(0o755)


@pytest.mark.slow
async def test_the_export_reads_a_cleanly_stopped_store_in_a_folder_it_cannot_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store" / "questions.db"
    ids = await bot_wrote_and_stopped(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["questions.db"]  # no -wal
    seen = path.stat()
    with read_only(path.parent):
        code, out, err = await run_command(
            unprivileged([sys.executable, "-m", "bot", "audit", "--since", "1h"]),
            audit_env(path),
            cwd=tmp_path,
        )
    assert code == 0, err
    assert [line.split('"requestId":"')[1].split('"')[0] for line in out.splitlines()] == ids
    assert sorted(p.name for p in path.parent.iterdir()) == ["questions.db"]
    assert (path.stat().st_mtime_ns, path.stat().st_size) == (seen.st_mtime_ns, seen.st_size)


@pytest.mark.slow
async def test_the_export_says_plainly_when_sqlite_must_create_the_shm_file(
    tmp_path: Path,
) -> None:
    """A WAL with committed writes beside the file (a bot running, or killed) and no
    ``-shm``: reading it needs the ``-shm`` file, which this user cannot create. The file
    is not read as if the WAL did not exist; the message says what is needed."""
    live = tmp_path / "live" / "questions.db"
    await bot_wrote_and_stopped(live)
    with contextlib.closing(store_connect(live, isolation_level=None)) as db:
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("INSERT INTO events (request_id, at, json) VALUES ('x', 0, '{}')")
        copy = tmp_path / "copy" / "questions.db"  # as a bot killed mid-run left it
        copy.parent.mkdir()
        shutil.copy(live, copy)
        shutil.copy(wal_of(live), wal_of(copy))
    with read_only(copy.parent):
        code, out, err = await run_command(
            unprivileged([sys.executable, "-m", "bot", "audit", "--since", "1h"]),
            audit_env(copy),
            cwd=tmp_path,
        )
    assert (code, out) == (1, ""), err
    (line,) = err.strip().splitlines()
    assert f"STORE_PATH={copy}" in line and f"{copy}-shm" in line, line


# -- 6. a STORE_PATH that SQLite does not keep in a shared file ------------------------------


@pytest.mark.parametrize(
    "name", [":memory:", "file::memory:", "file::memory:?cache=shared", "file:q.db?mode=memory"]
)
async def test_a_store_path_kept_in_memory_is_refused_at_start(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of the store's connections would get a database of its own (every read after
    the start failing ``no such table``), and no other process could share it."""
    monkeypatch.chdir(tmp_path)
    store = SqlitePendingStore(name)
    try:
        with pytest.raises(OSError) as caught:
            await store.start()
    finally:
        await store.close()
    assert f"STORE_PATH={name}" in str(caught.value)


# -- 7. one clean line when the file cannot be opened ----------------------------------------


async def five_exports(argv: list[str], path: Path, cwd: Path) -> None:
    """Run ``argv`` (an export of ``path``) five times at once: each prints exactly the one
    line of its error, and nothing from aiosqlite's thread."""
    results = await asyncio.gather(*(run_command(argv, audit_env(path), cwd=cwd) for _ in range(5)))
    for code, out, err in results:
        assert (code, out) == (1, "")
        assert "Exception in thread" not in err and "Traceback" not in err, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        assert lines[0].startswith(
            f"python -m bot audit: cannot read the pending store STORE_PATH={path}: "
        )


@pytest.mark.slow
async def test_the_export_of_a_missing_file_prints_one_line_only(tmp_path: Path) -> None:
    """aiosqlite's thread, after a failed connect, called into the event loop
    ``asyncio.run`` had closed: ``Exception in thread … Event loop is closed`` after the
    clean error, now and then. A missing file is not opened at all now."""
    missing = tmp_path / "typo.db"
    await five_exports([sys.executable, "-m", "bot", "audit", "--since", "7d"], missing, tmp_path)
    assert not missing.exists()


@pytest.mark.slow
async def test_the_export_of_a_file_sqlite_cannot_open_prints_one_line_only(
    tmp_path: Path,
) -> None:
    """A file this user may not read: SQLite's connect fails, and the store waits for
    aiosqlite's thread to end before the error goes up."""
    path = tmp_path / "store" / "questions.db"
    await bot_wrote_and_stopped(path)
    path.chmod(0o000)
    try:
        await five_exports(
            unprivileged([sys.executable, "-m", "bot", "audit", "--since", "7d"]), path, tmp_path
        )
    finally:
        path.chmod(0o644)


async def test_each_connection_keeps_a_small_page_cache(
    sqlite_store_factory: SqliteStoreFactory,
) -> None:
    """The page cache is bounded to 256 KiB per connection (not SQLite's 2 MB): the pages
    come back from the OS's cache, and the default cost RSS per pending question."""
    store = await sqlite_store_factory()
    file = store._file
    assert await file.scalar("PRAGMA cache_size") == -256
    assert file._inline is not None
    assert file._inline.execute("PRAGMA cache_size").fetchone()[0] == -256
