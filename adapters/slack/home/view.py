"""Pure rendering: App Home's "Waiting for you", the open questions a person may answer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

from adapters.slack.blockkit import MAX_BUTTON_TEXT, MAX_SECTION_TEXT
from adapters.slack.model import ids
from adapters.slack.model.audit_trail import SLACK_URL, permalink
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.options import button, button_labels
from adapters.slack.render.blocks.parts import answer_by, asker
from adapters.slack.render.layout import layout_of
from adapters.slack.render.mrkdwn import escape, mrkdwn, plain, reveal, shorten, shorten_escaped
from adapters.slack.render.rich import bold, italic, rich_text, words
from bot.questions.models import AskUserQuestionItem

Block = dict[str, Any]

MAX_HOME_ENTRIES: Final = 20
"""Questions listed at most (a Home tab holds 100 blocks; each entry takes up to four)."""
_SEPARATOR: Final = " · "
_ASKED_BY: Final = "Asked by "
_QUESTION_ROOM: Final = 2900
"""The most of a question's text an entry shows (a longer one is shortened: no one-tap answer)."""


def message_link(record: PendingRecord) -> str | None:
    """A link that opens the question's message in Slack (``None`` before it is posted)."""
    return permalink(SLACK_URL, record.message_channel or record.channel, record.message_ts)


def _ago(seconds: float) -> str:
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
    return f"<!date^{int(seconds)}^asked {{ago}}|asked {fallback}>"


def _facts(record: PendingRecord) -> str:
    """Where, by whom, when, the deadline and the link, as one context line. The asker's
    label (of any length) gets what the rest leaves: one long label cannot make Slack
    refuse the whole tab, and the link always shows."""
    where = record.message_channel or record.channel
    before = [f"<#{where}>"] if where.startswith(("C", "G")) else []
    after = [_ago(record.created_at)]
    if record.deadline is not None:
        after.append(answer_by(record.deadline))
    link = message_link(record)
    if link is not None:
        after.append(f"<{link}|Open the question>")
    who = (asker(record) or "").strip()
    if who:
        room = MAX_SECTION_TEXT - len(_SEPARATOR.join([*before, _ASKED_BY, *after]))
        before.append(_ASKED_BY + shorten_escaped(escape(who), room))
    return shorten_escaped(_SEPARATOR.join(before + after), MAX_SECTION_TEXT)


def _entry(record: PendingRecord) -> list[Block]:
    first = record.questions[0] if record.questions else None
    text = first.question.strip() if first is not None else ""
    more = len(record.questions) - 1
    if record.approval is not None:  # a tool approval: its headline is its question
        text = record.approval.headline.strip()
    pieces = [bold(shorten(text, _QUESTION_ROOM))] if text else [italic("(no question text)")]
    layout = layout_of(record.questions)
    kind = "Tool approval" if record.approval else "Plan review" if layout == "plan" else None
    if kind:
        pieces.insert(0, italic(f"{kind}: "))
    if more > 0:
        pieces.append(words(f" (+{more} more)"))
    blocks: list[Block] = [rich_text(*pieces)]
    blocks.append({"type": "context", "elements": [mrkdwn(_facts(record))]})
    if layout == "tap" and first is not None and _tappable(first, text):
        labels = enumerate(button_labels(first))  # as on the message: shortened ones never alike
        buttons = [
            button(text, ids.action_id("pick", i), ids.option_value(i)) for i, text in labels
        ]
        block_id = ids.block_id(record.id, 0, f"c{record.version}")
        blocks.append({"type": "actions", "block_id": block_id, "elements": buttons})
    return blocks


def _tappable(first: AskUserQuestionItem, text: str) -> bool:
    """Whether the entry may answer with one tap: only when it shows all the message shows
    before anyone chooses (the question whole; no detail nor descriptions; labels in full)."""
    if first.detail or len(text) > _QUESTION_ROOM:
        return False
    options = first.options or []
    if any((option.description or "").strip() for option in options):
        return False
    return all(len(reveal(label)) <= MAX_BUTTON_TEXT for label in first.option_labels)  # none cut


def render_home(records: Sequence[PendingRecord], total: int | None = None) -> Block:
    """The Home tab listing ``records`` (filtered for the person), oldest first; ``total``:
    how many they may answer in all, when ``records`` are only the oldest."""
    waiting = sorted((r for r in records if r.is_open), key=lambda r: r.created_at)
    blocks: list[Block] = [{"type": "header", "text": plain("Waiting for you")}]
    if not waiting:
        blocks.append(
            {"type": "section", "text": plain("Nothing is waiting for an answer from you.")}
        )
    for index, record in enumerate(waiting[:MAX_HOME_ENTRIES]):
        if index:
            blocks.append({"type": "divider"})
        blocks.extend(_entry(record))
    rest = max(len(waiting), total or 0) - min(len(waiting), MAX_HOME_ENTRIES)
    if rest > 0:
        blocks.append(
            {"type": "context", "elements": [plain(f"…and {rest} more, in the channels.")]}
        )
    return {"type": "home", "blocks": blocks}
