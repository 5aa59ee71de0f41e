"""A stop ends the process even when another writer holds the SQLite store's file.

``python -m bot`` runs as a subprocess (sandbox mode, ``STORE=sqlite``) while this test
holds ``BEGIN IMMEDIATE`` on its file from another connection. SIGTERM then stops the bot:
the store's close waits on the busy file and is abandoned at the deadline ("gave up on
closing the pending store"), and the process must still exit, with no thread left calling
into the closed event loop ("Exception in thread … Event loop is closed").

Before, the abandoned close left aiosqlite's worker threads (not daemons) running: Python
waited on them at exit for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.bot_process import BotProcess

GRACE = 1.0
EXIT_BOUND = 20.0  # the grace, then the busy timeout (5 s) at most; the old code never exited


@pytest.mark.slow
async def test_a_stop_exits_while_another_writer_holds_the_file(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    env = {
        "MODE": "sandbox",
        "STORE": "sqlite",
        "STORE_PATH": str(store_path),
        "PORT": "0",
        "SANDBOX_PORT": "0",
        "SHUTDOWN_GRACE": str(GRACE),
        "PYTHONFAULTHANDLER": "1",
    }
    async with BotProcess.start(env, cwd=tmp_path) as bot:
        holder = sqlite3.connect(store_path, isolation_level=None, timeout=10)
        try:
            holder.execute("BEGIN IMMEDIATE")  # the write lock, held past the bound
            for _ in range(100):  # the bot's "Sandbox ready" line comes after it listens
                if any("Sandbox ready" in line for line in bot.stdout):
                    break
                await asyncio.sleep(0.1)
            assert any("Sandbox ready" in line for line in bot.stdout), bot.output
            # Let the bot's upkeep (heartbeat, checkpoints) queue behind the lock.
            await asyncio.sleep(1.5)
            try:
                code = await bot.stop(signal.SIGTERM, within=EXIT_BOUND)
            except TimeoutError:
                raise AssertionError(
                    f"the bot still ran {EXIT_BOUND} s after SIGTERM:\n{bot.output}"
                ) from None
        finally:
            with contextlib.suppress(sqlite3.Error):
                holder.execute("ROLLBACK")
            holder.close()
    output = bot.output
    assert code == 0, output
    assert "shutdown: gave up on closing the pending store after" in output
    assert "INFO bot stopped" in output
    assert "Exception in thread" not in output
    assert "Event loop is closed" not in output
