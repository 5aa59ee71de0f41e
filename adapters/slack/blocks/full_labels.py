"""Full labels before choosing: whatever a widget shortens is listed in full (pure).

A label longer than a button or option shows, or a description a button cannot show, is
listed above the widget; when the message has no room, the list goes to the thread.
"""

from __future__ import annotations

from adapters.slack.blockkit.limits import (
    MAX_BUTTON_TEXT,
    MAX_OPTION_DESCRIPTION,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
)
from adapters.slack.blocks.overflow import THREAD_PART
from adapters.slack.blocks.parts import context
from adapters.slack.blocks.rendered import Block
from adapters.slack.layout import Layout
from adapters.slack.record import PendingRecord
from adapters.slack.rich import Piece, bold, italic, rich_list, words
from bot.questions.models import AskUserQuestionItem

__all__ = ["options_blocks", "options_thread"]


def _shortened(question: AskUserQuestionItem, layout: Layout) -> list[int]:
    """The options a widget shows shortened (on buttons: descriptions are not shown at all)."""
    options = question.options or []
    if layout in ("tap", "plan"):
        return [i for i, o in enumerate(options) if len(o.label) > MAX_BUTTON_TEXT or o.description]
    return [
        i
        for i, o in enumerate(options)
        if len(o.label) > MAX_OPTION_TEXT or len(o.description or "") > MAX_OPTION_DESCRIPTION
    ]


def _option_line(question: AskUserQuestionItem, index: int) -> list[Piece]:
    option = (question.options or [])[index]
    line = [bold(option.label) if option.label.strip() else italic("(blank)")]
    if option.description:
        line.append(words(f" — {option.description}"))
    return line


def _full_options(question: AskUserQuestionItem, layout: Layout) -> list[list[Piece]]:
    """The lines listing the full text of each option that a widget shortens."""
    return [_option_line(question, i) for i in _shortened(question, layout)]


def options_blocks(question: AskUserQuestionItem, layout: Layout, inline: bool) -> list[Block]:
    """The full list above the widget (``inline``), or a line saying it is in the thread."""
    lines = _full_options(question, layout)
    if not lines:
        return []
    if not inline:
        return [context(":thread: The full text of the options is in the thread.")]
    return [rich_list(lines, ordered=len(lines) == len(question.options or []))]


def options_thread(record: PendingRecord, layout: Layout) -> list[list[Block]]:
    """Thread messages listing the options' full texts (when the message has no room)."""
    messages: list[list[Block]] = []
    count = len(record.questions)
    for index, question in enumerate(record.questions):
        lines = _full_options(question, layout)
        chunk: list[list[Piece]] = []
        size = 0
        chunks: list[list[list[Piece]]] = []
        for line in lines:
            length = sum(len(piece["text"]) for piece in line)
            if chunk and (size + length > THREAD_PART or len(chunk) >= MAX_OPTIONS):
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(line)
            size += length
        if chunk:
            chunks.append(chunk)
        what = f"Options of question {index + 1}" if count > 1 else "Options"
        for n, part in enumerate(chunks, start=1):
            caption = f"{what}, in full ({n}/{len(chunks)})"
            messages.append([context(caption), rich_list(part)])
    return messages
