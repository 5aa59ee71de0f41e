"""Untrusted text made safe for Slack.

Slack decodes only ``&amp;``, ``&lt;`` and ``&gt;``; escaping those three neutralises every
control sequence an asker could inject (``<!channel>``, ``<@U123>``, ``<https://evil|x>``).
Text objects that carry asker text are sent with ``verbatim: true`` so Slack does not
auto-link ``@here`` or ``#channel`` either.
"""

from __future__ import annotations

from typing import Any

__all__ = ["escape", "mrkdwn", "plain", "shorten", "shorten_escaped"]

ELLIPSIS = "…"


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` for a Slack mrkdwn or markdown field."""
    # Chained replace ("&" first): many times faster than str.translate on long text.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    if limit < 1:
        return ""  # not even the ellipsis fits
    return text[: limit - 1] + ELLIPSIS


def shorten_escaped(text: str, limit: int) -> str:
    """``shorten`` for text that is already escaped: never leaves half an entity (``&am…``),
    which Slack would show as a stray, unescaped ``&``."""
    short = shorten(text, limit)
    if short == text or not short:
        return short
    body = short[: -len(ELLIPSIS)]
    amp = body.rfind("&")
    if amp != -1 and ";" not in body[amp:]:
        body = body[:amp]
    return body + ELLIPSIS


def mrkdwn(text: str) -> dict[str, Any]:
    """A verbatim ``mrkdwn`` text object; ``text`` must already be escaped where untrusted."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def plain(text: str, limit: int | None = None) -> dict[str, Any]:
    """A ``plain_text`` text object (never parsed for mentions), shortened to ``limit``."""
    return {"type": "plain_text", "text": shorten(text, limit) if limit else text, "emoji": True}
