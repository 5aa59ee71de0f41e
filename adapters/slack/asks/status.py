"""Where a question stands, as callers outside the provider see it (the HTTP API, the dsh
client), how one ends, and its answer consumed once by an executor (``consume``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final, Literal

from adapters.slack.asks.endings import Endings, ending_error, lost_record
from adapters.slack.model.audit_trail import AuditEvent, digest_of
from adapters.slack.model.record import ApprovalView, PendingRecord, State
from adapters.slack.model.tally import Vote
from adapters.slack.stores import PendingStore
from bot.questions import AskUserQuestionAnswer, AskUserQuestionItem, UserQuestionError
from bot.questions.errors import RECORD_LOST
from bot.questions.review import ReviewPolicy

_UNPOSTED_LOOK: Final = 2.0
"""Seconds between two looks at a record ``wait_ended`` waits on while it has no message."""
_SHAPE: Final = PendingRecord(id="", channel="", questions=[]).model_dump_json().encode()
"""Every field of a record: what ``report_ending``'s copy is zipped against (raw deflate, in
memory only): some 200 bytes for a small record, 330 without."""


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """Where a question's message is in Slack."""

    channel: str
    ts: str


@dataclass(frozen=True, slots=True)
class QuestionStatus:
    """One question as it stands: ``pending``, or how it ended."""

    id: str
    state: State
    version: int
    """Grows by one with every change to the question (a way to tell that nothing changed)."""
    created_at: float
    questions: tuple[AskUserQuestionItem, ...] = ()
    label: str | None = None
    """Who asked, as the message shows it."""
    channel: str | None = None
    """Where it was asked (the destination, before Slack answered with the message)."""
    thread_ts: str | None = None
    finished_at: float | None = None
    answer: AskUserQuestionAnswer | None = None
    answered_by: str | None = None
    answered_by_name: str | None = None
    votes: tuple[Vote, ...] = ()
    """A team review's votes, in the order cast."""
    error: UserQuestionError | None = None
    """The error its waiter failed with (cancelled, aborted, failed)."""
    note: str | None = None
    message: SlackMessage | None = None
    queued: bool = False
    """Open, and its message still waits its turn within Slack's rate limits."""
    decision: Literal["allowed-once", "rejected"] | None = None
    """For an approval (``ask_approval``): what the person decided."""
    approval: ApprovalView | None = None
    """For an approval: the tool, command or path and headline shown."""
    asked_by: str | None = None
    """Who asked: ``api`` or ``api:<token name>`` (the HTTP API), a dsh host, the code."""
    deadline: float | None = None
    reminders: tuple[float, ...] = ()
    """When to remind (times, as ``deadline``), sent or not."""
    escalate_at: float | None = None
    escalate_to: str | None = None
    remind: tuple[str, ...] = ()
    link: str | None = None
    callback: str | None = None
    review: ReviewPolicy | None = None
    revises: str | None = None
    """The id of the earlier plan review this one revises."""
    consumed_at: float | None = None
    """When its executor consumed the answer (``consume``), if it did."""

    @property
    def is_open(self) -> bool:
        """Whether the question still waits for an answer."""
        return self.state == "pending"


_SAME: Final = [f.name for f in fields(QuestionStatus) if f.name in PendingRecord.model_fields]
"""The fields a status copies from its record (lists as tuples)."""


def status_of(record: PendingRecord) -> QuestionStatus:
    """The status of a stored request."""
    same = {name: getattr(record, name) for name in _SAME}
    for name in ("questions", "votes", "reminders", "remind"):
        same[name] = tuple(same[name] or ())
    answered = record.state == "answered"
    same["answer"] = record.answer if answered else None
    message = None
    if record.message_channel and record.message_ts:
        message = SlackMessage(record.message_channel, record.message_ts)
    return QuestionStatus(
        **same,
        error=None if answered or record.is_open else ending_error(record),
        message=message,
        decision=record.approval.outcome if record.approval is not None else None,
        revises=record.revision.previous_id if record.revision is not None else None,
    )


