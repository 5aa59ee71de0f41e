"""A question's options: their labels within Slack's limits, the widgets they are chosen
with, and the full texts of those a widget shortens (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Final

from adapters.slack.blockkit import (
    MAX_BUTTON_TEXT,
    MAX_CHECKBOX_OPTIONS,
    MAX_OPTION_DESCRIPTION,
    MAX_OPTION_GROUPS,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
    MAX_RADIO_OPTIONS,
)
from adapters.slack.model import ids
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.render.blocks.overflow import THREAD_PART
from adapters.slack.render.blocks.parts import WORD, clean_cut, context
from adapters.slack.render.layout import Layout
from adapters.slack.render.mrkdwn import ELLIPSIS, plain, reveal, shorten
from adapters.slack.render.rich import Block, Piece, bold, italic, rich_list, words
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from bot.questions.models import AskUserQuestionItem

MAX_CHOICE_OPTIONS: Final = min(MAX_CHECKBOX_OPTIONS, MAX_RADIO_OPTIONS)
"""At most this many options are radio buttons or checkboxes in a form; more, a menu."""


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
    owners: dict[str, set[str]] = {}
    for text, full in zip(texts, labels, strict=True):
        owners.setdefault(text, set()).add(full)
    if all(len(owners[texts[i]]) == 1 for i in cut):  # no shortened one reads like another
        return texts, True
    return [_numbered(i, text, limit) for i, text in enumerate(labels)], True


def _numbered(index: int, text: str, limit: int) -> str:
    """``text`` after its option's number, shortened (``_middle``) to fit ``limit``."""
    number = f"{index + 1}. "
    body = text if text.strip() else "(blank)"
    room = limit - len(number)
    return number + (body if len(body) <= room else _middle(body, room))


