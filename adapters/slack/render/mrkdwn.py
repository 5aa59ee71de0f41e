"""Untrusted text made safe for Slack."""

from __future__ import annotations

import re
from typing import Any, Final

ELLIPSIS = "…"


_HIDING: Final = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u115f\u1160\u180e\u200b\u200c\u200e\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]|\u200d(?![\u2600-\u27bf\U0001f000-\U0001faff])"
)
"""Characters that hide text or turn its direction (Unicode's format characters, controls,
line separators, fillers; a zero-width joiner unless it joins an emoji)."""


def _marker(match: re.Match[str]) -> str:
    return f"\u27e8U+{ord(match[0]):04X}\u27e9"


def reveal(text: str) -> str:
    """``text`` with every hiding character shown as ``⟨U+202E⟩``: shown, never obeyed."""
    return _HIDING.sub(_marker, text)


def hidden_characters(*texts: str | None) -> list[str]:
    """The markers of the hiding characters in ``texts``, each once, in order met."""
    found = (_marker(m) for text in texts if text for m in _HIDING.finditer(text))
    return list(dict.fromkeys(found))


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` for mrkdwn or markdown; hiding characters revealed."""
    # Chained replace ("&" first): many times faster than str.translate on long text.
    return reveal(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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

_URL_CHAR: Final = r"[^\s()\[\]\\`<>\ue000\ue001]"
_KEEPABLE: Final = re.compile(rf"{_URL_CHAR}+(?:\({_URL_CHAR}*\){_URL_CHAR}*)*")
"""A URL that may stay a link showing itself: nothing in it can pair with syntax outside."""

_OPENING: Final = re.compile(rf"{_ESCAPED}|!?\[(?P<kept>{_KEEPABLE.pattern})\]\((?P=kept)\)|\]\(")
"""What could still close a link: a link that shows its own URL (kept), or any ``](``."""

_DEFINITION: Final = re.compile(
    r"^(?P<containers>(?:[ \t]*(?:>|[-+*]|\d{1,9}[.)]))*[ \t]*)"
    r"\[(?P<label>(?:[^\[\]\\]|\\[\s\S])+)\]:",
    re.MULTILINE,
)
"""A reference definition, after any quote or list markers (it defines for the whole text)."""

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


_OPEN_FENCE: Final = re.compile(r"(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)")
_CONTAINER: Final = re.compile(r" {0,3}(?:>|[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$))")
_AUTOLINK_LIKE: Final = re.compile(r"<[^\s<>]*[:@][^\s<>]*>")
"""Anything that could be an autolink (which would take a backtick from a code span)."""
_TICKS: Final = re.compile(r"`+")
_MASK_OPEN: Final = "\ue000"
_MASK_CLOSE: Final = "\ue001"
_MASKED: Final = re.compile(f"{_MASK_OPEN}(\\d+){_MASK_CLOSE}")
_MASK_ROUNDS: Final = 3
"""Rewritings of the masked text until it no longer changes; else nothing is masked."""


def _blank(line: str) -> bool:
    """CommonMark's blank line: spaces and tabs only (a no-break space is text)."""
    return not line.strip(" \t")


def _indent(line: str) -> int:
    expanded = line.expandtabs(4) if "\t" in line else line
    return len(expanded) - len(expanded.lstrip(" "))


def _fence_of(line: str, top: bool) -> str | None:
    """The fence (its run) when ``line`` surely opens a fenced code block (``top``: no list)."""
    match = _OPEN_FENCE.fullmatch(line)
    if match is None or (match["indent"] and not top):
        return None
    if match["fence"][0] == "`" and "`" in match["info"]:
        return None  # a backtick fence's info string never holds a backtick
    return match["fence"]


def _closes(line: str, fence: str) -> bool:
    stripped = line.rstrip(" \t")
    body = stripped.lstrip(" ")
    return (
        len(stripped) - len(body) <= 3 and len(body) >= len(fence) and body == fence[0] * len(body)
    )


def _block_lines(lines: list[str]) -> list[bool]:
    """Which ``lines`` surely belong to a code block (CommonMark)."""
    code = [False] * len(lines)
    top = True  # no list or block quote can be open
    after_paragraph = False  # an indented line would continue a paragraph
    fence: str | None = None
    indented = False
    for index, line in enumerate(lines):
        blank = _blank(line)
        if fence is not None:
            code[index] = True
            if _closes(line, fence):
                fence, after_paragraph = None, False
            continue
        if indented:
            if blank or _indent(line) >= 4:
                code[index] = True
                continue
            indented = False
        fence = _fence_of(line, top)
        if fence is not None:
            code[index], top = True, True  # a fence at the first column closes them all
            continue
        if top and not after_paragraph and not blank and _indent(line) >= 4:
            code[index] = indented = True
            continue
        if _CONTAINER.match(line):
            top = False
        elif not top and not blank and not after_paragraph and line[0] not in " \t":
            top = True  # after a blank line, an unindented line closes every container
        after_paragraph = not blank
    return code


