"""Pure wording: what happened to a request, in words a person reads at a glance."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Final

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.layout import layout_of
from adapters.slack.render.messages import ALREADY, NO_LONGER_OPEN
from adapters.slack.render.mrkdwn import escape
from bot.questions.errors import ASK_TIMEOUT

ICONS: Final = {
    "Approved": ":white_check_mark:",
    "Declined": ":x:",
    "Answered": ":white_check_mark:",
    "Sent": ":outbox_tray:",
    "Skipped": ":fast_forward:",
    "Dismissed": ":no_entry_sign:",
    "Cancelled": ":black_square_for_stop:",
    "Failed": ":warning:",
    "Timed out": ":hourglass:",
}
"""The emoji shown before each verb in the message record."""


_ZWSP: Final = "\u200b"
_MARKUP: Final = re.compile(r"[*_~`]")
_EMOJI_CODE: Final = re.compile(r":(?=[\w+'-]+:)")
_FOLD: Final = " / "


def date(seconds: float, *, clock: bool = False) -> str:
    """A time in Slack's date formatting (each reader's own zone), UTC as the fallback."""
    shown, utc = (
        ("{time}", "%H:%M") if clock else ("{date_short_pretty} at {time}", "%Y-%m-%d %H:%M")
    )
    return f"<!date^{int(seconds)}^{shown}|{time.strftime(utc, time.gmtime(seconds))} UTC>"


def one_line(text: str) -> str:
    """``text`` with its line breaks folded into `` / ``, blank lines dropped."""
    return _FOLD.join(line.strip() for line in text.splitlines() if line.strip())


def literal(text: str) -> str:
    """Asker text escaped for a mrkdwn line of ours, its markup shown as typed."""
    text = _EMOJI_CODE.sub(f":{_ZWSP}", escape(text))
    return _MARKUP.sub(lambda match: f"{_ZWSP}{match[0]}{_ZWSP}", text)


_WITH_REASON: Final = frozenset({"Cancelled", "Failed", "Timed out", "Sent"})
IN_FLIGHT: Final = "waiting for the harness to take it"
"""Why an answer given here is shown as sent, not answered: its asker has not taken it."""
_SAYS_WHAT_HAPPENED: Final = frozenset({"Cancelled", "Interrupted", "Answered", "Dismissed"})


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a request ended: a verb, who (if a person), and what they said or why."""

    verb: str
    user: str | None = None
    name: str | None = None
    feedback: str | None = None
    reason: str | None = None
    people: tuple[tuple[str, str | None], ...] = ()
    """Everyone who decided it together (a team review's approvers or decliners)."""
    opened: bool | None = None  # whether who decided a long plan had opened it whole


def opened_words(opened: bool | None) -> str:
    """What a decision on a plan longer than its message says of the whole plan."""
    if opened is None:
        return ""
    return " after opening the whole plan" if opened else " without opening the whole plan"


def person(user: str | None, name: str | None, *, mention: bool) -> str:
    """A person as text: ``<@U…>`` where mentions render, else their name (or their id)."""
    if mention and user:
        return f"<@{user}>"
    if name:
        return f"@{name}"
    return f"@{user}" if user else "someone"


def _answered(record: PendingRecord) -> Outcome:
    user, name = record.answered_by, record.answered_by_name
    if record.in_flight:
        return Outcome("Sent", user, name, reason=IN_FLIGHT)
    answers = record.answer.answers if record.answer is not None else []
    if layout_of(record.questions) == "plan" and answers:
        item = answers[0]
        intent = record.questions[0].intent  # free text declines
        approved = intent is not None and list(item.selected) == [intent.approve]
        verb = "Approved" if approved else "Declined"
        feedback = item.custom if verb == "Declined" and item.custom else None
        if record.votes:  # a team review: everyone whose vote decided it
            people = tuple((v.user, v.name) for v in record.votes if v.approve == approved)
            return Outcome(verb, feedback=feedback, people=people)
        return Outcome(verb, user, name, feedback=feedback, opened=record.opened_whole_plan)
    if answers and all(not item.selected and not item.custom for item in answers):
        return Outcome("Skipped", user, name)
    return Outcome("Answered", user, name)


def outcome_of(record: PendingRecord) -> Outcome:
    """How an ended ``record`` ended (every caller draws ended records only)."""
    if record.state == "answered":
        return _answered(record)
    if record.state == "cancelled":
        return Outcome("Dismissed", record.answered_by, record.answered_by_name)
    if record.state == "aborted":
        return Outcome("Cancelled", reason=record.note)
    assert record.state == "failed", "an open record has no outcome"
    if record.error_code == ASK_TIMEOUT:
        return Outcome("Timed out", reason=record.note)
    return Outcome("Failed", reason=record.note)


def as_mrkdwn(outcome: Outcome, *, feedback: bool = True) -> str:
    """The outcome as escaped mrkdwn with a mention (and declined feedback, on one line)."""
    line = outcome.verb
    if who := _deciders(outcome, mention=True):
        line += f" by {who}" + ("" if outcome.people else opened_words(outcome.opened))
    if outcome.feedback and feedback:
        line += f" — «{literal(one_line(outcome.feedback))}»"
    if outcome.reason and outcome.verb in _WITH_REASON:
        reason = escape(outcome.reason)
        # A reason that already says what happened ("Cancelled: the asker stopped…",
        # "Interrupted: the bot shut down…", "Answered in another client.") is the line.
        said = re.split(r"[\s:]", reason, maxsplit=1)[0] in _SAYS_WHAT_HAPPENED
        if reason.startswith(("No ", "Superseded ")):  # "Timed out: no answer…"
            reason = reason[0].lower() + reason[1:]
        line = reason if said else f"{line}: {reason}"
    return line


def refusal(record: PendingRecord, *, mention: bool) -> str:
    """The private note for a click on a request that is no longer open, naming who ended it."""
    outcome = outcome_of(record)
    said = ALREADY.get(outcome.verb)
    if said is None:
        return NO_LONGER_OPEN
    who = _deciders(outcome, mention=mention)
    return f"{said} by {who}." if who else f"{said}."


def _deciders(outcome: Outcome, *, mention: bool) -> str | None:
    """Who decided ``outcome`` (everyone, for a team review), or ``None`` when no person did."""
    single = ((outcome.user, outcome.name),) if outcome.user or outcome.name else ()
    return ", ".join(person(u, n, mention=mention) for u, n in outcome.people or single) or None
