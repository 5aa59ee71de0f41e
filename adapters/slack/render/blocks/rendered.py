"""What rendering returns: a message to post (``Rendered``), the files for its thread, and
the notification text every message of a request carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.mrkdwn import escape, shorten_escaped

__all__ = ["MAX_FALLBACK_TEXT", "Attachment", "Block", "Rendered", "fallback"]

Block = dict[str, Any]

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


def fallback(record: PendingRecord) -> str:
    """The notification text: who asks, the first question, and how many more."""
    first = record.questions[0].question.strip() if record.questions else ""
    first = first or "A question for you"  # Slack needs notification text
    more = f" (+{len(record.questions) - 1} more)" if len(record.questions) > 1 else ""
    who = f"{record.label}: " if record.label else ""
    return shorten_escaped(escape(f"{who}{first}{more}"), MAX_FALLBACK_TEXT)
