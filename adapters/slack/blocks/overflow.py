"""Long details and plans: the part shown in the message, the rest in its thread (pure).

Each question's detail gets a share of ``DETAIL_BUDGET`` (escaped characters, as Slack
receives them) in the message; the rest follows in the thread as continuation messages of
``THREAD_PART`` characters, or, past ``MAX_THREAD_REPLIES`` of them, as one file per detail,
so a long text is readable in full and never silently cut.
"""

from __future__ import annotations

from typing import Final

from adapters.slack.blocks.parts import context, markdown
from adapters.slack.blocks.rendered import Attachment, Block
from adapters.slack.layout import layout_of
from adapters.slack.mrkdwn import escape, markdown_text
from adapters.slack.record import PendingRecord

__all__ = [
    "CONTINUED",
    "DETAIL_BUDGET",
    "MAX_THREAD_REPLIES",
    "THREAD_PART",
    "detail_blocks",
    "detail_shares",
    "split_text",
    "thread_parts",
]

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


def detail_shares(record: PendingRecord) -> list[str]:
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


def detail_blocks(shown: str, full: str) -> list[Block]:
    """The shown part of a detail, saying so when the rest is in the thread."""
    if not shown:
        return []
    text = markdown_text(shown)
    if len(shown) < len(full):
        text += CONTINUED
    return [markdown(text)]


def thread_parts(
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
            messages.append([context(caption), markdown(markdown_text(chunk))])
    return messages, []
