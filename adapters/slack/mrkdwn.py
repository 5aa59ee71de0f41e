"""Untrusted text made safe for Slack.

Slack decodes only ``&amp;``, ``&lt;`` and ``&gt;``; escaping those three neutralises every
control sequence an asker could inject (``<!channel>``, ``<@U123>``, ``<https://evil|x>``).
Text objects that carry asker text are sent with ``verbatim: true`` so Slack does not
auto-link ``@here`` or ``#channel`` either.

``markdown`` blocks speak standard markdown, where ``[text](url)`` links without any angle
bracket: ``markdown_text`` rewrites every link whose text is not its URL as
``text (url)``, images as ``alt (url)``, and reference definitions as plain text (inside
block quotes and list items too: CommonMark applies those to the whole text), so what a
person reads is where a link goes; raw HTML is escaped, so it shows as text. Whatever the
rewriting leaves that could still close a link (a link nested deeper than the rewriting
goes, brackets inside a link's text) is broken apart: ``](`` becomes ``]（`` (a full-width
parenthesis: the text never grows, so it stays within what ``escape`` would take, which is
what the message budget counts).
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


_ESCAPED: Final = r"\\[\s\S]"
"""A backslash and the character it makes literal (never an opener or a closer)."""

_LINK: Final = re.compile(
    r"(?P<bang>!?)\[(?P<text>(?:[^\[\]\\]|\\[\s\S])*)\]\(\s*"
    r"(?:<(?P<angled>[^<>\n]*)>|(?P<url>[^\s()]*(?:\([^\s()]*\)[^\s()]*)*))"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_LINKS: Final = re.compile(rf"{_ESCAPED}|{_LINK.pattern}")
"""Links, innermost first; escaped characters are matched (and kept) so that ``\\[`` never
opens one."""

_KEEPABLE: Final = re.compile(r"[^\s()\[\]\\`<>]+(?:\([^\s()\[\]\\`<>]*\)[^\s()\[\]\\`<>]*)*")
"""A URL that may stay a link showing itself: nothing in it can pair with syntax outside
the link (a code span's backtick, an autolink's angle bracket, a bracket, an escape)."""

_OPENING: Final = re.compile(rf"{_ESCAPED}|!?\[(?P<kept>{_KEEPABLE.pattern})\]\((?P=kept)\)|\]\(")
"""What could still close a link: a link that shows its own URL (kept), or any ``](``."""

_DEFINITION: Final = re.compile(
    r"^(?P<containers>(?:[ \t]*(?:>|[-+*]|\d{1,9}[.)]))*[ \t]*)"
    r"\[(?P<label>(?:[^\[\]\\]|\\[\s\S])+)\]:",
    re.MULTILINE,
)
"""A reference definition, after any block quote and list markers and indentation (a
definition in a quote or a list item defines its label for the whole text)."""

_BROKEN: Final = "]\N{FULLWIDTH LEFT PARENTHESIS}"
"""What a ``](`` that could still close a link becomes: no longer, and read the same."""
_LINE_ENDING: Final = re.compile(r"\r\n?")
_READABLE_PASSES: Final = 8
"""Nesting levels rewritten readably; deeper links are broken apart (linear time)."""


def _visible(match: re.Match[str]) -> str:
    """A link as text that shows its target (a link to exactly what it shows stays one)."""
    if match["text"] is None:
        return match[0]  # an escaped character
    url = match["angled"] if match["angled"] is not None else match["url"]
    text = match["text"]
    if not match["bang"] and text.strip() == url and _KEEPABLE.fullmatch(url):
        return f"[{url}]({url})"  # shows exactly where it goes
    return f"{text} ({url})" if text.strip() else f"({url})"


def _unlinked(match: re.Match[str]) -> str:
    """A ``](`` that no rewriting reached, broken; a link that shows its own URL, kept."""
    if match["kept"] is None or match[0].startswith("!"):
        return match[0].replace("](", _BROKEN)  # no link text meets its target any more
    return match[0]


def markdown_text(text: str) -> str:
    """Asker text for a ``markdown`` block: escaped, and no link shows one target while
    going to another (``[a](b)`` becomes ``a (b)``; images and reference links likewise)."""
    text = _LINE_ENDING.sub("\n", text)  # CommonMark's line endings, for ``^`` below
    for _ in range(_READABLE_PASSES):  # a link inside a link's text: innermost first
        rewritten = _LINKS.sub(_visible, text)
        if rewritten == text:
            break
        text = rewritten
    text = _DEFINITION.sub(r"\g<containers>\g<label>:", text)
    text = _OPENING.sub(_unlinked, text)  # last: nothing after it makes a ``](``
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
