"""The small blocks every rendering of a request shares (pure)."""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import Final

from adapters.slack.blockkit import MAX_SECTION_TEXT
from adapters.slack.model import ids
from adapters.slack.model.audience import who_may
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.rendered import Block
from adapters.slack.render.messages import names_of
from adapters.slack.render.mrkdwn import (
    ELLIPSIS,
    hidden_characters,
    mrkdwn,
    plain,
    reveal,
    shorten,
    shorten_escaped,
)
from adapters.slack.render.review_view import tally_line, vote_lines
from adapters.slack.render.rich import bold, italic, rich_text
from bot.questions.models import AskUserQuestionItem

__all__ = [
    "answer_by",
    "asker",
    "byline_blocks",
    "context",
    "date",
    "deadline_blocks",
    "ends",
    "header_block",
    "hidden_notice",
    "label",
    "left_out",
    "link_blocks",
    "markdown",
    "option_labels",
    "question_block",
    "section",
    "tally_blocks",
]


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


def label(text: str, limit: int) -> str:
    """A widget's label: shortened to ``limit``, ``(blank)`` for a blank one."""
    return shorten(text, limit) if text.strip() else "(blank)"


def option_labels(labels: Sequence[str], limit: int) -> tuple[list[str], bool]:
    """What each option shows in ``limit`` characters (as shown: ``reveal``), and whether they
    are numbered (a longer label is, cut between words; all are if one reads numbered)."""
    labels = [reveal(text) for text in labels]
    texts = [label(text, limit) for text in labels]
    cut = [i for i, text in enumerate(labels) if text.strip() and len(text) > limit]
    if not cut:
        return texts, False
    for i in cut:
        texts[i] = _numbered(i, labels[i], limit)
    if _distinct(labels, texts, cut):
        return texts, True
    return [_numbered(i, text, limit) for i, text in enumerate(labels)], True


def _distinct(labels: Sequence[str], texts: list[str], cut: list[int]) -> bool:
    """Whether no shortened option reads like an option with a different label."""
    owners: dict[str, set[str]] = {}
    for text, full in zip(texts, labels, strict=True):
        owners.setdefault(text, set()).add(full)
    return all(len(owners[texts[i]]) == 1 for i in cut)


def _numbered(index: int, text: str, limit: int) -> str:
    """``text`` after its option's number, shortened (``_middle``) to fit ``limit``."""
    number = f"{index + 1}. "
    body = text if text.strip() else "(blank)"
    room = limit - len(number)
    return number + (body if len(body) <= room else _middle(body, room))


_WORD: Final = 16
"""A cut moves back (the beginning) or on (the end) at most this far to a space."""


def _middle(text: str, limit: int) -> str:
    """``text`` as its beginning, ``…`` and its end (two fifths: where options usually
    differ), cut between words where one is near, never inside a character as shown."""
    if limit < 8:
        return shorten(text, limit)
    room = limit - 2  # the ellipsis and a space after it
    start = _clean_cut(text, len(text) - room * 2 // 5, back=False)
    if not text[start - 1].isspace():
        space = text.find(" ", start, start + _WORD)
        if space != -1:
            start = space + 1
    end = text[start:].lstrip()
    gap = " " if text[start - 1].isspace() else ""
    head = _clean_cut(text, limit - len(ELLIPSIS) - len(gap) - len(end), back=True)
    if not text[head].isspace():
        space = text.rfind(" ", max(0, head - _WORD), head)
        if space > 0:
            head = space
    return f"{text[:head].rstrip()}{ELLIPSIS}{gap}{end}"


def ends(text: str, limit: int, measure: Callable[[str], int] = len) -> tuple[str, str]:
    """The beginning and the end (two fifths) of ``text`` within ``limit`` by ``measure``;
    ``text`` and ``""`` when it fits whole."""
    if measure(text) <= limit:
        return text, ""
    tail_room = limit * 2 // 5
    low, high = 0, len(text)  # the end: where the longest suffix that fits starts
    while low < high:
        middle = (low + high) // 2
        if measure(text[middle:]) <= tail_room:
            high = middle
        else:
            low = middle + 1
    start = _clean_cut(text, low, back=False)
    start = _nearby(text, start, forward=True)
    head_room = limit - measure(text[start:])
    low, high = 0, start
    while low < high:  # the beginning: the longest prefix that fits what the end left
        middle = (low + high + 1) // 2
        if measure(text[:middle]) <= head_room:
            low = middle
        else:
            high = middle - 1
    head = _clean_cut(text, low, back=True)
    head = _nearby(text, head, forward=False)
    return text[:head], text[start:]


def _nearby(text: str, at: int, *, forward: bool) -> int:
    """``at`` moved to just after (``forward``) or at a line break, else a space, nearby."""
    if at <= 0 or at >= len(text):
        return at
    for separator, reach in (("\n", 2 * _WORD), (" ", _WORD)):
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


def _clean_cut(text: str, at: int, *, back: bool) -> int:
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
        or (_flag(after) and _halves(text, at) % 2 == 1)
    )