async def wait_ended(endings: Endings, request_id: str) -> QuestionStatus:
    """Wait until request ``request_id`` ends, wherever it is answered; cancel to stop."""
    store = endings.store
    before = await store.get(request_id)
    watch = store.watch(request_id)
    try:
        while before is not None and before.message_ts is None:
            # Not posted yet: looked at again now and then, so that a record lost later
            # is put back knowing its message, and the message closes.
            try:
                async with asyncio.timeout(_UNPOSTED_LOOK):
                    return status_of(await watch.wait())
            except TimeoutError:
                with contextlib.suppress(UserQuestionError):  # a blip: wait on through it
                    before = await store.get(request_id) or before
        return status_of(await watch.wait())
    except UserQuestionError as exc:
        if exc.code != RECORD_LOST or before is None:
            raise
        # a tracked task, shielded: a long-poll that times out meanwhile leaves nothing
        # half done (a failure is logged, a stop waits for it)
        put_back = endings.sync.spawn(endings.put_back_lost(before.dump()), "put back")
        await asyncio.shield(put_back)
        return status_of(await store.get(request_id) or lost_record(before))
    finally:
        watch.close()


async def report_ending(endings: Endings, request_id: str, report: Report) -> bool:
    """Report how request ``request_id`` ends (or the error ending its watch) to ``report``,
    no task waiting (a watch; the record's JSON zipped, put back if lost); ``False``: unknown."""
    watch = endings.store.watch(request_id)
    try:
        record = await endings.store.get(request_id)
    except BaseException:
        watch.close()
        raise
    if record is None or not record.is_open:
        watch.close()
        if record is not None:
            report(request_id, status_of(record))
        return record is not None
    zipper = zlib.compressobj(wbits=-15, zdict=_SHAPE)
    copy = zipper.compress(record.dump().encode()) + zipper.flush()
    watch.then(functools.partial(_ended, request_id, copy, report, endings))
    return True


Report = Callable[[str, "QuestionStatus | BaseException"], None]  # (id, status or error)


def _ended(
    request_id: str,
    copy: bytes,
    report: Report,
    endings: Endings,
    outcome: str | BaseException,
) -> None:
    """Report ``outcome`` (record JSON, or error); a lost record is put back from ``copy``."""
    if isinstance(outcome, str):
        report(request_id, status_of(PendingRecord.load(outcome)))
    elif isinstance(outcome, UserQuestionError) and outcome.code == RECORD_LOST:
        last = zlib.decompressobj(wbits=-15, zdict=_SHAPE).decompress(copy).decode()
        endings.sync.spawn(endings.put_back_lost(last), "put back")
        report(request_id, status_of(lost_record(PendingRecord.load(last))))
    else:
        report(request_id, outcome)


REFUSALS: Final = {
    "NOT_FOUND": "no such question",
    "NOT_DECIDED": "the question is still open: nothing to consume yet",
    "NOT_ANSWERED": "the question ended without an answer: nothing to consume",
    "ALREADY_CONSUMED": "this answer was already consumed: an approval is used once",
    "EXPIRED": "this answer is past its expiresAt: ask again",
}
"""The code of each refusal, and what it says."""
_ROUNDS: Final = 8


async def consume(
    store: PendingStore, request_id: str, *, by: str | None, now: float, lifetime: float
) -> tuple[str | None, PendingRecord | None]:
    """Consume the answer of ``request_id`` by compare-and-set (of two consumes, in any
    processes, exactly one succeeds): ``(None, record)``, else the refusal's code
    (``REFUSALS``) and the record as it stands."""
    for _ in range(_ROUNDS):
        record = await store.get(request_id)
        if record is None:
            return "NOT_FOUND", None
        if record.is_open:
            return "NOT_DECIDED", record
        if record.state != "answered" or record.finished_at is None:
            return "NOT_ANSWERED", record
        if record.consumed_at is not None:
            return "ALREADY_CONSUMED", record
        if now > record.finished_at + lifetime:
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
