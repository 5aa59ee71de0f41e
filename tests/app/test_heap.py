"""``bot.app.runtime``'s heap: what the bot built at start is frozen out of full collections
(in a child process: freezing this test process's heap would change what later tests see of
the collector); freed pages are handed back to the system every minute while it runs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app import runtime

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(60)

CHILD = """
import gc, json
from bot.app.runtime import settle_heap  # with the bot's imports, as python -m bot has them
gc.collect()
before = len(gc.get_objects())
frozen = settle_heap()
after = len(gc.get_objects())
kept = [object()]  # made after: tracked as usual
print(json.dumps({"before": before, "frozen": frozen, "count": gc.get_freeze_count(),
                  "after": after, "tracked": gc.is_tracked(kept)}))
"""


@pytest.mark.slow
def test_settle_freezes_the_started_heap_so_a_full_collection_skips_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["before"] > 20_000  # bolt, slack_sdk, aiohttp, pydantic, …
    assert seen["frozen"] == seen["count"] >= seen["before"] * 0.9
    assert seen["after"] < seen["before"] * 0.1  # what a full collection still walks
    assert seen["tracked"]


def test_trim_hands_free_pages_back_where_glibc_has_malloc_trim() -> None:
    blocks = [bytes(64 * 1024) for _ in range(64)]
    guard = bytes(64 * 1024)  # above them: their 4 MiB freed is a hole, not the heap's top
    del blocks  # kept by the allocator until trimmed
    assert runtime.trim_heap() is (runtime._MALLOC_TRIM is not None)
    assert guard


def test_trim_is_a_no_op_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_MALLOC_TRIM", None)
    assert runtime.trim_heap() is False


async def test_keep_heap_trims_every_interval_until_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = asyncio.Event()
    trims: list[float] = []

    def trim() -> None:
        trims.append(asyncio.get_running_loop().time())
        if len(trims) == 3:
            stop.set()

    monkeypatch.setattr(runtime, "trim_heap", trim)
    await asyncio.wait_for(runtime.keep_heap(stop, every=0.01), 1)
    assert len(trims) == 3
    assert trims[1] - trims[0] >= 0.009  # each after the interval, not in a busy loop
