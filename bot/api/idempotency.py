"""``Idempotency-Key`` on the POSTs that ask: one question per key, however often retried (a
default stated explicitly counts as left out)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from adapters.slack import QuestionStatus
from bot.api.body import ApprovalPost, QuestionPost
from bot.questions.models import AskUserQuestionItem
from bot.questions.review import ReviewPolicy

__all__ = ["KeyLocks", "key_problem", "same_approval", "same_request"]

_IDEMPOTENCY_KEY: Final = re.compile(r"[\x20-\x7e]{1,255}")


def key_problem(key: str | None) -> str | None:
    """Why ``key`` (the header's value; ``None`` when absent) is refused, or ``None``."""
    if key is None or _IDEMPOTENCY_KEY.fullmatch(key):
        return None
    return "Idempotency-Key is 1–255 printable ASCII characters"


class KeyLocks:
    """One lock per question id while any request for it is in flight."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def held(self, request_id: str) -> AsyncIterator[None]:
        """Hold ``request_id``'s lock (queued behind earlier requests for it)."""
        lock, users = self._locks.get(request_id, (asyncio.Lock(), 0))
        self._locks[request_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[request_id]
            if users == 1:
                del self._locks[request_id]
            else:
                self._locks[request_id] = (lock, users - 1)


def _same_place(
    question: QuestionStatus, post: QuestionPost | ApprovalPost, default_channel: str | None
) -> bool:
    """Whether ``post`` asks where ``question`` was asked, its label, link and callback."""
    where = post.destination
    channel = where.channel if where else default_channel
    place = (channel, where.thread_ts if where else None)
    same = all(getattr(question, f) == getattr(post, f) for f in ("label", "link", "callback"))
    return same and (channel is None or (question.channel, question.thread_ts) == place)


def same_approval(asked: QuestionStatus, post: ApprovalPost, default_channel: str | None) -> bool:
    """Whether ``post`` asks what ``asked`` asked (a retry with its key, not a new request)."""
    shown = asked.approval.model_copy(update={"outcome": None}) if asked.approval else None
    return shown == post.view() and _same_place(asked, post, default_channel)


def same_request(question: QuestionStatus, post: QuestionPost, default_channel: str | None) -> bool:
    """Whether ``post`` asks what ``question`` asked (a retry, not a new request): every field the
    body states counts as what it makes of the question (deadlines as offsets from asking); a
    deadline it leaves out is not compared (a default may differ in the process a retry reaches)."""
    return (
        _items(question.questions) == _items(post.questions)
        and _same_place(question, post, default_channel)
        and _dumped(question.review) == _dumped(post.review)
        and question.revises == post.revises
        and (post.remind is None or list(question.remind) == post.remind)
        and _same_times(_asked_times(question), post)
    )


def _items(questions: Sequence[AskUserQuestionItem]) -> list[dict[str, Any]]:
    """The questions in one form, whether their defaults were said or not: a question is
    single-select unless ``multiSelect`` is true, and ``"options": []`` shows what no
    options show (their descriptions, details and headers are ``null`` when left out)."""
    return [
        {
            **item.model_dump(mode="json"),
            "multi_select": item.is_multi_select,
            "options": [o.model_dump(mode="json") for o in item.options or ()] or None,
        }
        for item in questions
    ]


def _dumped(review: ReviewPolicy | None) -> dict[str, Any] | None:
    """A review policy in one form, whether its defaults were said or not."""
    return None if review is None else review.model_dump(mode="json")


_Times = tuple[float | None, list[float], float | None, str | None]
"""Timeout, reminders (seconds before the deadline, sorted), escalation after and to whom."""


def _asked_times(question: QuestionStatus) -> _Times:
    """The question's deadlines, as seconds from when it was asked."""
    asked = question.created_at
    deadline = question.deadline
    timeout = None if deadline is None else deadline - asked
    before = sorted(deadline - at for at in question.reminders) if deadline is not None else []
    after = None if question.escalate_at is None else question.escalate_at - asked
    return timeout, before, after, question.escalate_to


def _close(a: float | None, b: float | None) -> bool:
    """Equal to the millisecond (stored as absolute times, compared as offsets)."""
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-3)


def _same_times(asked: _Times, post: QuestionPost) -> bool:
    """Whether the deadline fields ``post`` states are what the question got."""
    timeout, before, after, whom = asked
    reminders = sorted(post.reminders) if post.reminders else None  # []: the defaults too
    return (
        (post.timeout is None or _close(timeout, post.timeout))
        and (
            reminders is None
            or (
                len(before) == len(reminders)
                and all(_close(x, y) for x, y in zip(before, reminders, strict=True))
            )
        )
        and (post.escalate_after is None or _close(after, post.escalate_after))
        and (post.escalate_to is None or whom == post.escalate_to)
    )
