"""Long details and plans: the part shown in the message, the rest in its thread (pure)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from adapters.slack.blockkit import MAX_SECTION_TEXT, MESSAGE_TEXT_BUDGET, block_text_length
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks import parts
from adapters.slack.render.layout import Layout, layout_of
from adapters.slack.render.mrkdwn import markdown_text
from adapters.slack.render.review_view import plan_diff
from adapters.slack.render.rich import Block

DETAIL_BUDGET: Final = 9000
"""Most characters of detail shown in the message: under Slack's undocumented count."""
_MIN_SHOWN: Final = 100
"""The shortest an answer line, label, note or draft's text is cut to (room always kept)."""
_MIN_OUTCOME: Final = 300
"""The shortest the outcome line and a review's tally are cut to (``outcome_limit``)."""
_OUTCOME_LEAST: Final = 150
"""With no room at all: still the outcome's words, who and the date, never dropped."""
_PIECE_WORDS: Final = 20
"""Room kept for the words around each of those parts (``Asked by``, ``:warning:``, ...)."""
THREAD_PART: Final = 10_000
"""Characters per continuation message in the thread."""

MAX_THREAD_REPLIES: Final = 10
"""Continuation messages per request at most; a longer text goes to the thread as one file."""

CONTINUED: Final = re.compile(r"\n\n_… [^\n]* (?:is|are) in the thread below\._\Z")
"""The line ending a detail's shown part that says how much of it is in the thread."""
_CONTINUED_ROOM: Final = 100
"""The most that line takes (``continued``), kept when the message is sized."""
_STEP: Final = re.compile(r"^ {0,3}(\d{1,6})[.)] ", re.MULTILINE)
IN_THREAD: Final = "_In full in the thread below._"
"""What the message shows of a detail when the rest of the message leaves it no room."""

_ENTITY: Final = 5
"""The longest a character ``escape`` changes becomes (``&amp;``; ``&lt;``, ``&gt;``: 4)."""


def _escaped_length(text: str) -> int:
    """``len(escape(text))`` without building the escaped text."""
    return len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))


def split_text(text: str, limit: int, *, escaped: bool = False) -> list[str]:
    """``text`` in parts of at most ``limit``, cut between paragraphs, lines or words."""
    least = _ENTITY if escaped else 1
    if limit < least:
        raise ValueError(f"a split limit must be at least {least}, not {limit}")
    pieces: list[str] = []
    start = 0
    remaining = _escaped_length(text) if escaped else len(text)
    while remaining > limit:
        rest = text[start : start + 5 * limit]  # enough for any part: parts stay linear
        cut = _first_cut(rest, limit, escaped=escaped)
        part = rest[:cut]
        pieces.append(part)
        start += cut
        remaining -= _escaped_length(part) if escaped else len(part)
    pieces.append(text[start:])
    return pieces


def _first_cut(rest: str, limit: int, *, escaped: bool) -> int:
    """Where the first part of ``rest`` ends: a boundary in its second half, else ``limit``."""
    fit = limit  # escaping never shortens: the longest prefix that fits is within ``limit``
    if escaped:
        fit = parts.largest(0, min(len(rest), limit), lambda n: _escaped_length(rest[:n]) <= limit)
    window = rest[:fit]
    for separator in ("\n\n", "\n", " "):
        found = window.rfind(separator)
        if found > fit // 2:
            return found + len(separator)
    return fit


