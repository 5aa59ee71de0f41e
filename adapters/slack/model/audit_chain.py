"""The audit trail's hash chain: each event's hash binds it to the one before it (in the
whole trail and in its question's), so an edited, removed or reordered event shows.

``chain_hash`` is what a store computes as it appends (SQLite: a trigger calls it); the
store also keeps the newest event's position and hash (the head) and, for each event its
retention purged, that event's hash. ``verify`` walks the rows in the order appended and
names every break with its position. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ChainRow", "chain_hash", "verify"]


def chain_hash(prev: str | None, question_prev: str | None, event_json: str) -> str:
    """SHA-256 (hex) of an event's JSON with the hashes of the events before it (in the
    trail, in its question's trail; empty for the first)."""
    joined = f"{prev or ''}\n{question_prev or ''}\n{event_json}"
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainRow:
    """One stored event: its position (``seq``), question, time, JSON and chain fields."""

    seq: int
    request_id: str
    at: float
    json: str
    prev: str | None
    question_prev: str | None
    hash: str | None


def verify(
    rows: Iterable[ChainRow],
    head: tuple[int, str] | None,
    purged: Mapping[int, tuple[float, str]],
    kept_since: float,
) -> list[str]:
    """Every break of the chain in ``rows`` (in ``seq`` order), each naming its position.

    ``head`` is the checkpointed newest event (position, hash); ``purged`` the position's
    time and hash of each event the retention deleted (``kept_since``: the retention's
    cutoff; a deleted event newer than that was removed by someone else). Events written
    before the chain (no hash) are not checked.
    """
    problems: list[str] = []
    last: tuple[int, str] | None = None  # position and hash of the event before
    by_question: dict[str, str] = {}
    for row in rows:
        if row.hash is None:
            if last is not None:
                problems.append(f"position {row.seq}: its chain hash was removed")
            continue
        if chain_hash(row.prev, row.question_prev, row.json) != row.hash:
            problems.append(f"position {row.seq}: the event was edited (its hash does not match)")
        if last is not None:
            problems.extend(_gap(last, row, purged, kept_since))
        before = by_question.get(row.request_id)
        if before is not None and row.question_prev != before:
            problems.append(
                f"position {row.seq}: the event before it in question {row.request_id} was "
                "edited, removed or moved"
            )
        by_question[row.request_id] = row.hash
        last = (row.seq, row.hash)
    if head is not None and (last is None or last[0] < head[0]):
        after = "the start" if last is None else f"position {last[0]}"
        problems.append(f"the events after {after} up to position {head[0]} were removed")
    elif head is not None and last is not None and last != head:
        problems.append(f"position {last[0]}: the newest event is not the checkpointed head")
    return problems


def _gap(
    last: tuple[int, str],
    row: ChainRow,
    purged: Mapping[int, tuple[float, str]],
    kept_since: float,
) -> list[str]:
    """The breaks between the event at ``last`` and ``row``: the events between them must
    have been purged by the retention, and ``row`` must follow the last of them."""
    prev_hash = last[1]
    for seq in range(last[0] + 1, row.seq):
        gone = purged.get(seq)
        if gone is None or gone[0] >= kept_since:
            return [f"position {seq}: the event was removed"]
        prev_hash = gone[1]
    if row.prev != prev_hash:
        return [f"position {row.seq}: out of order (it does not follow position {row.seq - 1})"]
    return []