def _flag(char: str) -> bool:
    return _FLAG <= char <= _FLAG_END


def _halves(text: str, at: int) -> int:
    """How many regional indicators run up to ``at`` (a flag is two, from the run's start)."""
    count = 0
    while at - count > 0 and _flag(text[at - count - 1]):
        count += 1
    return count


_FLAG, _FLAG_END = "\U0001f1e6", "\U0001f1ff"
"""Regional indicators: two of them show one flag."""


def section(text: str) -> Block:
    """A section of escaped mrkdwn ``text``, shortened to fit."""
    return {"type": "section", "text": mrkdwn(shorten_escaped(text, MAX_SECTION_TEXT))}


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
    head, tail = ends(text, MAX_SECTION_TEXT - len(left_out(len(text))) - 2)
    gap = italic(f" {left_out(len(text) - len(head) - len(tail))} ")
    return rich_text(bold(head), gap, bold(tail), limit=MAX_SECTION_TEXT)


def header_block(header: str) -> Block:
    """A question's short header (chip) as plain text."""
    return {"type": "context", "elements": [plain(header, MAX_SECTION_TEXT)]}


def date(seconds: float) -> str:
    """A time in Slack's date formatting (each reader's own zone), UTC as the fallback."""
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
    return f"<!date^{int(seconds)}^{{date_short_pretty}} at {{time}}|{fallback}>"


def answer_by(deadline: float) -> str:
    """``Answer by <date>`` in Slack's date formatting: each reader sees their own zone."""
    return f"Answer by {date(deadline)}"


def deadline_blocks(record: PendingRecord) -> list[Block]:
    """The request's deadline, if it has one."""
    if record.deadline is None:
        return []
    return [context(f":alarm_clock: {answer_by(record.deadline)}")]


def link_blocks(record: PendingRecord) -> list[Block]:
    """The asker's link as a button that opens it (a URL button: a click only opens it)."""
    if not record.link:
        return []
    button = {
        "type": "button",
        "text": plain("Open the asker's page ↗"),
        "url": record.link,
        "action_id": ids.action_id("link"),
    }
    block_id = ids.block_id(record.id, None, f"l{record.version}")
    return [{"type": "actions", "block_id": block_id, "elements": [button]}]


def byline_blocks(record: PendingRecord, *, mention: bool = True) -> list[Block]:
    """Who is asked (the mention), who asks, and while open who may answer (ids only)."""
    elements: list[Block] = []
    if record.mention and mention:
        # validated by the configuration, never asker text
        elements.append(mrkdwn(record.mention))
    who = asker(record)
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


def tally_blocks(record: PendingRecord) -> list[Block]:
    """A team review's live tally and every vote (nothing without a policy)."""
    if record.review is None:
        return []
    ended = not record.is_open  # an ended review short of approval reads not approved
    lines = [tally_line(record.review, record.votes, ended=ended), *vote_lines(record.votes)]
    return [section("\n".join(lines))]