def _fair_shares(sizes: list[int], budget: int) -> list[int]:
    """``budget`` split between texts of ``sizes``: short ones whole, longer ones equally."""
    shares = [0] * len(sizes)
    left = budget
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for taken, index in enumerate(order):
        shares[index] = min(sizes[index], left // (len(sizes) - taken))
        left -= shares[index]
    return shares


def detail_shares(record: PendingRecord, budget: int = DETAIL_BUDGET) -> list[str]:
    """The part of each detail the message shows, in ``budget`` escaped characters in all."""
    details = [question.detail or "" for question in record.questions]
    sizes = [_escaped_length(detail) for detail in details]
    budget = min(budget, DETAIL_BUDGET)
    if sum(sizes) <= budget:
        return details
    shares = _fair_shares(sizes, max(0, budget))
    return [
        detail if size <= share else _first_part(detail, share)
        for detail, size, share in zip(details, sizes, shares, strict=True)
    ]


def _first_part(text: str, limit: int) -> str:
    """The first part ``split_text(text, limit, escaped=True)`` would give, alone."""
    if limit < _ENTITY:
        return ""
    return text[: _first_cut(text[: 5 * limit], limit, escaped=True)]


_FENCE_LINE: Final = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_INFO_ROOM: Final = 100
"""The most of a code fence's info string ("bash", "python title=…") a part reopens it with."""


def open_fence(text: str) -> tuple[str, str] | None:
    """The code fence ``text`` ends inside of, as its run (```` ``` ````, ``~~~~``) and info
    string, as CommonMark reads fences outside lists and quotes; ``None`` outside any."""
    fence: tuple[str, str] | None = None
    for line in text.split("\n"):
        found = _FENCE_LINE.fullmatch(line)
        if found is None:
            continue
        run, info = found.group(1), found.group(2)
        if fence is None:
            if not (run[0] == "`" and "`" in info):  # a backtick in the info: no fence
                fence = (run, info.strip())
        elif run[0] == fence[0][0] and len(run) >= len(fence[0]) and not info.strip():
            fence = None
    return fence


def reopened(before: str, part: str) -> str:
    """``part`` of a text after ``before``, drawn on its own: a code fence open where it starts
    opened again, one open where it ends closed (a cut never turns code into prose)."""
    opening = open_fence(before)
    drawn = part
    if opening is not None:
        drawn = f"{opening[0]}{opening[1][:_INFO_ROOM]}\n{part}"
    closing = open_fence(before + part)
    if closing is not None:
        drawn += ("" if drawn.endswith("\n") else "\n") + closing[0]
    return drawn


def detail_blocks(shown: str, full: str) -> list[Block]:
    """The shown part of a detail, saying so when the rest is in the thread."""
    if not full:
        return []
    if not shown:
        return [parts.markdown(IN_THREAD)]
    if len(shown) < len(full):
        return [parts.markdown(markdown_text(reopened("", shown)) + continued(full[len(shown) :]))]
    return [parts.markdown(markdown_text(shown))]


def continued(rest: str) -> str:
    """The line saying which steps and how many characters are not on screen (``CONTINUED``)."""
    steps = [found.group(1) for found in _STEP.finditer(rest)]
    much = f"{len(rest):,} more character{'' if len(rest) == 1 else 's'}"
    if len(steps) > 1:
        much = f"steps {steps[0]}–{steps[-1]} and {much}"
    elif steps:
        much = f"step {steps[0]} and {much}"
    verb = "is" if much.startswith("1 more character") else "are"
    return f"\n\n_… {much} {verb} in the thread below._"


def shares_within(record: PendingRecord, room: int) -> list[str]:
    """The parts of the details whose blocks (and "continued" lines) take at most ``room``."""
    fulls = [question.detail or "" for question in record.questions]
    budget = room - _CONTINUED_ROOM * sum(1 for full in fulls if full)
    for _ in range(3):  # escaping counts already: a rewritten link may still differ a bit
        shown = detail_shares(record, budget)
        pairs = zip(shown, fulls, strict=True)
        used = block_text_length([block for p, full in pairs for block in detail_blocks(p, full)])
        if used <= room:
            return shown
        budget -= used - room
    return [""] * len(fulls)


def kept_room(record: PendingRecord, layout: Layout, chosen: int) -> int:
    """Room the details leave for the parts that change after the post, at their shortest."""
    piece = _MIN_SHOWN + _PIECE_WORDS
    tally = _MIN_OUTCOME + _PIECE_WORDS if record.review is not None else 0
    opened = 2 * piece + tally
    if layout == "form":
        opened += piece * len(record.questions) + chosen
    answers = 0 if layout == "plan" else piece * len(record.questions)
    final = piece + tally + answers + _MIN_OUTCOME + _PIECE_WORDS
    return max(opened, final)


def fitted(render: Callable[[int], list[Block]], first: list[Block] | None = None) -> list[Block]:
    """``render(limit)`` with the largest ``limit`` that keeps within ``MESSAGE_TEXT_BUDGET``."""
    blocks = render(MAX_SECTION_TEXT) if first is None else first
    if block_text_length(blocks) <= MESSAGE_TEXT_BUDGET:
        return blocks
    least = render(1)
    if block_text_length(least) > MESSAGE_TEXT_BUDGET:
        return least  # the parts that never change are over on their own
    limit = parts.largest(  # shorter limits never render longer
        1, MAX_SECTION_TEXT - 1, lambda n: block_text_length(render(n)) <= MESSAGE_TEXT_BUDGET
    )
    return render(limit)


def outcome_limit(limit: int) -> int:
    """How long the outcome line and a tally may be: three times ``limit``, up to a section."""
    return min(MAX_SECTION_TEXT, max(_OUTCOME_LEAST, limit * _MIN_OUTCOME // _MIN_SHOWN))


def diff_file(previous_plan: str, plan: str) -> parts.Attachment:
    """A revision's whole diff as one file: its replies would pass ``MAX_THREAD_REPLIES``."""
    text = "\n".join(plan_diff(previous_plan, plan).lines)
    title = "What changed in the plan"
    comment = f"{title}, in full ({parts.size_of(text)}): too long for thread replies."
    return parts.Attachment("plan-changes.diff", title, text, comment)


def thread_parts(
    record: PendingRecord, shown: list[str]
) -> tuple[list[list[Block]], list[parts.Attachment]]:
    """The rest of each detail: continuation messages, or one file when they would be many."""
    rests = [(q.detail or "")[len(shown[i]) :] for i, q in enumerate(record.questions)]
    what = "Plan" if layout_of(record.questions) == "plan" else "Detail"
    several = len(record.questions) > 1
    titles = [f"{what} of question {i + 1}" if several else what for i in range(len(rests))]
    # At least this many parts (a cheap bound): far past the cap, nothing is split at all.
    least = sum(-(-_escaped_length(rest) // THREAD_PART) for rest in rests)
    chunked = [
        split_text(rest, THREAD_PART, escaped=True) if rest and least <= MAX_THREAD_REPLIES else []
        for rest in rests
    ]
    if least > MAX_THREAD_REPLIES or sum(map(len, chunked)) > MAX_THREAD_REPLIES:
        files = []
        for index, question in enumerate(record.questions):
            if rests[index]:
                full = question.detail or ""
                name = f"{what.lower()}-{index + 1}.md" if several else f"{what.lower()}.md"
                size = parts.size_of(full)
                said = f"{titles[index]} in full ({size}): too long for the message itself."
                files.append(parts.Attachment(name, titles[index], full, said))
        return [], files
    messages: list[list[Block]] = []
    for index, chunks in enumerate(chunked):
        before = shown[index]
        for n, chunk in enumerate(chunks, start=1):
            caption = f"{titles[index]}, continued ({n}/{len(chunks)})"
            messages.append(
                [parts.context(caption), parts.markdown(markdown_text(reopened(before, chunk)))]
            )
            before += chunk
    return messages, []
