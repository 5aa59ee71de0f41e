"""``bench.embedded`` measures what it says: one delivery per question, after its click."""

from __future__ import annotations

import pytest

from bench.embedded import run


@pytest.mark.timeout(60)
async def test_every_question_s_delivery_is_timed_from_its_click() -> None:
    samples = await run(5)
    assert len(samples) == 5 and all(0 < s < 10 for s in samples)
