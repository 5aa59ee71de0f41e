"""An answer used once, for a while: an executor consumes an answered question's decision.

``consume`` takes the answer by compare-and-set (``consumed_at``, with a ``consumed`` audit
event), so of two consumes, in any processes, exactly one succeeds; one past the answer's
lifetime, on an open question, or on one that ended unanswered is refused with its own code.
"""

from __future__ import annotations

from typing import Final

from adapters.slack.model.audit_trail import AuditEvent, digest_of
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import PendingStore

__all__ = ["REFUSALS", "consume", "expires_at"]

REFUSALS: Final = {
    "NOT_FOUND": "no such question",
    "NOT_DECIDED": "the question is still open: nothing to consume yet",
    "NOT_ANSWERED": "the question ended without an answer: nothing to consume",
    "ALREADY_CONSUMED": "this answer was already consumed: an approval is used once",
    "EXPIRED": "this answer is past its expiresAt: ask again",
}
"""The code of each refusal, and what it says."""
_ROUNDS: Final = 8


def expires_at(record: PendingRecord, lifetime: float) -> float | None:
    """Until when an answered record's decision may be consumed; ``None`` if not answered."""
    if record.state != "answered" or record.finished_at is None:
        return None
    return record.finished_at + lifetime


async def consume(
    store: PendingStore, request_id: str, *, by: str | None, now: float, lifetime: float
) -> tuple[str | None, PendingRecord | None]:
    """Consume the answer of ``request_id``: ``(None, record)`` once, else the refusal's
    code (``REFUSALS``) and the record as it stands."""
    for _ in range(_ROUNDS):
        record = await store.get(request_id)
        if record is None:
            return "NOT_FOUND", None
        if record.is_open:
            return "NOT_DECIDED", record
        ends = expires_at(record, lifetime)
        if ends is None:
            return "NOT_ANSWERED", record
        if record.consumed_at is not None:
            return "ALREADY_CONSUMED", record
        if now > ends:
            return "EXPIRED", record
        taken = record.model_copy(update={"consumed_at": now, "version": record.version + 1})
        event = AuditEvent(
            request_id=request_id,
            at=now,
            kind="consumed",
            version=taken.version,
            by=by,
            shown_sha256=digest_of(record),
        )
        if await store.compare_and_set(taken, event):
            return None, taken
    return "ALREADY_CONSUMED", await store.get(request_id)  # others kept writing: not ours
