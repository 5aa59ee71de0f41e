"""Full labels before choosing: whatever a widget shortens is listed in full (pure)."""

from __future__ import annotations

from adapters.slack.blockkit import (
    MAX_BUTTON_TEXT,
    MAX_OPTION_DESCRIPTION,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
)
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.overflow import THREAD_PART
from adapters.slack.render.blocks.parts import context, option_labels
from adapters.slack.render.blocks.rendered import Block
from adapters.slack.render.layout import Layout
from adapters.slack.render.rich import Piece, bold, italic, rich_list, words
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


def _full_options(question: AskUserQuestionItem, layout: Layout) -> list[tuple[int, list[Piece]]]:
    """The index and the full-text line of each option that a widget shortens."""
    return [(i, _option_line(question, i)) for i in _shortened(question, layout)]


def _numbered(question: AskUserQuestionItem, layout: Layout) -> bool:
    """Whether the widget's labels carry their options' numbers."""
    limit = MAX_BUTTON_TEXT if layout in ("tap", "plan") else MAX_OPTION_TEXT
    return option_labels(question.option_labels, limit)[1]


def _listed(entries: list[tuple[int, list[Piece]]], numbered: bool, ordered: bool) -> Block:
    """The lines as one list: numbered by their options' numbers when the widget shows
    them (one numbered list per run of consecutive options), else as before."""
    if not numbered:
        lines = [line for _, line in entries]
        return {"type": "rich_text", "elements": [rich_list(lines, ordered=ordered)]}
    runs: list[tuple[int, list[list[Piece]]]] = []
    for index, line in entries:
        if runs and runs[-1][0] + len(runs[-1][1]) == index:
            runs[-1][1].append(line)
        else:
            runs.append((index, [line]))
    lists = [rich_list(lines, ordered=True, offset=start) for start, lines in runs]
    return {"type": "rich_text", "elements": lists}


def options_blocks(question: AskUserQuestionItem, layout: Layout, inline: bool) -> list[Block]:
    """The full list above the widget (``inline``), or a line saying it is in the thread."""
    entries = _full_options(question, layout)
    if not entries:
        return []
    if not inline:
        return [context(":thread: The full text of the options is in the thread.")]
    every = len(entries) == len(question.options or [])
    return [_listed(entries, _numbered(question, layout), every)]


def options_thread(record: PendingRecord, layout: Layout) -> list[list[Block]]:
    """Thread messages listing the options' full texts (when the message has no room)."""
    messages: list[list[Block]] = []
    count = len(record.questions)
    for index, question in enumerate(record.questions):
        entries = _full_options(question, layout)
        numbered = _numbered(question, layout) if entries else False
        chunk: list[tuple[int, list[Piece]]] = []
        size = 0
        chunks: list[list[tuple[int, list[Piece]]]] = []
        for entry in entries:
            length = sum(len(piece["text"]) for piece in entry[1])
            if chunk and (size + length > THREAD_PART or len(chunk) >= MAX_OPTIONS):
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(entry)
            size += length
        if chunk:
            chunks.append(chunk)
        what = f"Options of question {index + 1}" if count > 1 else "Options"
        for n, part in enumerate(chunks, start=1):
            caption = f"{what}, in full ({n}/{len(chunks)})"
            messages.append([context(caption), _listed(part, numbered, False)])
    return messages
