"""``bot.heap.settle``: what the bot built at start is frozen out of full collections."""

from __future__ import annotations

import gc

from bot import heap


def test_settle_freezes_the_started_heap_so_a_full_collection_skips_it() -> None:
    try:
        gc.collect()
        before = len(gc.get_objects())
        frozen = heap.settle()
        assert frozen == gc.get_freeze_count() >= before * 0.9  # (pytest's own heap, here)
        assert len(gc.get_objects()) < before * 0.1  # what full collections still walk
        kept = object()  # made after: still collected as usual
        assert gc.is_tracked([kept])
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
