"""What rendering returns, and the small blocks and text cuts every rendering shares (pure)."""

from __future__ import annotations

import unicodedata
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from adapters.slack.blockkit import MAX_SECTION_TEXT, check_message
from adapters.slack.model import ids
from adapters.slack.model.audience import who_may
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import names_of
from adapters.slack.render.mrkdwn import (
    escape,
    hidden_characters,
    mrkdwn,
    plain,
    shorten,
    shorten_escaped,
)
from adapters.slack.render.outcomes import date
from adapters.slack.render.rich import Block, bold, italic, rich_text
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from bot.questions.models import AskUserQuestionItem

MAX_FALLBACK_TEXT: Final = 3000
"""The notification text (top-level ``text``), well within Slack's recommended 4,000."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A text uploaded as a file in the message's thread: too long for continuation posts."""

    filename: str
    title: str
    content: str
    comment: str


@dataclass(frozen=True, slots=True)
class Rendered:
    """A message to post: fallback ``text``, ``blocks``, continuation messages and files."""

    text: str
    blocks: list[Block]
    thread: list[list[Block]] = field(default_factory=list)
    files: list[Attachment] = field(default_factory=list)


def checked(rendered: Rendered, what: str, problems: list[str] | None = None) -> Rendered:
    """``rendered``, or ``SLACK_LIMIT`` naming the first of Slack's limits it breaks
    (``problems``: its blocks', when already known)."""
    if problems is None:
        problems = check_message(rendered.blocks, rendered.text)
    problems = problems + [p for part in rendered.thread for p in check_message(part)]
    if problems:
        said = f"this {what} cannot be shown within Slack's limits: {problems[0]}"
        raise UserQuestionError(said, SLACK_LIMIT)
    return rendered


def fallback(record: PendingRecord) -> str:
    """The notification text: who asks, the first question, and how many more."""
    first = record.questions[0].question.strip() if record.questions else ""
    first = first or "A question for you"  # Slack needs notification text
    more = f" (+{len(record.questions) - 1} more)" if len(record.questions) > 1 else ""
    who = f"{record.label}: " if record.label else ""
    return shorten_escaped(escape(f"{who}{first}{more}"), MAX_FALLBACK_TEXT)


def size_of(text: str) -> str:
    """A file's size as a person reads it (``12 KB``)."""
    return f"{len(text.encode('utf-8')) / 1024:,.0f} KB"


def hidden_notice(*texts: str | None) -> list[Block]:
    """A warning when ``texts`` hold characters that hide text or turn it (shown ``⟨U+202E⟩``)."""
    found = hidden_characters(*texts)
    if not found:
        return []
    shown = ", ".join(found[:5]) + (" …" if len(found) > 5 else "")
    return [
        context(
            ":warning: *Hidden characters*: this text holds characters that can hide words or "
            f"reverse their order ({shown}); they are shown where they stand. Read it as shown."
        )
    ]


