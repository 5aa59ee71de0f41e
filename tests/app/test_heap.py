"""``bot.app.runtime.settle_heap``: what the bot built at start is frozen out of full collections.

Run in a child process: freezing (and unfreezing) this test process's heap would change
what later tests see of the garbage collector.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
