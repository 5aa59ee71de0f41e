"""Untrusted text made safe for Slack.

Slack decodes only ``&amp;``, ``&lt;`` and ``&gt;``; escaping those three neutralises every
control sequence an asker could inject (``<!channel>``, ``<@U123>``, ``<https://evil|x>``).
Text objects that carry asker text are sent with ``verbatim: true`` so Slack does not
auto-link ``@here`` or ``#channel`` either.

``markdown`` blocks speak standard markdown, where ``[text](url)`` links without any angle
bracket: ``markdown_text`` rewrites every link whose text is not its URL as
``text (url)``, images as ``alt (url)``, and reference definitions as plain text, so what
a person reads is where a link goes; raw HTML is escaped, so it shows as text.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["escape", "markdown_text", "mrkdwn", "plain", "shorten", "shorten_escaped"]

ELLIPSIS = "…"


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` for a Slack mrkdwn or markdown field."""
    # Chained replace ("&" first): many times faster than str.translate on long text.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_LINK: Final = re.compile(
    r"(?P<bang>!?)\[(?P<text>(?:[^\[\]\\]|\\.)*)\]\(\s*"
    r"(?:<(?P<angled>[^<>\n]*)>|(?P<url>[^\s()]*(?:\([^\s()]*\)[^\s()]*)*))"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_DEFINITION: Final = re.compile(r"^( {0,3})\[((?:[^\[\]\\]|\\.)+)\]:", re.MULTILINE)
_MAX_NESTING: Final = 8


def _visible(match: re.Match[str]) -> str:
    url = match["angled"] if match["angled"] is not None else match["url"]
    text = match["text"]
    if not match["bang"] and text.strip() == url:
        return f"[{url}]({url})"  # shows exactly where it goes
    return f"{text} ({url})" if text.strip() else f"({url})"


def markdown_text(text: str) -> str:
    """Asker text for a ``markdown`` block: escaped, and no link shows one target while
    going to another (``[a](b)`` becomes ``a (b)``; images and reference links likewise)."""
    for _ in range(_MAX_NESTING):  # a link inside a link's text: innermost first
        rewritten = _LINK.sub(_visible, text)
        if rewritten == text:
            break
        text = rewritten
    text = _DEFINITION.sub(r"\1\2:", text)
    return escape(text)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    if limit < 1:
        return ""  # not even the ellipsis fits
    return text[: limit - 1] + ELLIPSIS


def shorten_escaped(text: str, limit: int) -> str:
    """``shorten`` for text that is already escaped: never leaves half an entity (``&am…``),
    which Slack would show as a stray, unescaped ``&``, nor half a ``<…>`` sequence."""
    short = shorten(text, limit)
    if short == text or not short:
        return short
    body = short[: -len(ELLIPSIS)]
    amp = body.rfind("&")
    if amp != -1 and ";" not in body[amp:]:
        body = body[:amp]
    # In escaped text a ``<`` only opens a control sequence of ours (a mention, a date, a
    # link): never leave one half open.
    opened = body.rfind("<")
    if opened != -1 and ">" not in body[opened:]:
        body = body[:opened]
    return body + ELLIPSIS


def mrkdwn(text: str) -> dict[str, Any]:
    """A verbatim ``mrkdwn`` text object; ``text`` must already be escaped where untrusted."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def plain(text: str, limit: int | None = None) -> dict[str, Any]:
    """A ``plain_text`` text object (never parsed for mentions), shortened to ``limit``."""
    return {"type": "plain_text", "text": shorten(text, limit) if limit else text, "emoji": True}
