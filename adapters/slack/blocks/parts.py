"""The small blocks every rendering of a request shares (pure).

The question as typed (``rich_text`` in a bold style its own ``*``, ``_`` or ``~`` cannot
break), its header chip, who asked, the deadline in Slack's date formatting, the asker's
link, the note and a team review's tally. Asker text goes through ``escape`` into mrkdwn,
or into ``plain_text`` or ``rich_text``.
"""

from __future__ import annotations

import time

from adapters.slack import ids
from adapters.slack.blockkit.limits import MAX_SECTION_TEXT
from adapters.slack.blocks.rendered import Block
from adapters.slack.mrkdwn import escape, mrkdwn, plain, shorten, shorten_escaped
from adapters.slack.record import PendingRecord
from adapters.slack.review_view import tally_line, vote_lines
from adapters.slack.rich import bold, italic, rich_text
from bot.questions.models import AskUserQuestionItem

__all__ = [
    "answer_by",
    "byline_blocks",
    "context",
    "date",
    "deadline_blocks",
    "header_block",
    "label",
    "link_blocks",
    "markdown",
    "note_blocks",
    "question_block",
    "section",
    "tally_blocks",
]


def label(text: str, limit: int) -> str:
    """A widget's label: shortened to ``limit``, ``(blank)`` for a blank one."""
    return shorten(text, limit) if text.strip() else "(blank)"


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
    return rich_text(bold(f"{number}{question.question}"), limit=MAX_SECTION_TEXT)


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
    """Who is asked (the configured mention) and who asks (the label)."""
    elements: list[Block] = []
    if record.mention and mention:
        # validated by the configuration, never asker text
        elements.append(mrkdwn(record.mention))
    if record.label:
        elements.append(plain(f"Asked by {record.label}", MAX_SECTION_TEXT))
    return [{"type": "context", "elements": elements}] if elements else []


def note_blocks(record: PendingRecord) -> list[Block]:
    """The open request's note (a warning line), if any."""
    return [context(f":warning: {escape(record.note)}")] if record.note and record.is_open else []


def tally_blocks(record: PendingRecord) -> list[Block]:
    """A team review's live tally and every vote (nothing without a policy)."""
    if record.review is None:
        return []
    ended = not record.is_open  # an ended review short of approval reads not approved
    lines = [tally_line(record.review, record.votes, ended=ended), *vote_lines(record.votes)]
    return [section("\n".join(lines))]