def largest(low: int, high: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``low..high`` that ``fits`` (which holds up to some ``n``, then not)."""
    return low + bisect_left(range(low + 1, high + 1), True, key=lambda n: not fits(n))


WORD: Final = 16
"""A cut moves back (the beginning) or on (the end) at most this far to a space."""


def ends(text: str, limit: int, measure: Callable[[str], int] = len) -> tuple[str, str]:
    """The beginning and the end (two fifths) of ``text`` within ``limit`` by ``measure``."""
    if measure(text) <= limit:
        return text, ""
    tail = largest(0, len(text), lambda n: measure(text[len(text) - n :]) <= limit * 2 // 5)
    start = _nearby(text, clean_cut(text, len(text) - tail, back=False), forward=True)
    head_room = limit - measure(text[start:])
    head = largest(0, start, lambda n: measure(text[:n]) <= head_room)
    head = _nearby(text, clean_cut(text, head, back=True), forward=False)
    return text[:head], text[start:]


def abridged(text: str, limit: int) -> tuple[str, str, str]:
    """``text`` in ``limit`` as its beginning, ``left_out`` of the rest, and its end."""
    head, tail = ends(text, limit - len(left_out(len(text))) - 2)
    return head, left_out(len(text) - len(head) - len(tail)), tail


def _nearby(text: str, at: int, *, forward: bool) -> int:
    """``at`` moved to just after (``forward``) or at a line break, else a space, nearby."""
    if at <= 0 or at >= len(text):
        return at
    for separator, reach in (("\n", 2 * WORD), (" ", WORD)):
        if forward:
            found = text.find(separator, at, at + reach)
            if found != -1 and found + 1 < len(text):
                return found + 1
        else:
            found = text.rfind(separator, max(0, at - reach), at)
            if found > 0:
                return found
    return at


def left_out(count: int) -> str:
    """The marker between a text's beginning and its end: how much is not shown there."""
    return f"[… {count:,} character{'' if count == 1 else 's'} left out here …]"


def clean_cut(text: str, at: int, *, back: bool) -> int:
    """``at`` moved back (or on) until it falls between two characters as shown (not inside
    an accent, a joined emoji, a skin tone or a flag)."""
    while 0 < at < len(text) and _joined(text, at):
        at += -1 if back else 1
    return at


def _joined(text: str, at: int) -> bool:
    after, before = text[at], text[at - 1]
    return (
        unicodedata.combining(after) != 0
        or unicodedata.category(after) in ("Mn", "Me", "Mc")
        or after in "\u200d\ufe0e\ufe0f"
        or "\U0001f3fb" <= after <= "\U0001f3ff"
        or before == "\u200d"
        or (_flag(after) and _flags_before(text, at) % 2 == 1)
    )


def _flag(char: str) -> bool:
    """A regional indicator: two of them show one flag."""
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def _flags_before(text: str, at: int) -> int:
    """How many regional indicators run up to ``at`` (a flag is two, from the run's start)."""
    count = 0
    while at - count > 0 and _flag(text[at - count - 1]):
        count += 1
    return count


def section(text: str, limit: int = MAX_SECTION_TEXT) -> Block:
    """A section of escaped mrkdwn ``text``, shortened to ``limit``."""
    return {"type": "section", "text": mrkdwn(shorten_escaped(text, limit))}


def markdown(text: str) -> Block:
    """A ``markdown`` block (details and plans)."""
    return {"type": "markdown", "text": text}


def context(text: str) -> Block:
    """A context line of escaped mrkdwn ``text``, shortened to fit."""
    return {"type": "context", "elements": [mrkdwn(shorten_escaped(text, MAX_SECTION_TEXT))]}


def question_block(question: AskUserQuestionItem, index: int, count: int) -> Block:
    """The question as typed, in bold that its own ``*``, ``_`` or ``~`` cannot break."""
    number = f"{index + 1}. " if count > 1 else ""
    if not question.question.strip():
        return rich_text(bold(number), italic("(no question text)"))
    text = f"{number}{question.question}"
    if len(text) <= MAX_SECTION_TEXT:
        return rich_text(bold(text), limit=MAX_SECTION_TEXT)
    # Too long for one block: its beginning and its end (where the question itself usually
    # is), with how much is left out between them in our own words (not bold), never "…".
    head, gap, tail = abridged(text, MAX_SECTION_TEXT)
    return rich_text(bold(head), italic(f" {gap} "), bold(tail), limit=MAX_SECTION_TEXT)


def answer_by(deadline: float) -> str:
    """``Answer by <date>`` in Slack's date formatting: each reader sees their own zone."""
    return f"Answer by {date(deadline)}"


def actions(record: PendingRecord, index: int | None, tag: str, elements: list[Block]) -> Block:
    """An actions block of ``record``'s (question ``index``'s), ``tag`` and version in its id."""
    block_id = ids.block_id(record.id, index, f"{tag}{record.version}")
    return {"type": "actions", "block_id": block_id, "elements": elements}


def link_blocks(record: PendingRecord) -> list[Block]:
    """The asker's link as a button that opens it (a URL button: a click only opens it)."""
    if not record.link:
        return []
    text = plain("Open the asker's page ↗")
    button = {
        "type": "button",
        "text": text,
        "url": record.link,
        "action_id": ids.action_id("link"),
    }
    return [actions(record, None, "l", [button])]


def byline_blocks(
    record: PendingRecord, limit: int = MAX_SECTION_TEXT, *, mention: bool = True
) -> list[Block]:
    """Who is asked, who asks (cut to ``limit``), and while open who may answer."""
    elements: list[Block] = []
    if record.mention and mention:
        # validated by the configuration, never asker text
        elements.append(mrkdwn(record.mention))
    who = shorten(record.label, limit) if record.label else asker(record)
    if who:
        elements.append(plain(f"Asked by {who}", MAX_SECTION_TEXT))
    if record.is_open and record.questions:
        names = names_of(*who_may(record))
        elements.append(mrkdwn(f"Who may answer: {names}" if names else "Anyone here may answer"))
    return [{"type": "context", "elements": elements}] if elements else []


def asker(record: PendingRecord) -> str | None:
    """Who asked, as shown: the label, else the HTTP API and its token's name."""
    by = record.asked_by or ""
    if record.label or not (by == "api" or by.startswith("api:")):
        return record.label
    name = by.removeprefix("api").removeprefix(":")
    return f"{name} (HTTP API)" if name and name != "default" else "the HTTP API"