def _middle(text: str, limit: int) -> str:
    """``text`` as its beginning, ``…`` and its end (two fifths: where options usually
    differ), cut between words where one is near, never inside a character as shown."""
    if limit < 8:
        return shorten(text, limit)
    room = limit - 2  # the ellipsis and a space after it
    start = clean_cut(text, len(text) - room * 2 // 5, back=False)
    if not text[start - 1].isspace():
        space = text.find(" ", start, start + WORD)
        if space != -1:
            start = space + 1
    end = text[start:].lstrip()
    gap = " " if text[start - 1].isspace() else ""
    head = clean_cut(text, limit - len(ELLIPSIS) - len(gap) - len(end), back=True)
    if not text[head].isspace():
        space = text.rfind(" ", max(0, head - WORD), head)
        if space > 0:
            head = space
    return f"{text[:head].rstrip()}{ELLIPSIS}{gap}{end}"


def button_labels(question: AskUserQuestionItem) -> list[str]:
    """The text of each option's button: within Slack's limit, shortened ones never alike."""
    return option_labels(question.option_labels, MAX_BUTTON_TEXT)[0]


def choices(question: AskUserQuestionItem) -> list[Block]:
    """Each option as a menu, radio buttons or checkboxes show it (its index as its value)."""
    texts = option_labels(question.option_labels, MAX_OPTION_TEXT)[0]
    built = []
    for index, option in enumerate(question.options or []):
        choice: Block = {"text": plain(texts[index]), "value": ids.option_value(index)}
        if option.description:
            choice["description"] = plain(option.description, MAX_OPTION_DESCRIPTION)
        built.append(choice)
    return built


def menu(
    question: AskUserQuestionItem,
    kind: ids.ActionKind,
    multi: bool = False,
    options: list[Block] | None = None,
) -> Block:
    """A menu of the options (``multi``: of several; ``options``: their ``choices`` if built
    already), in groups of 100 when there are more."""
    options = choices(question) if options is None else options
    count = len(options)
    built: Block = {
        "type": "multi_static_select" if multi else "static_select",
        "action_id": ids.action_id(kind),
        "placeholder": plain("Choose options…" if multi else "Choose an option…"),
    }
    if count <= MAX_OPTIONS:
        return {**built, "options": options}
    if count > MAX_OPTION_GROUPS * MAX_OPTIONS:
        raise UserQuestionError(
            f"question {question.id} has {count} options; a Slack menu holds at most "
            f"{MAX_OPTION_GROUPS * MAX_OPTIONS} (100 groups of 100 options)",
            SLACK_LIMIT,
        )
    groups = []
    for start in range(0, count, MAX_OPTIONS):
        group = options[start : start + MAX_OPTIONS]
        title = plain(f"Options {start + 1}–{start + len(group)}")
        groups.append({"label": title, "options": group})
    return {**built, "option_groups": groups}


def button(
    text: str, action: str, value: str, style: str | None = None, confirm: Block | None = None
) -> Block:
    """A button of ``text`` (cut to fit already), ``action`` its id, ``value`` sent, ``confirm``."""
    built: Block = {
        "type": "button",
        "text": plain(text),
        "action_id": action,
        "value": value,
    }
    if style:
        built["style"] = style
    if confirm:
        built["confirm"] = confirm
    return built


def confirmation(title: str, text: str, yes: str, no: str) -> Block:
    """The dialog a button asks for before its click is sent."""
    return {"title": plain(title), "text": plain(text), "confirm": plain(yes), "deny": plain(no)}


def dismiss_button() -> Block:
    """Dismiss, behind a confirmation."""
    said = "The asker is told you chose not to answer."
    asked = confirmation("Dismiss this question?", said, "Dismiss", "Keep it")
    return button("Dismiss", ids.action_id("dismiss"), "0", confirm=asked)


def draft_widget(question: AskUserQuestionItem, draft: Draft) -> Block:
    """A form question's choice: radio buttons or checkboxes, a menu past ten options."""
    options = choices(question)
    chosen = [options[i] for i in draft.selected if 0 <= i < len(options)]
    multi = question.is_multi_select
    widget: Block
    if len(options) <= MAX_CHOICE_OPTIONS:
        kind = "checkboxes" if multi else "radio_buttons"
        widget = {"type": kind, "action_id": ids.action_id("draft"), "options": options}
    else:
        widget = menu(question, "draft", multi, options)
    if multi and chosen:
        widget["initial_options"] = chosen
    elif chosen:
        widget["initial_option"] = chosen[0]
    return widget


def _full_options(question: AskUserQuestionItem, layout: Layout) -> list[tuple[int, list[Piece]]]:
    """The index and the full-text line of each option that a widget shortens (on buttons:
    descriptions are not shown at all)."""
    options = question.options or []
    if layout in ("tap", "plan"):
        cut = [i for i, o in enumerate(options) if len(o.label) > MAX_BUTTON_TEXT or o.description]
    else:
        cut = [
            i
            for i, o in enumerate(options)
            if len(o.label) > MAX_OPTION_TEXT or len(o.description or "") > MAX_OPTION_DESCRIPTION
        ]
    entries = []
    for i in cut:
        line = [bold(options[i].label) if options[i].label.strip() else italic("(blank)")]
        if options[i].description:
            line.append(words(f" — {options[i].description}"))
        entries.append((i, line))
    return entries


def _numbers_shown(question: AskUserQuestionItem, layout: Layout) -> bool:
    """Whether the widget shows the options' numbers (``option_labels``: a label was cut)."""
    limit = MAX_BUTTON_TEXT if layout in ("tap", "plan") else MAX_OPTION_TEXT
    return option_labels(question.option_labels, limit)[1]


def _listed(entries: list[tuple[int, list[Piece]]], numbered: bool, ordered: bool) -> Block:
    """The lines as one list: numbered by their options' numbers when the widget shows them
    (one numbered list per run of consecutive options), else as ``ordered`` says."""
    if not numbered:
        lines = [line for _, line in entries]
        return {"type": "rich_text", "elements": [rich_list(lines, ordered=ordered)]}
    lists = []
    # Consecutive options: each one's index less its place in the list is the same.
    for _, run in groupby(enumerate(entries), lambda pair: pair[1][0] - pair[0]):
        found = [entry for _, entry in run]
        lists.append(rich_list([line for _, line in found], ordered=True, offset=found[0][0]))
    return {"type": "rich_text", "elements": lists}


def options_blocks(question: AskUserQuestionItem, layout: Layout, inline: bool) -> list[Block]:
    """The full list above the widget (``inline``), or a line saying it is in the thread."""
    entries = _full_options(question, layout)
    if not entries:
        return []
    if not inline:
        return [context(":thread: The full text of the options is in the thread.")]
    every = len(entries) == len(question.options or [])
    return [_listed(entries, _numbers_shown(question, layout), every)]


def options_thread(record: PendingRecord, layout: Layout) -> list[list[Block]]:
    """Thread messages listing the options' full texts (when the message has no room)."""
    messages: list[list[Block]] = []
    for index, question in enumerate(record.questions):
        chunks: list[list[tuple[int, list[Piece]]]] = []
        size = 0
        for entry in _full_options(question, layout):
            length = sum(len(piece["text"]) for piece in entry[1])
            if not chunks or size + length > THREAD_PART or len(chunks[-1]) >= MAX_OPTIONS:
                chunks.append([])
                size = 0
            chunks[-1].append(entry)
            size += length
        what = f"Options of question {index + 1}" if len(record.questions) > 1 else "Options"
        numbered = _numbers_shown(question, layout)  # once: it reads every label
        for n, part in enumerate(chunks, start=1):
            caption = f"{what}, in full ({n}/{len(chunks)})"
            messages.append([context(caption), _listed(part, numbered, False)])
    return messages
