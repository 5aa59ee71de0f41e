"""Slack ``rich_text`` blocks rendered as safe HTML for the sandbox page (pure, no I/O).

Rich text is typed, not parsed: a ``text`` element is shown literally (its ``*``, ``_``
and ``<!channel>`` included) with the styles its ``style`` names; mentions, links, emoji
and dates exist only as their own elements. Every character of text is HTML-escaped and
the only markup is built here.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["local_date", "rich_text_to_html"]

_SAFE_SCHEMES: Final = ("http://", "https://", "mailto:")
_STYLES: Final = (("code", "code"), ("strike", "s"), ("italic", "i"), ("bold", "b"))
_CODE_POINTS: Final = re.compile(r"[0-9a-fA-F]{1,6}(?:-[0-9a-fA-F]{1,6}){0,15}")
"""Slack's emoji ``unicode``: hex code points joined by ``-`` (``1f469-200d-1f4bb``)."""
_KEYCAP_BASES: Final = frozenset(map(ord, "#*0123456789"))
"""The only ASCII an emoji sequence holds: the base of a keycap (``0031-fe0f-20e3``)."""
_BIDI_CONTROLS: Final = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def _esc(text: object) -> str:
    return html.escape(text if isinstance(text, str) else "", quote=True)


def _styled(body: str, style: object) -> str:
    if not isinstance(style, Mapping):
        return body
    for name, tag in _STYLES:
        if style.get(name) is True:
            cls = ' class="sk-code"' if tag == "code" else ""
            body = f"<{tag}{cls}>{body}</{tag}>"
    return body


def local_date(seconds: int, format: str, shown: str) -> str:
    """A date the page shows in the reader's zone (``data-date``, ``data-format``)."""
    return (
        f'<time class="sk-date" data-date="{seconds}" data-format="{_esc(format)}">'
        f"{_esc(shown)}</time>"
    )


def _leaf(element: Mapping[str, Any], users: Callable[[str], str]) -> str:
    kind = element.get("type")
    if kind == "text":
        body = _esc(element.get("text")).replace("\n", "<br>")
    elif kind == "link":
        url = element.get("url") if isinstance(element.get("url"), str) else ""
        label = _esc(element.get("text") or url)
        if str(url).lower().startswith(_SAFE_SCHEMES):
            body = (
                f'<a class="sk-link" href="{_esc(url)}" target="_blank" '
                f'rel="noopener noreferrer">{label}</a>'
            )
        else:
            body = label
    elif kind == "user":
        user = str(element.get("user_id") or "")
        body = f'<span class="sk-mention" data-user-id="{_esc(user)}">@{_esc(users(user))}</span>'
    elif kind == "broadcast":
        body = f'<span class="sk-mention">@{_esc(element.get("range"))}</span>'
    elif kind == "emoji":
        body = _esc(_emoji(element.get("unicode")) or f":{element.get('name')}:")
    elif kind == "date":
        try:
            seconds = int(element["timestamp"])
            shown = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
        except (KeyError, TypeError, ValueError, OverflowError, OSError):
            body = f'<span class="sk-date">{_esc(str(element.get("fallback") or ""))}</span>'
        else:
            fmt = element.get("format")
            body = local_date(seconds, fmt if isinstance(fmt, str) else "", shown)
    else:
        body = _esc(element.get("text") or "")
    return _styled(body, element.get("style"))


def _emoji(unicode: object) -> str | None:
    """The characters of an emoji's ``unicode``; ``None`` unless it is emoji code points.

    Anything else (markup spelt in hex, controls, surrogates, a bidi override) is not an
    emoji: the page shows the ``:name:`` instead.
    """
    if not isinstance(unicode, str) or not _CODE_POINTS.fullmatch(unicode):
        return None
    points = [int(part, 16) for part in unicode.split("-")]
    for point in points:
        if point > 0x10FFFF or 0xD800 <= point <= 0xDFFF or point in _BIDI_CONTROLS:
            return None
        if point < 0xA0 and point not in _KEYCAP_BASES:
            return None
    return "".join(map(chr, points))


def _leaves(container: Mapping[str, Any], users: Callable[[str], str]) -> str:
    elements = container.get("elements")
    items = elements if isinstance(elements, list) else []
    return "".join(_leaf(e, users) for e in items if isinstance(e, Mapping))


def _container(element: Mapping[str, Any], users: Callable[[str], str]) -> str:
    kind = element.get("type")
    if kind == "rich_text_list":
        tag = "ol" if element.get("style") == "ordered" else "ul"
        offset = element.get("offset")
        start = f' start="{offset + 1}"' if isinstance(offset, int) and offset > 0 else ""
        items = element.get("elements")
        rows = [
            f"<li>{_leaves(item, users)}</li>"
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, Mapping)
        ]
        return f'<{tag} class="sk-list sk-rich-list"{start}>{"".join(rows)}</{tag}>'
    if kind == "rich_text_preformatted":
        return f'<pre class="sk-pre">{_leaves(element, users)}</pre>'
    if kind == "rich_text_quote":
        return f'<blockquote class="sk-quote">{_leaves(element, users)}</blockquote>'
    return f'<div class="sk-rich-section">{_leaves(element, users)}</div>'


def rich_text_to_html(block: Mapping[str, Any], users: Callable[[str], str] = str) -> str:
    """A ``rich_text`` block as HTML (``users`` maps a user id to the name shown)."""
    elements = block.get("elements")
    items = elements if isinstance(elements, list) else []
    return "".join(_container(e, users) for e in items if isinstance(e, Mapping))
