"""Deadlines, reminders and escalation of one request, on an injectable clock."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from adapters.slack.model.audit_trail import SLACK_URL, permalink
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks import answer_by

__all__ = [
    "ESCALATE_TO_PATTERN",
    "TOP_REMINDER",
    "Clock",
    "Event",
    "SystemClock",
    "escalation_text",
    "mention_of",
    "overtaken",
    "reminder_text",
    "schedule",
    "take",
]

TOP_REMINDER: Final = ":alarm_clock: Reminder:"
"""How a reminder that mentions nobody starts (it is posted at the top level)."""
ESCALATE_TO_PATTERN: Final = re.compile(r"^[UWS][A-Z0-9]{2,20}\Z")
"""A user id (``U…``/``W…``) or a user group id (``S…``) to mention on escalation."""


class Clock(Protocol):
    """Where a schedule reads the time and waits: wall-clock seconds (epoch)."""

    def now(self) -> float:
        """The current time, in seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """The real time: ``time.time`` and ``asyncio.sleep``."""

    def now(self) -> float:
        """The current time, in seconds since the epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        await asyncio.sleep(seconds)


@dataclass(frozen=True, slots=True, order=True)
class Event:
    """One thing due at ``at``: a reminder, the escalation, or the deadline itself."""

    at: float
    kind: Literal["remind", "escalate", "expire"]
    index: int = 0
    """Which reminder (its place in ``record.reminders``)."""


def schedule(record: PendingRecord, late: float = 0.0) -> list[Event]:
    """What is due for ``record``, in time order (the expiry last among equals, ``late``
    seconds past the deadline)."""
    events = [Event(at, "remind", i) for i, at in enumerate(record.reminders)]
    if record.escalate_at is not None and record.escalate_to:
        events.append(Event(record.escalate_at, "escalate"))
    if record.deadline is not None:
        events = [e for e in events if e.at < record.deadline]
        events.append(Event(record.deadline + late, "expire"))
    return sorted(events, key=lambda e: (e.at, e.kind == "expire"))


def mention_of(target: str) -> str:
    """A user (``U…``/``W…``) or user group (``S…``) id as a Slack mention."""
    return f"<!subteam^{target}>" if target.startswith("S") else f"<@{target}>"


def reminder_text(record: PendingRecord) -> str:
    """The reminder: who may answer (a review's reviewers, the allowed users and groups) and
    whom ``remind`` names, mentioned; with nobody to mention, a top-level line linking the
    question (a thread reply mentioning nobody notifies nobody)."""
    reviewers = record.review.reviewers if record.review else None
    who = [*reviewers.users, *reviewers.usergroups] if reviewers else []
    who += [*(record.allowed_users or []), *(record.allowed_usergroups or [])]
    people = " ".join(mention_of(p) for p in dict.fromkeys(who + (record.remind or [])))
    when = f" {answer_by(record.deadline)}." if record.deadline is not None else ""
    if people:
        return (
            f":alarm_clock: {people} Reminder: this question is still waiting for an answer.{when}"
        )
    link = permalink(SLACK_URL, record.message_channel or record.channel, record.message_ts)
    return f"{TOP_REMINDER} a question is still waiting for an answer: <{link}|open it>.{when}"


def escalation_text(record: PendingRecord) -> str:
    """The escalation reply: the escalation user or group, mentioned."""
    target = mention_of(record.escalate_to or "")
    when = f" {answer_by(record.deadline)}." if record.deadline is not None else ""
    return f":rotating_light: {target} this question has had no answer yet; can you help?{when}"


def overtaken(event: Event, events: list[Event], now: float) -> bool:
    """Whether a later event of the same kind is due already (``event`` was missed)."""
    return any(e.kind == event.kind and event.at < e.at <= now for e in events)


def take(event: Event, record: PendingRecord) -> PendingRecord | None:
    """``record`` with ``event`` (a reminder or the escalation) taken; ``None`` if it was."""
    if not record.is_open:
        return None
    if event.kind == "remind":
        return record.next(reminded=event.index + 1) if record.reminded <= event.index else None
    return None if record.escalated else record.next(escalated=True)
