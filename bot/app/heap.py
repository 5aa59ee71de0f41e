"""The heap once started, frozen out of the collector's full passes (``gc.freeze``): the
imported code lives as long as the process, and walking it stalled every click behind it."""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> int:
    """Collect, then freeze what survives out of later collections; how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
