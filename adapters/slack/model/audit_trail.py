"""The audit trail: every change of a question, when, by whom, and what they were shown.

Its hash chain: each event's hash binds it to the one before it (in the whole trail and in
its question's), so an edited, removed or reordered event shows. Stores keep the head (the
newest position and hash) and each purged event's hash; ``verify`` names every break with
its position."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

from pydantic import Field

from adapters.slack.model.record import ApprovalView, Draft, PendingRecord
from adapters.slack.model.tally import Wire
from bot.questions.models import AskUserQuestionItem

AuditKind = Literal[
    "asked", "changed", "answered", "cancelled", "aborted", "failed", "reopened", "consumed"
]


class AuditEvent(Wire):
    """One entry of a question's trail (JSON with camelCase names, as the API shows it)."""

    request_id: str
    at: float
    kind: AuditKind
    version: int
    by: str | None = None
    """Who: the Slack user id, ``api:<token name>``, the asking agent, or a bot process."""
    by_name: str | None = None
    """The person's Slack name, when a person acted."""
    shown_sha256: str
    detail: dict[str, Any] = Field(default_factory=dict)
    """What changed: where and how it was asked, the ticks, a team review's votes, the exact
    answer, the reason, the code."""

    def dump(self) -> str:
        """The event as one line of JSON."""
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def load(cls, data: str | bytes) -> AuditEvent:
        """Parse an event written by ``dump``."""
        return cls.model_validate_json(data)


def shown_digest(questions: Sequence[AskUserQuestionItem]) -> str:
    """SHA-256 (hex) of the questions as shown: their wire JSON, keys sorted, no spaces."""
    wire = [item.model_dump(by_alias=True, exclude_none=True, mode="json") for item in questions]
    return _sha256(wire)


def approval_digest(view: ApprovalView) -> str:
    """SHA-256 (hex) of a tool approval as shown (``ApprovalView`` without the decision): an
    "Allow once" is bound to the command it allowed."""
    return _sha256(view.model_dump(exclude={"outcome"}, exclude_none=True, mode="json"))


def _sha256(shown: Any) -> str:
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def digest_of(record: PendingRecord) -> str:
    """What ``record`` shows, hashed: an approval's ``approval_digest`` (computed each time),
    else the questions' digest it was made with, if kept, or ``shown_digest`` of them."""
    if record.approval is not None:
        return approval_digest(record.approval)
    return record.shown_sha256 or shown_digest(record.questions)


SLACK_URL: Final = "https://slack.com"
"""Where a permalink made without the team's address starts (Slack redirects it)."""


def permalink(team_url: str | None, channel: str | None, ts: str | None) -> str | None:
    """Slack's permalink of a message (``https://team.slack.com/archives/C…/p…``)."""
    if not team_url or not channel or not ts:
        return None
    return f"{team_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"


def asked_event(
    record: PendingRecord, *, by: str | None, link: str | None, at: float | None = None
) -> AuditEvent:
    """The ``asked`` event of a record whose message was just posted."""
    detail = {
        "channel": record.message_channel or record.channel,
        "threadTs": record.thread_ts,
        "messageTs": record.message_ts,
        "permalink": link,
        "label": record.label,
        "owner": record.owner,
    }
    return _event(record, "asked", by or record.label, None, at, detail)


def event_for(
    before: PendingRecord,
    after: PendingRecord,
    *,
    by: str | None = None,
    by_name: str | None = None,
    at: float | None = None,
) -> AuditEvent | None:
    """The event of the write ``before`` → ``after``; ``None`` for bookkeeping only."""
    kind: AuditKind
    if before.is_open and not after.is_open:
        kind = after.state  # type: ignore[assignment]  # a terminal state is an event kind
        by = after.answered_by or by
        by_name = after.answered_by_name or by_name
        answered = after.state == "answered"
        detail = {
            "answer": after.answer.to_wire() if answered and after.answer is not None else None,
            "decision": after.approval.outcome if after.approval else None,  # allowed-once…
            "code": after.error_code or None,
            "reason": None if answered else after.note or None,
            "votes": _votes(after) or None,
            "openedWholePlan": after.opened_whole_plan,
        }
    elif not before.is_open and after.is_open:
        kind = "reopened"
        detail = {"reason": after.note or None}
    elif after.is_open:
        ticked = _ticked(before, after, by)
        voted = after.votes != before.votes
        read = after.plan_readers != before.plan_readers
        if ticked is None and not voted and not read:
            return None  # bookkeeping only
        kind = "changed"  # ticks, a vote that kept it open, the whole plan opened
        detail = {
            "openedWholePlan": True if read else None,
            "drafts": None if ticked is None else [d.model_dump(exclude_none=True) for d in ticked],
            "votes": _votes(after) if voted else None,
        }
    else:
        return None
    return _event(after, kind, by, by_name, at, detail)


def _event(
    record: PendingRecord,
    kind: AuditKind,
    by: str | None,
    by_name: str | None,
    at: float | None,
    detail: Mapping[str, Any],
) -> AuditEvent:
    return AuditEvent(
        request_id=record.id,
        at=time.time() if at is None else at,
        kind=kind,
        version=record.version,
        by=by,
        by_name=by_name,
        shown_sha256=digest_of(record),
        detail={name: value for name, value in detail.items() if value is not None},
    )


def _ticked(before: PendingRecord, after: PendingRecord, by: str | None) -> list[Draft] | None:
    """The drafts a write changed: ``by``'s own (``user_drafts``), or an older record's
    shared ``drafts``; ``None``: none changed."""
    if after.drafts != before.drafts:
        return after.drafts
    changed = {
        user: drafts
        for user, drafts in after.user_drafts.items()
        if before.user_drafts.get(user) != drafts
    }
    if not changed:
        return None
    return changed.get(by or "", next(iter(changed.values())))


def _votes(record: PendingRecord) -> list[dict[str, Any]]:
    return [vote.model_dump(by_alias=True, exclude_none=True) for vote in record.votes]


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