def _code_spans(line: str) -> tuple[list[tuple[int, int]], bool] | None:
    """The code spans of one line read on its own (CommonMark's matching), and whether every
    run was read; ``None`` when the line could read otherwise (an autolink, a table cell)."""
    if _AUTOLINK_LIKE.search(line):
        return None
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(line)]
    by_length: dict[int, list[int]] = {}
    for number, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(number)
    seen: dict[int, int] = {}
    spans: list[tuple[int, int]] = []
    whole = True
    number, after = 0, 0  # the next run to read; where the last span ended
    while number < len(runs):
        start, end = runs[number]
        slashes = len(line[after:start]) - len(line[after:start].rstrip("\\"))
        if slashes % 2:
            start += 1  # an escaped backtick: the rest of the run may still open a span
        if start == end:
            number += 1
            continue
        closers = by_length.get(end - start, [])
        at = seen.get(end - start, 0)
        while at < len(closers) and closers[at] <= number:
            at += 1
        seen[end - start] = at
        if at == len(closers):
            whole = False  # a span could close on a later line
            number += 1
            continue
        closer = closers[at]
        if "|" in line[start : runs[closer][1]]:
            return None  # a table would split it at the pipe
        spans.append((start, runs[closer][1]))
        after = runs[closer][1]
        number = closer + 1
    return spans, whole


def _code_regions(text: str, *, spans: bool) -> list[tuple[int, int]]:
    """Where ``text`` is surely code: code blocks and, with ``spans``, code spans."""
    lines = text.split("\n")
    regions: list[tuple[int, int]] = []
    offset = 0
    run_start: int | None = None
    trusted = True  # every earlier line of this paragraph closed its spans
    for line, is_code in zip(lines, _block_lines(lines), strict=True):
        if is_code:
            run_start = offset if run_start is None else run_start
        else:
            if run_start is not None:
                regions.append((run_start, offset - 1))
                run_start = None
            if _blank(line):
                trusted = True
            elif spans and trusted:
                found = _code_spans(line)
                trusted = found is not None and found[1]
                spans_found = found[0] if found is not None else []
                regions.extend((offset + a, offset + b) for a, b in spans_found)
        offset += len(line) + 1
    if run_start is not None:
        regions.append((run_start, len(text)))
    return regions


def _masked(text: str, regions: list[tuple[int, int]]) -> tuple[str, list[str]]:
    pieces: list[str] = []
    kept: list[str] = []
    last = 0
    for start, end in regions:
        pieces.append(text[last:start])
        pieces.append(f"{_MASK_OPEN}{len(kept)}{_MASK_CLOSE}")
        kept.append(text[start:end])
        last = end
    pieces.append(text[last:])
    return "".join(pieces), kept


def _unmasked(text: str, kept: list[str]) -> str:
    """``text`` with its masked pieces back (the asker's own private-use ones left as they are)."""
    return _MASKED.sub(lambda match: kept[int(match[1])], text) if kept else text


def _rewritten(text: str, *, masking: bool) -> str:
    """One rewriting of ``text``: links, definitions, then what could still close a link."""
    masked, kept = _masked(text, _code_regions(text, spans=True) if masking else [])
    for _ in range(_READABLE_PASSES):  # a link inside a link's text: innermost first
        rewritten = _LINKS.sub(_visible, masked)
        if rewritten == masked:
            break
        masked = rewritten
    text = _unmasked(masked, kept)
    # A definition is read before any code span: only code blocks are kept from it.
    masked, kept = _masked(text, _code_regions(text, spans=False) if masking else [])
    text = _unmasked(_DEFINITION.sub(r"\g<containers>\g<label>:", masked), kept)
    masked, kept = _masked(text, _code_regions(text, spans=True) if masking else [])
    return _unmasked(_OPENING.sub(_unlinked, masked), kept)  # nothing after it makes a ``](``


def markdown_text(text: str) -> str:
    """Asker text for a ``markdown`` block: escaped, and no link shows one target while
    going to another (``[a](b)`` becomes ``a (b)``; images and reference links likewise)."""
    text = _LINE_ENDING.sub("\n", text)  # CommonMark's line endings, for ``^`` below
    if _MASK_OPEN not in text and _MASK_CLOSE not in text:
        current = text
        for _ in range(_MASK_ROUNDS):
            rewritten = _rewritten(current, masking=True)
            if rewritten == current:
                return escape(current)
            current = rewritten
    return escape(_rewritten(text, masking=False))


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
    text = reveal(text)
    return {"type": "plain_text", "text": shorten(text, limit) if limit else text, "emoji": True}
