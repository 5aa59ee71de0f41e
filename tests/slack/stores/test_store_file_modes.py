"""Issue 38, item 13: the SQLite store's files are the bot's alone (0600), never world-readable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from adapters.slack.stores.sqlite import SqlitePendingStore
from adapters.slack.stores.viewers import SqliteHomeViewers

pytestmark = pytest.mark.timeout(30)


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}


async def test_the_store_its_wal_and_shm_are_created_0600_whatever_the_umask(
    tmp_path: Path,
) -> None:
    old = os.umask(0o022)
    try:
        store = SqlitePendingStore(tmp_path / "deep" / "pending.db")
        await store.start()
        viewers = SqliteHomeViewers(tmp_path / "deep" / "pending.db")
        await viewers.opened("U1", 1.0)
        modes = _modes(tmp_path / "deep")
        await store.close()
    finally:
        os.umask(old)
    assert {"pending.db", "pending.db-wal", "pending.db-shm"} <= set(modes), modes
    assert all(mode == 0o600 for mode in modes.values()), {k: oct(v) for k, v in modes.items()}


async def test_a_store_file_left_readable_by_others_is_made_0600_when_opened(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pending.db"
    path.touch(mode=0o644)
    path.chmod(0o644)
    store = SqlitePendingStore(path)
    await store.start()
    await store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
