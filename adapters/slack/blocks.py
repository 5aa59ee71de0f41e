"""Pure rendering: a pending record -> Block Kit (the open message, its modal, its record).

Nothing here does I/O. Questions and answers are shown as typed, in ``rich_text`` (bold
by style, never by ``*…*`` that their own text could break; see ``rich``); every other
piece of asker-provided text goes through ``escape`` and into ``verbatim`` mrkdwn, a
``markdown`` block, or ``plain_text``. Labels are shortened for display only (the answer
maps back by index, never by shown text), and whatever is shortened on a widget is listed
in full above it. How a request is laid out is ``layout.layout_of``; how an ending is
worded is ``outcomes``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.slack import ids
from adapters.slack.blockkit import block_text_length, check_message
from adapters.slack.blockkit.limits import (
    MAX_BLOCKS_MESSAGE,
    MAX_BUTTON_TEXT,
    MAX_CHECKBOX_OPTIONS,
    MAX_HEADER_TEXT,
    MAX_INPUT_LABEL,
    MAX_INPUT_LENGTH,
    MAX_MODAL_CLOSE,
    MAX_MODAL_SUBMIT,
    MAX_MODAL_TITLE,
    MAX_OPTION_DESCRIPTION,
    MAX_OPTION_GROUPS,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
    MAX_RADIO_OPTIONS,
    MAX_SECTION_TEXT,
    MESSAGE_TEXT_BUDGET,
)
from adapters.slack.layout import MAX_TAP_OPTIONS, Layout, PlanReview, layout_of, plan_review_of
from adapters.slack.messages import NO_LONGER_OPEN
from adapters.slack.mrkdwn import escape, markdown_text, mrkdwn, plain, shorten, shorten_escaped
from adapters.slack.outcomes import ICONS, as_mrkdwn, outcome_of
from adapters.slack.record import Draft, PendingRecord
from adapters.slack.review_view import revision_blocks, tally_line, vote_lines
from adapters.slack.rich import Piece, bold, italic, rich_list, rich_text, words
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from bot.questions.models import AskUserQuestionAnswerItem, AskUserQuestionItem

__all__ = [
    "MAX_TAP_OPTIONS",
    "MAX_THREAD_REPLIES",
    "Attachment",
    "Layout",
    "PlanReview",
    "Rendered",
    "answer_by",
    "answer_summary",
    "layout_of",
    "plan_review_of",
    "render_final",
    "render_open",
    "render_skip_modal",
    "render_stale",
    "render_text_modal",
    "split_text",
]

Block = dict[str, Any]

# Slack's limits are in blockkit/limits.py; these are the renderer's own choices.
MAX_CHOICE_OPTIONS: Final = min(MAX_CHECKBOX_OPTIONS, MAX_RADIO_OPTIONS)
"""At most this many options are radio buttons or checkboxes in a form; more, a menu."""
MAX_FALLBACK_TEXT: Final = 3000
"""The notification text (top-level ``text``), well within Slack's recommended 4,000."""
MIN_ANSWER_TEXT: Final = 100
"""The shortest an answer line of a final message is cut to so that the message fits."""

DETAIL_BUDGET: Final = 9000
"""Characters of detail/plan shown in the message itself; the rest goes to the thread.

Slack caps markdown blocks at 12,000 characters per message and refuses messages whose
block text passes about 12,000 (``msg_blocks_too_long``); this leaves room for the rest.
"""
THREAD_PART: Final = 10_000
"""Characters per continuation message in the thread."""

MAX_THREAD_REPLIES: Final = 10
"""Continuation messages per request at most; a longer text goes to the thread as one file."""

CONTINUED: Final = "\n\n_… continued in the thread below._"


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


_ESCAPED_SIZE: Final = {"&": 5, "<": 4, ">": 4}
"""How long each character ``escape`` changes becomes (``&amp;``, ``&lt;``, ``&gt;``)."""


def _escaped_length(text: str) -> int:
    """``len(escape(text))`` without building the escaped text."""
    return len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))


