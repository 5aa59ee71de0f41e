"""Issue 38, item 14: the audit trail is tamper-evident (SQLite).

Each event carries the hash of the one before it in the trail and in its question's trail,
the newest is checkpointed, and ``python -m bot audit --verify`` (and the export) name every
edited, removed or reordered event by its position and exit 1. The tampering is done as the
attack did it: straight in the SQLite file.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.stores.sqlite import SqlitePendingStore
from tests.bot_process import run_bot_command

pytestmark = pytest.mark.timeout(60)

QUESTIONS = ["a1b2c3d4e5", "f6a7b8c9d0"]


async def _trail(path: Path, count: int = 6) -> None:
    store = SqlitePendingStore(path, process_id="chain")
    await store.start()
    try:
        now = time.time()
        for n in range(count):
            kind = "asked" if n < 2 else "answered" if n >= count - 2 else "changed"
            event = AuditEvent(
                request_id=QUESTIONS[n % 2],
                at=now + n,
                kind=kind,
                version=n,
                by="U0ALICE",
                shown_sha256="0" * 64,
                detail={"answer": ["Deploy"]} if kind == "answered" else {},
            )
            await store.append_event(event)
        assert await store.check_chain(now - 86400) == []
    finally:
        await store.close()


async def _check(path: Path) -> list[str]:
    store = SqlitePendingStore(path, process_id="reader")
    async with store.reading() as trail:
        found = await trail.check_chain(time.time() - 86400)
    assert found is not None
    return found


def _sql(path: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(path) as db:
        db.execute(statement, params)


async def test_an_untouched_trail_verifies(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    assert await _check(path) == []


async def test_an_answer_edited_in_the_file_is_named_by_its_position(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    _sql(
        path,
        "UPDATE events SET json = replace(json, 'Deploy', 'Rollback') WHERE seq = 5",
    )
    assert any("position 5" in p and "edited" in p for p in await _check(path))


async def test_a_person_swapped_in_the_file_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    _sql(path, "UPDATE events SET json = replace(json, 'U0ALICE', 'U0MALLORY') WHERE seq = 6")
    assert any("position 6" in p for p in await _check(path))


async def test_a_removed_event_is_named(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    _sql(path, "DROP TRIGGER event_purged")  # removed without a trace of a purge
    _sql(path, "DELETE FROM events WHERE seq = 3")
    problems = await _check(path)
    assert any("position 3" in p and "removed" in p for p in problems), problems


async def test_a_deletion_within_the_retention_is_not_taken_for_a_purge(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    _sql(path, "DELETE FROM events WHERE seq = 4")  # the purge trigger records it, but recent
    assert any("position 4" in p and "removed" in p for p in await _check(path))


async def test_reordered_events_are_named(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    _sql(path, "UPDATE events SET seq = 100 WHERE seq = 2")
    _sql(path, "UPDATE events SET seq = 2 WHERE seq = 3")
    _sql(path, "UPDATE events SET seq = 3 WHERE seq = 100")
    problems = await _check(path)
    assert any("position 2" in p or "position 3" in p for p in problems), problems


async def test_the_newest_events_removed_are_caught_by_the_checkpointed_head(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    _sql(path, "DROP TRIGGER event_purged")
    _sql(path, "DELETE FROM events WHERE seq >= 5")
    problems = await _check(path)
    assert any("position 6" in p and "removed" in p for p in problems), problems


async def test_python_m_bot_audit_verify_and_the_export_exit_1_naming_the_position(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    await _trail(path)
    env = {"STORE": "sqlite", "STORE_PATH": str(path)}
    code, _, err = await run_bot_command(["audit", "--verify"], env, cwd=tmp_path)
    assert code == 0 and "intact" in err, err
    _sql(path, "UPDATE events SET json = replace(json, 'Deploy', 'Rollback') WHERE seq = 5")
    code, _, err = await run_bot_command(["audit", "--verify"], env, cwd=tmp_path)
    assert code == 1 and "position 5" in err, err
    code, out, err = await run_bot_command(["audit", "--since", "1d"], env, cwd=tmp_path)
    assert code == 1 and "position 5" in err and len(out.splitlines()) == 6, (out, err)
