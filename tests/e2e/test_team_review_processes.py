"""Team plan reviews across two real bot processes sharing Redis: one outcome per review.

Three reviewers vote at once on each of 200 reviews with a quorum of two, their clicks
spread over processes A and B; every review ends exactly once, approved, with exactly
two votes counted, and the third voter is told it had already ended.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.e2e.test_multiprocess import eventually, two_bots

BATCH = 25
"""Reviews voted on at once (75 simultaneous clicks over the two processes)."""

PLAN = {
    "questions": [
        {
            "id": "plan-review",
            "header": "Plan review",
            "question": "Approve this plan?",
            "detail": "1. Migrate\n2. Deploy",
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
    ],
    "review": {"approvals": 2},
}


@pytest.mark.slow
async def test_200_reviews_with_three_simultaneous_votes_end_once_each(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    count = 200
    async with asyncio.timeout(120), two_bots(tmp_path, redis_url, store_prefix) as s:
        people = (s.alice, s.bob, s.carol)
        answered: list[tuple[int, dict[str, Any]]] = []
        posted: list[dict[str, Any]] = []
        for first in range(0, count, BATCH):  # BATCH reviews at a time, 3 votes at once each
            batch = range(first, min(first + BATCH, count))
            asked = await asyncio.gather(*((s.a if i % 2 else s.b).ask(PLAN) for i in batch))
            assert [status for status, _ in asked] == [201] * len(batch), asked[:3]
            records = [record for _, record in asked]
            polls = [s.later(s.a.get(r["id"], wait=60)) for r in records]
            # Each reviewer's click goes to a different process than the one before it.
            sends = [
                (s.a if (i + n) % 2 else s.b).send(s.click(record, person, "Approve"))
                for i, record in enumerate(records)
                for n, person in enumerate(people)
            ]
            statuses = await asyncio.gather(*sends)
            assert statuses == [200] * (3 * len(batch)), Counter(statuses)
            answered.extend(await asyncio.gather(*polls))
            posted.extend(records)

        late_voters: list[str] = []
        for (status, view), record in zip(answered, posted, strict=True):
            assert status == 200
            assert view["state"] == "answered", view
            assert view["answer"] == {"answers": [{"id": "plan-review", "selected": ["Approve"]}]}
            stored = await s.stored(record["id"])
            counted = [vote["user"] for vote in stored["votes"]]
            assert len(counted) == len(set(counted)) == 2
            assert [v["user"] for v in view["votes"]] == counted
            (late,) = set(people) - set(counted)
            late_voters.append(late)

        # Every vote is accounted for: counted in its record, or its voter told it ended.
        def ended_notes(person: str) -> int:
            return sum("already approved" in text for text in s.notes_for(person))

        await eventually(
            lambda: sum(map(ended_notes, people)) >= count, within=30, what="the late notes"
        )
        assert {p: ended_notes(p) for p in people} == {p: late_voters.count(p) for p in people}
        for record in posted:
            text = await eventually(functools.partial(s.final, record), within=30)
            assert text.count("approved ·") == 2
        assert s.slack.calls.count("chat.postMessage") == count
        assert await s.open_ids() == set()