def _escaped_fit(text: str, limit: int) -> int:
    """The length of the longest prefix of ``text`` whose escaped form fits in ``limit``."""
    low, high = 0, min(len(text), limit)  # escaping never shortens: the answer is <= limit
    while low < high:  # binary search: a few ``str.count`` calls instead of a Python loop
        middle = (low + high + 1) // 2
        if _escaped_length(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def split_text(text: str, limit: int, *, escaped: bool = False) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` characters, at paragraph, line or
    word boundaries where possible; ``"".join(parts) == text``.

    With ``escaped``, the limit applies to each part's ``escape()`` form (what Slack
    receives), which can be up to five times longer than the part itself.
    """
    least = max(_ESCAPED_SIZE.values()) if escaped else 1
    if limit < least:
        raise ValueError(f"a split limit must be at least {least}, not {limit}")
    parts: list[str] = []
    start = 0
    remaining = _escaped_length(text) if escaped else len(text)
    while remaining > limit:
        rest = text[start : start + 5 * limit]  # enough for any part: parts stay linear
        fit = _escaped_fit(rest, limit) if escaped else limit
        window = rest[:fit]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            found = window.rfind(separator)
            if found > fit // 2:
                cut = found + len(separator)
                break
        if cut <= 0:
            cut = fit
        part = rest[:cut]
        parts.append(part)
        start += cut
        remaining -= _escaped_length(part) if escaped else len(part)
    parts.append(text[start:])
    return parts


# ---------------------------------------------------------------------------------------
# Text pieces


def _label(text: str, limit: int) -> str:
    return shorten(text, limit) if text.strip() else "(blank)"


def _section(text: str) -> Block:
    return {"type": "section", "text": mrkdwn(shorten_escaped(text, MAX_SECTION_TEXT))}


def _markdown(text: str) -> Block:
    return {"type": "markdown", "text": text}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [mrkdwn(shorten_escaped(text, MAX_SECTION_TEXT))]}


def _question_block(question: AskUserQuestionItem, index: int, count: int) -> Block:
    """The question as typed, in bold that its own ``*``, ``_`` or ``~`` cannot break."""
    number = f"{index + 1}. " if count > 1 else ""
    if not question.question.strip():
        return rich_text(bold(number), italic("(no question text)"))
    return rich_text(bold(f"{number}{question.question}"), limit=MAX_SECTION_TEXT)


def _header_block(header: str) -> Block:
    """A question's short header (chip) as plain text."""
    return {"type": "context", "elements": [plain(header, MAX_SECTION_TEXT)]}


def _date(seconds: float) -> str:
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
    return f"<!date^{int(seconds)}^{{date_short_pretty}} at {{time}}|{fallback}>"


def answer_by(deadline: float) -> str:
    """``Answer by <date>`` in Slack's date formatting: each reader sees their own zone."""
    return f"Answer by {_date(deadline)}"


def _deadline(record: PendingRecord) -> list[Block]:
    if record.deadline is None:
        return []
    return [_context(f":alarm_clock: {answer_by(record.deadline)}")]


def _link(record: PendingRecord) -> list[Block]:
    """The asker's link as a button that opens it."""
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


def _byline(record: PendingRecord, *, mention: bool = True) -> list[Block]:
    elements: list[Block] = []
    if record.mention and mention:
        # validated by the configuration, never asker text
        elements.append(mrkdwn(record.mention))
    if record.label:
        elements.append(plain(f"Asked by {record.label}", MAX_SECTION_TEXT))
    return [{"type": "context", "elements": elements}] if elements else []


def _note(record: PendingRecord) -> list[Block]:
    return [_context(f":warning: {escape(record.note)}")] if record.note and record.is_open else []


def _detail_shares(record: PendingRecord) -> list[str]:
    """The part of each question's detail shown in the message itself.

    It depends on the details alone, so every rendering of a request (open, re-rendered,
    final) shows the same part and the thread, posted once, carries exactly the rest.
    ``DETAIL_BUDGET`` counts escaped characters, as Slack receives them.
    """
    details = [question.detail or "" for question in record.questions]
    total = sum(len(escape(detail)) for detail in details)
    if total <= DETAIL_BUDGET:
        return details
    share = DETAIL_BUDGET // max(1, sum(1 for detail in details if detail))
    return [
        split_text(detail, share, escaped=True)[0] if len(escape(detail)) > share else detail
        for detail in details
    ]


def _detail_blocks(shown: str, full: str) -> list[Block]:
    if not shown:
        return []
    text = markdown_text(shown)
    if len(shown) < len(full):
        text += CONTINUED
    return [_markdown(text)]


def _thread_parts(
    record: PendingRecord, shown: list[str]
) -> tuple[list[list[Block]], list[Attachment]]:
    """The rest of each detail: continuation messages, or one file when they would be many.

    At most ``MAX_THREAD_REPLIES`` continuation messages are posted; past that, every
    detail that does not fit in the message is uploaded whole, as one Markdown file each,
    so it is still readable in full and never silently cut.
    """
    rests = [(q.detail or "")[len(shown[i]) :] for i, q in enumerate(record.questions)]
    count = len(record.questions)
    what = "Plan" if layout_of(record.questions) == "plan" else "Detail"
    # At least this many parts (a cheap bound): far past the cap, nothing is split at all.
    least = sum(-(-_escaped_length(rest) // THREAD_PART) for rest in rests)
    chunked = (
        [split_text(rest, THREAD_PART, escaped=True) if rest else [] for rest in rests]
        if least <= MAX_THREAD_REPLIES
        else []
    )
    if least > MAX_THREAD_REPLIES or sum(len(chunks) for chunks in chunked) > MAX_THREAD_REPLIES:
        files = []
        for index, question in enumerate(record.questions):
            if not rests[index]:
                continue
            full = question.detail or ""
            title = f"{what} of question {index + 1}" if count > 1 else what
            name = f"{what.lower()}-{index + 1}.md" if count > 1 else f"{what.lower()}.md"
            size = f"{len(full.encode('utf-8')) / 1024:,.0f} KB"
            comment = f"{title} in full ({size}): too long for the message itself."
            files.append(Attachment(name, title, full, comment))
        return [], files
    messages: list[list[Block]] = []
    for index, chunks in enumerate(chunked):
        for n, chunk in enumerate(chunks, start=1):
            title = f"{what} of question {index + 1}" if count > 1 else what
            caption = f"{title}, continued ({n}/{len(chunks)})"
            messages.append([_context(caption), _markdown(markdown_text(chunk))])
    return messages, []


# ---------------------------------------------------------------------------------------
# Widgets


def _option(question: AskUserQuestionItem, index: int) -> Block:
    option = (question.options or [])[index]
    built: Block = {
        "text": plain(_label(option.label, MAX_OPTION_TEXT)),
        "value": ids.option_value(index),
    }
    if option.description:
        built["description"] = plain(shorten(option.description, MAX_OPTION_DESCRIPTION))
    return built


def _menu_options(question: AskUserQuestionItem) -> dict[str, Any]:
    count = len(question.options or [])
    if count <= MAX_OPTIONS:
        return {"options": [_option(question, i) for i in range(count)]}
    groups = []
    for start in range(0, count, MAX_OPTIONS):
        end = min(start + MAX_OPTIONS, count)
        groups.append(
            {
                "label": plain(f"Options {start + 1}–{end}"),
                "options": [_option(question, i) for i in range(start, end)],
            }
        )
    if len(groups) > MAX_OPTION_GROUPS:
        raise UserQuestionError(
            f"question {question.id} has {count} options; a Slack menu holds at most "
            f"{MAX_OPTION_GROUPS * MAX_OPTIONS} (100 groups of 100 options)",
            SLACK_LIMIT,
        )
    return {"option_groups": groups}


def _button(text: str, kind: ids.ActionKind, value: str, n: int | None = None) -> Block:
    return {
        "type": "button",
        "text": plain(_label(text, MAX_BUTTON_TEXT)),
        "action_id": ids.action_id(kind, n),
        "value": value,
    }


def _dismiss_button() -> Block:
    button = _button("Dismiss", "dismiss", "0")
    button["confirm"] = {
        "title": plain("Dismiss this question?"),
        "text": plain("The asker is told you chose not to answer."),
        "confirm": plain("Dismiss"),
        "deny": plain("Keep it"),
    }
    return button


def _draft_widget(question: AskUserQuestionItem, draft: Draft) -> Block:
    count = len(question.options or [])
    chosen = [i for i in draft.selected if 0 <= i < count]
    multi = question.is_multi_select
    widget: Block
    if count <= MAX_CHOICE_OPTIONS:
        widget = {
            "type": "checkboxes" if multi else "radio_buttons",
            "action_id": ids.action_id("draft"),
            "options": [_option(question, i) for i in range(count)],
        }
    else:
        widget = {
            "type": "multi_static_select" if multi else "static_select",
            "action_id": ids.action_id("draft"),
            "placeholder": plain("Choose options…" if multi else "Choose an option…"),
            **_menu_options(question),
        }
    if multi and chosen:
        widget["initial_options"] = [_option(question, i) for i in chosen]
    elif not multi and chosen:
        widget["initial_option"] = _option(question, chosen[0])
    return widget


# ---------------------------------------------------------------------------------------
# Messages


def _fallback(record: PendingRecord) -> str:
    first = record.questions[0].question.strip() if record.questions else ""
    first = first or "A question for you"  # Slack needs notification text
    more = f" (+{len(record.questions) - 1} more)" if len(record.questions) > 1 else ""
    who = f"{record.label}: " if record.label else ""
    return shorten_escaped(escape(f"{who}{first}{more}"), MAX_FALLBACK_TEXT)


def render_open(record: PendingRecord) -> Rendered:
    """The open question message (and continuation messages for long details).

    Raises ``UserQuestionError`` (``SLACK_LIMIT``) when the request cannot be shown within
    Block Kit's limits; whatever it returns passes ``blockkit.check_message``. Options'
    full texts are listed in the message when they fit, else in the thread.
    """
    problems: list[Any] = []
    for inline in (True, False):
        rendered = _render_open(record, inline_options=inline)
        problems = check_message(rendered.blocks, rendered.text)
        for part in rendered.thread:
            problems.extend(check_message(part))
        if not problems:
            return rendered
    raise UserQuestionError(
        f"this request cannot be shown within Slack's limits: {problems[0]}", SLACK_LIMIT
    )


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


def _options_blocks(question: AskUserQuestionItem, layout: Layout, inline: bool) -> list[Block]:
    lines = _full_options(question, layout)
    if not lines:
        return []
    if not inline:
        return [_context(":thread: The full text of the options is in the thread.")]
    return [rich_list(lines, ordered=len(lines) == len(question.options or []))]


def _options_thread(record: PendingRecord, layout: Layout) -> list[list[Block]]:
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
            messages.append([_context(caption), rich_list(part)])
    return messages


def _render_open(record: PendingRecord, *, inline_options: bool = True) -> Rendered:
    layout = layout_of(record.questions)
    rid, rev = record.id, record.version
    shown = _detail_shares(record)
    blocks: list[Block] = [*_byline(record), *_deadline(record)]
    count = len(record.questions)
    revision_thread: list[list[Block]] = []

    if layout == "plan":
        question = record.questions[0]
        review = plan_review_of(record.questions)
        assert review is not None
        options = question.options or []
        header = plain(question.header or "Plan review", MAX_HEADER_TEXT)
        blocks.append({"type": "header", "text": header})
        if record.revision is not None:
            revised, revision_thread = revision_blocks(record.revision, question.detail or "")
            blocks.extend(revised)
        blocks.append(_question_block(question, 0, 1))
        blocks.extend(_detail_blocks(shown[0], question.detail or ""))
        blocks.extend(_options_blocks(question, layout, inline_options))
        blocks.extend(_tally_blocks(record))
        approve = _button(
            options[review.approve].label, "pick", ids.option_value(review.approve), 0
        )
        approve["style"] = "primary"
        buttons = [approve]
        if review.decline is not None:
            decline_button = _button(
                options[review.decline].label, "pick", ids.option_value(review.decline), 1
            )
            decline_button["style"] = "danger"
            buttons.append(decline_button)
        buttons.append(_button("Decline with feedback…", "text", "0"))
        buttons.append(_dismiss_button())
        blocks.append(
            {"type": "actions", "block_id": ids.block_id(rid, 0, f"a{rev}"), "elements": buttons}
        )
    else:
        for index in range(count):
            blocks.extend(
                _question_blocks(record, layout, index, shown[index], count, inline_options)
            )
        if layout == "form":
            submit = _button("Submit", "submit", "0")
            submit["style"] = "primary"
            blocks.append(
                {
                    "type": "actions",
                    "block_id": ids.block_id(rid, None, f"s{rev}"),
                    "elements": [submit, _dismiss_button()],
                }
            )
            if count > 1:
                blocks.append(_context("A question left unanswered is sent as skipped."))
    blocks.extend(_note(record))
    blocks.extend(_link(record))
    if len(blocks) > MAX_BLOCKS_MESSAGE:
        raise UserQuestionError(
            f"this request needs {len(blocks)} blocks; a Slack message holds at most "
            f"{MAX_BLOCKS_MESSAGE} (ask fewer questions at once)",
            SLACK_LIMIT,
        )
    thread, files = _thread_parts(record, shown)
    thread.extend(revision_thread)
    if not inline_options:
        thread.extend(_options_thread(record, layout))
    return Rendered(_fallback(record), blocks, thread, files)


def _question_blocks(
    record: PendingRecord, layout: Layout, index: int, shown: str, count: int, inline: bool
) -> list[Block]:
    question = record.questions[index]
    rid, rev = record.id, record.version
    options = question.options or []
    blocks: list[Block] = []
    if question.header:
        blocks.append(_header_block(question.header))
    blocks.append(_question_block(question, index, count))
    blocks.extend(_detail_blocks(shown, question.detail or ""))
    blocks.extend(_options_blocks(question, layout, inline))
    elements: list[Block] = []
    if layout == "tap":
        elements = [
            _button(option.label, "pick", ids.option_value(i), i)
            for i, option in enumerate(options)
        ]
        elements.append(_button("Other…", "text", str(index)))
        elements.append(_dismiss_button())
    elif layout == "menu":
        menu = {
            "type": "static_select",
            "action_id": ids.action_id("pick"),
            "placeholder": plain("Choose an option…"),
            **_menu_options(question),
        }
        elements = [menu, _button("Other…", "text", str(index)), _dismiss_button()]
    elif layout == "text":
        answer = _button("Answer…", "text", str(index))
        answer["style"] = "primary"
        elements = [answer, _dismiss_button()]
    else:
        draft = record.draft(index)
        if options:
            elements.append(_draft_widget(question, draft))
            elements.append(_button("Other…", "text", str(index)))
        else:
            elements.append(_button("Answer…", "text", str(index)))
        if draft.custom:
            blocks.append(_context(f":pencil2: {escape(shorten(draft.custom, 2000))}"))
    blocks.append(
        {"type": "actions", "block_id": ids.block_id(rid, index, f"c{rev}"), "elements": elements}
    )
    return blocks


def answer_summary(question: AskUserQuestionItem, item: AskUserQuestionAnswerItem | None) -> str:
    """One answer as escaped mrkdwn: the chosen labels and the free text, or *skipped*."""
    if item is None:
        return "_no answer_"
    pieces = [escape(label) for label in item.selected]
    if item.custom is not None and item.custom != "":
        pieces.append(f"“{escape(item.custom)}”")
    return ", ".join(pieces) if pieces else "_skipped_"


def _answer_pieces(item: AskUserQuestionAnswerItem | None) -> list[Piece]:
    """One answer as typed: the chosen labels and the free text, or *skipped*."""
    if item is None:
        return [italic("no answer")]
    chosen = ", ".join(item.selected)
    pieces = [words(chosen)] if chosen else []
    if item.custom is not None and item.custom != "":
        pieces.append(words(f"{', ' if chosen else ''}“{item.custom}”"))
    return pieces or [italic("skipped")]


def _outcome_line(record: PendingRecord, limit: int = MAX_SECTION_TEXT) -> str:
    """The outcome in words, then when, then the note, within ``limit`` characters.

    The words and the note are shortened, never the date: a date token cut in half
    (``<!date^…``) would reach Slack as a broken control sequence.
    """
    outcome = outcome_of(record)
    if outcome is None:
        return escape(record.state)
    words = f"{ICONS.get(outcome.verb, '')} {as_mrkdwn(outcome)}".strip()
    when = f" · {_date(record.finished_at)}" if record.finished_at else ""
    note = ""
    if record.note and record.state in ("answered", "cancelled"):
        note = shorten_escaped(f"\n{escape(record.note)}", max(0, (limit - len(when)) // 3))
    return shorten_escaped(words, max(1, limit - len(when) - len(note))) + when + note


def render_final(record: PendingRecord) -> Rendered:
    """The message as a record of its outcome: who answered what, and when; no buttons."""
    limit = MAX_SECTION_TEXT
    while True:
        rendered = _render_final(record, limit)
        over = block_text_length(rendered.blocks) - MESSAGE_TEXT_BUDGET
        answers = len(record.questions) if record.state == "answered" else 0
        if over <= 0 or answers == 0 or limit == MIN_ANSWER_TEXT:
            return rendered
        # Slack refuses an update over its text cap, which would leave the buttons up:
        # shorten the answer lines until the record of the outcome fits.
        limit = max(MIN_ANSWER_TEXT, limit - over // answers - 1)


def _render_final(record: PendingRecord, answer_limit: int) -> Rendered:
    shown = _detail_shares(record)
    count = len(record.questions)
    blocks: list[Block] = [*_byline(record, mention=False)]
    plan = layout_of(record.questions) == "plan"
    if plan:
        header = record.questions[0].header or "Plan review"
        blocks.append({"type": "header", "text": plain(header, MAX_HEADER_TEXT)})
    items = dict(enumerate(record.answer.answers)) if record.answer is not None else {}
    for index, question in enumerate(record.questions):
        if question.header and not plan:
            blocks.append(_header_block(question.header))
        blocks.append(_question_block(question, index, count))
        blocks.extend(_detail_blocks(shown[index], question.detail or ""))
        if record.state == "answered" and not plan:
            answer = _answer_pieces(items.get(index))
            if "style" in answer[0]:
                answer.insert(0, words("→ "))
            else:  # one run of text where it can be ("→ Deploy")
                answer[0] = words(f"→ {answer[0]['text']}")
            blocks.append(rich_text(*answer, limit=answer_limit))
    if plan:
        blocks.extend(_tally_blocks(record))
    outcome_limit = answer_limit if plan else MAX_SECTION_TEXT
    blocks.append(_context(_outcome_line(record, outcome_limit)))
    outcome = outcome_of(record)
    # The notification says what the body says ("Declined by @bob — «…»", "Answered in
    # another client"), without a sentence's full stop before the question.
    said = as_mrkdwn(outcome).rstrip(".") if outcome is not None else escape(record.state)
    text = shorten_escaped(f"{said}: {_fallback(record)}", MAX_FALLBACK_TEXT)
    return Rendered(text, blocks[:MAX_BLOCKS_MESSAGE])


def _tally_blocks(record: PendingRecord) -> list[Block]:
    """A team review's live tally and every vote (nothing without a policy)."""
    if record.review is None:
        return []
    lines = [tally_line(record.review, record.votes), *vote_lines(record.votes)]
    return [_section("\n".join(lines))]


def render_stale(text: str = NO_LONGER_OPEN) -> Rendered:
    """What a message of an unknown (expired) request is turned into."""
    return Rendered(text, [_context(f":hourglass: {text}")])


MODAL_DETAIL: Final = 1500
"""Characters of a question's detail shown in its modal (the message has all of it)."""


def render_skip_modal(record: PendingRecord) -> Block:
    """The confirmation an empty Submit asks for: "Submit with nothing selected?"."""
    what = "questions were" if len(record.questions) > 1 else "question was"
    return {
        "type": "modal",
        "callback_id": ids.callback_id("skip"),
        "private_metadata": ids.private_metadata(record.id, 0),
        "title": plain("Nothing selected", MAX_MODAL_TITLE),
        "submit": plain("Submit empty", MAX_MODAL_TITLE),
        "close": plain("Go back", MAX_MODAL_TITLE),
        "blocks": [
            {"type": "section", "text": plain("Submit with nothing selected?")},
            {"type": "section", "text": plain(f"The asker is told the {what} skipped.")},
        ],
    }


def render_text_modal(record: PendingRecord, index: int, user: str | None = None) -> Block:
    """The modal that collects free text for question ``index`` (Other…, Answer…, feedback).

    It shows the question once, with the beginning of its detail as plain text, and
    ``user``'s own draft text, if any.
    """
    question = record.questions[index]
    layout = layout_of(record.questions)
    feedback = layout == "plan"
    label = "What should change?" if feedback else "Your answer"
    title = "Plan feedback" if feedback else "Your answer"
    submit = "Decline" if feedback else "Send"
    element: Block = {
        "type": "plain_text_input",
        "action_id": ids.action_id("text"),
        "multiline": True,
        "max_length": MAX_INPUT_LENGTH,
    }
    current = record.draft_of(user, index).custom or record.draft(index).custom
    if current:
        element["initial_value"] = current[:MAX_INPUT_LENGTH]
    blocks: list[Block] = [_question_block(question, 0, 1)]
    detail = (question.detail or "").strip()
    if detail:
        if len(detail) > MODAL_DETAIL:
            detail = shorten(detail, MODAL_DETAIL) + "\n(See the message for the rest.)"
        blocks.append({"type": "section", "text": plain(detail)})
    blocks.append(
        {
            "type": "input",
            "block_id": ids.block_id(record.id, index, "in"),
            "label": plain(_label(label, MAX_INPUT_LABEL)),
            "element": element,
        }
    )
    return {
        "type": "modal",
        "callback_id": ids.callback_id("text"),
        "private_metadata": ids.private_metadata(record.id, index),
        "title": plain(title, MAX_MODAL_TITLE),
        "submit": plain(submit, MAX_MODAL_SUBMIT),
        "close": plain("Cancel", MAX_MODAL_CLOSE),
        "blocks": blocks,
    }
