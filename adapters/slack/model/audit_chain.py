"""The audit trail's hash chain: each event's hash binds it to the one before it (in the
whole trail and in its question's), so an edited, removed or reordered event shows. Stores
keep the head (the newest position and hash) and each purged event's hash; ``verify``
names every break with its position."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["ChainCheck", "ChainRow", "chain_hash", "verify"]


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


class ChainCheck(NamedTuple):
    """What ``verify`` found: the breaks (tampering, each naming its position) and each run
    of events an earlier release wrote unchained (how many, where: ``at positions 4-6``)."""

    breaks: list[str]
    unchained: list[tuple[int, str]]


def verify(
    rows: Iterable[ChainRow],
    head: tuple[int, str] | None,
    purged: Mapping[int, tuple[float, str]],
    kept_since: float,
) -> ChainCheck:
    """Check the chain of ``rows`` (``seq`` order) against the ``head`` (position, hash) and
    each purged position's time and hash (``""``: unchained; purged after ``kept_since``:
    someone else's). Unchained events are stepped over."""
    breaks: list[str] = []
    runs: list[tuple[int, int, int, int]] = []  # unchained: count, first, last, after
    last: tuple[int, str] | None = None  # position and hash of the chained event before
    bare: set[int] = set()
    by_question: dict[str, str] = {}
    for row in rows:
        if row.hash is None:
            after = 0 if last is None else last[0]
            if runs and runs[-1][3] == after and (not row.seq or runs[-1][2] == row.seq - 1):
                runs[-1] = (runs[-1][0] + 1, runs[-1][1], row.seq, after)
            else:
                runs.append((1, row.seq, row.seq, after))
            bare.add(row.seq)
            continue
        if chain_hash(row.prev, row.question_prev, row.json) != row.hash:
            breaks.append(f"position {row.seq}: the event was edited (its hash does not match)")
        if last is not None:
            breaks.extend(_gap(last, row, purged, kept_since, bare))
        elif row.prev is not None and not any(
            h == row.prev and at < kept_since for at, h in purged.values()
        ):
            breaks.append(f"position {row.seq}: the chained event before it was removed")
        before = by_question.get(row.request_id)
        if before is not None and row.question_prev != before:
            breaks.append(
                f"position {row.seq}: the event before it in question {row.request_id} was "
                "edited, removed or moved"
            )
        by_question[row.request_id] = row.hash
        last = (row.seq, row.hash)
    if head is not None and head[0] in bare:
        breaks.append(f"position {head[0]}: the checkpointed head, its chain hash removed")
    elif head is not None and (last is None or last[0] < head[0]):
        since = "the start" if last is None else f"position {last[0]}"
        breaks.append(f"the events after {since} up to position {head[0]} were removed")
    elif head is not None and last is not None and last != head:
        breaks.append(f"position {last[0]}: the newest event is not the checkpointed head")
    return ChainCheck(breaks, [_where(*run) for run in runs])


def _where(count: int, first: int, last: int, after: int) -> tuple[int, str]:
    """A run of unchained events: how many, and their positions or (unnumbered) the one before."""
    if first:
        return count, f"at position {first}" if count == 1 else f"at positions {first}-{last}"
    return count, f"after position {after}" if after else "before the chain"


def _gap(
    last: tuple[int, str],
    row: ChainRow,
    purged: Mapping[int, tuple[float, str]],
    kept_since: float,
    bare: set[int],
) -> list[str]:
    """The breaks between the chained event at ``last`` and ``row`` (each position between
    unchained or purged, and ``row`` following the last chained one)."""
    prev_hash = last[1]
    for seq in range(last[0] + 1, row.seq):
        gone = purged.get(seq)
        if seq in bare:
            continue
        if gone is None or gone[0] >= kept_since:
            return [f"position {seq}: the event was removed"]
        prev_hash = gone[1] or prev_hash
    if row.prev == prev_hash:
        return []
    if bare.intersection(range(last[0] + 1, row.seq)):
        return [
            f"position {row.seq}: it does not follow position {last[0]} (an unchained event"
            " between them had its chain hash removed, or one was moved)"
        ]
    return [f"position {row.seq}: out of order (it does not follow position {row.seq - 1})"]
