"""The process's heap once started: kept out of the garbage collector's full passes.

A full (generation 2) collection walks every object the collector tracks. After start most
of them are the imported code (bolt, slack_sdk, aiohttp, pydantic: some 80,000 objects,
50 ms a pass on a small VM) and live as long as the process; a pass that stops the event
loop that long holds up every click behind it. ``settle`` collects once and freezes what
is left (``gc.freeze``), so later passes walk only what came after: the questions, their
waits and the work of the moment.
"""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> int:
    """Collect, then freeze what survives out of later collections; how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
