"""Slack text formatting rendered as safe HTML for the sandbox page (pure, no I/O).

Three kinds of text, as Slack shows them:

- ``mrkdwn`` (``mrkdwn_to_html``): ``*bold*``, ``_italic_``, ``~strike~``, `` `code` ``,
  fenced code blocks, ``>`` quotes, ``:emoji:`` codes, and the control sequences in angle
  brackets: links ``<https://x|label>``, user mentions ``<@U123>`` (shown as ``@name``),
  ``<#C123>``, ``<!here>``/``<!channel>``/``<!subteam^S1>`` and ``<!date^…|fallback>``.
- ``markdown`` blocks (``markdown_to_html``): headings, lists, quotes, rules, code fences,
  ``**bold**``, ``*italic*``, ``~~strike~~``, `` `code` `` and ``[label](url)`` links.
- ``plain_text`` (``plain_to_html``): literal text, with ``:emoji:`` codes when asked.

Slack decodes exactly three entities, ``&amp;``, ``&lt;`` and ``&gt;``; so does this module,
and then HTML-escapes every character of text it outputs. The only markup in the result is
the markup built here (``b``, ``i``, ``s``, ``code``, ``pre``, ``blockquote``, headings,
lists, ``br``, ``hr``, ``span`` and ``a`` with an ``http``/``https``/``mailto`` link), so
nothing a message contains can inject HTML or script into the page.
"""

from __future__ import annotations

import copy
import html
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.slack.sandbox.richblocks import local_date, rich_text_to_html

__all__ = [
    "EMOJI",
    "Names",
    "decode_entities",
    "markdown_to_html",
    "mrkdwn_to_html",
    "plain_to_html",
    "text_to_html",
    "with_html",
]

EMOJI: Final[Mapping[str, str]] = {
    "white_check_mark": "✅",
    "outbox_tray": "📤",
    "heavy_check_mark": "✔️",
    "x": "❌",
    "warning": "⚠️",
    "no_entry_sign": "🚫",
    "no_entry": "⛔",
    "black_square_for_stop": "⏹️",
    "hourglass": "⌛",
    "hourglass_flowing_sand": "⏳",
    "pencil2": "✏️",
    "pencil": "📝",
    "memo": "📝",
    "tada": "🎉",
    "rocket": "🚀",
    "eyes": "👀",
    "wave": "👋",
    "+1": "👍",
    "thumbsup": "👍",
    "-1": "👎",
    "thumbsdown": "👎",
    "robot_face": "🤖",
    "information_source": "ℹ️",
    "question": "❓",
    "exclamation": "❗",
    "bulb": "💡",
    "sparkles": "✨",
    "fire": "🔥",
    "lock": "🔒",
    "clipboard": "📋",
    "speech_balloon": "💬",
    "bell": "🔔",
    "smile": "😄",
    "slightly_smiling_face": "🙂",
    "thinking_face": "🤔",
    "heart": "❤️",
    "star": "⭐",
    "calendar": "📅",
    "link": "🔗",
    "gear": "⚙️",
    "package": "📦",
    "bug": "🐛",
    "construction": "🚧",
    "arrow_right": "➡️",
    "point_right": "👉",
    "stopwatch": "⏱️",
    "alarm_clock": "⏰",
    "rotating_light": "🚨",
    "fast_forward": "⏩",
    "raised_hand": "✋",
    "hand": "✋",
    "repeat": "🔁",
    "arrows_counterclockwise": "🔄",
    "thread": "🧵",
    "stop_sign": "🛑",
}
"""The ``:emoji:`` codes shown as characters; any other code stays as typed. Every code the
bot itself sends is here (``tests/slack/sandbox/test_sandbox_emoji.py`` scans the bot's
string literals)."""

_SAFE_SCHEMES: Final = ("http://", "https://", "mailto:")
_OPEN: Final = "\ue000"
_CLOSE: Final = "\ue001"
_TOKEN: Final = re.compile(f"{_OPEN}([0-9]+){_CLOSE}")
_ENTITY: Final = re.compile(r"&(amp|lt|gt);")
_ENTITIES: Final[Mapping[str, str]] = {"amp": "&", "lt": "<", "gt": ">"}
_EMOJI_CODE: Final = re.compile(r":([a-z0-9_+\-]{1,60}):")
_CONTROL: Final = re.compile(r"<([^<>\n]+)>")
_ZWSP: Final = "\u200b"
_CODE_SPAN: Final = re.compile(f"`(?!{_ZWSP})([^`\\n]+?)(?<!{_ZWSP})`")
_FENCE: Final = re.compile(r"```(.*?)```", re.DOTALL)
_QUOTE: Final = re.compile(r"^(?:&gt;|>) ?(.*)\Z")


def _mrkdwn_style(marker: str) -> re.Pattern[str]:
    """mrkdwn emphasis: the markers stand at word edges and hug the text (Slack's rule).

    A zero-width space counts as white space, so a marker with one on its inner side neither
    opens nor closes: ``outcomes.literal`` fences asker text's markers with them, on the
    assumption that Slack formats them neither way, whether it counts that space as a word
    character or as white space. (The text between two markers holds no third marker, so a
    line of many markers stays quick to render.)
    """
    m = re.escape(marker)
    hugs = f"[^\\s{_ZWSP}]"
    return re.compile(f"(?<![\\w{m}]){m}(?={hugs})([^{m}\\n]+?)(?<={hugs}){m}(?![\\w{m}])")


_MRKDWN_STYLES: Final = (
    (_mrkdwn_style("*"), "b"),
    (_mrkdwn_style("_"), "i"),
    (_mrkdwn_style("~"), "s"),
)
_MARKDOWN_STYLES: Final = (
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), "b"),
    (re.compile(r"(?<![\w_])__(?=\S)(.+?)(?<=\S)__(?![\w_])"), "b"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), "s"),
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), "i"),
    (re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"), "i"),
    (re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])"), "s"),
)
_MD_LINK: Final = re.compile(r"\[([^\]\n]+)\]\(([^()\s]+)\)")
_MD_FENCE: Final = re.compile(r"^\s*```")
_MD_HEADING: Final = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*\Z")
_MD_RULE: Final = re.compile(r"^\s*(?:-\s*){3,}\Z|^\s*(?:\*\s*){3,}\Z|^\s*(?:_\s*){3,}\Z")
_MD_BULLET: Final = re.compile(r"^(\s*)[-*+]\s+(.*)\Z")
_MD_NUMBERED: Final = re.compile(r"^(\s*)([0-9]{1,9})[.)]\s+(.*)\Z")


@dataclass(frozen=True, slots=True)
class Names:
    """Display names for the ids in mentions: users, channels and user groups (handles)."""

    users: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, str] = field(default_factory=dict)
    usergroups: Mapping[str, str] = field(default_factory=dict)


_NO_NAMES: Final = Names()


def decode_entities(text: str) -> str:
    """Slack's decoding: ``&amp;``, ``&lt;`` and ``&gt;``, and nothing else."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _scrub(text: str) -> str:
    """Remove the private-use characters this module uses as placeholders."""
    return text.replace(_OPEN, "\ufffd").replace(_CLOSE, "\ufffd")


def _emoji(escaped: str) -> str:
    return _EMOJI_CODE.sub(lambda m: EMOJI.get(m.group(1), m.group(0)), escaped)


class _Stash:
    """HTML pieces set aside behind placeholders while the text around them is formatted."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def put(self, piece: str) -> str:
        self.pieces.append(piece)
        return f"{_OPEN}{len(self.pieces) - 1}{_CLOSE}"

    def restore(self, text: str) -> str:
        return _TOKEN.sub(lambda m: self.pieces[int(m.group(1))], text)


def plain_to_html(text: str, *, emoji: bool = True) -> str:
    """A ``plain_text`` object's text: literal, escaped, line breaks kept, emoji if asked."""
    escaped = _esc(text)
    if emoji:
        escaped = _emoji(escaped)
    return escaped.replace("\n", "<br>")


def _link(url_raw: str, label_raw: str | None) -> str:
    url = decode_entities(url_raw).strip()
    label = decode_entities(label_raw) if label_raw else url.removeprefix("mailto:")
    if url.lower().startswith(_SAFE_SCHEMES):
        return (
            f'<a class="sk-link" href="{_esc(url)}" target="_blank" '
            f'rel="noopener noreferrer">{_esc(label)}</a>'
        )
    return _esc(label)


def _date(command: str, label: str | None) -> str:
    """``!date^<seconds>^<format>[^<link>]``: the fallback (else the time in UTC), which the
    page replaces with the time in the reader's own zone, as Slack's clients show it."""
    parts = command.split("^")
    fallback = decode_entities(label) if label else None
    try:
        seconds = int(parts[1])
        shown = fallback or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
    except (IndexError, ValueError, OverflowError, OSError):
        return f'<span class="sk-date">{_esc(fallback or decode_entities(command))}</span>'
    return local_date(seconds, decode_entities(parts[2]) if len(parts) > 2 else "", shown)


def _control(inner: str, names: Names) -> str:
    """One ``<…>`` control sequence of mrkdwn, as HTML."""
    command, bar, label_part = inner.partition("|")
    label = label_part if bar else None
    if command.startswith("@"):
        user_id = command[1:]
        name = names.users.get(user_id) or (decode_entities(label) if label else user_id)
        return (
            f'<span class="sk-mention" data-user-id="{_esc(user_id)}">'
            f"@{_esc(name.removeprefix('@'))}</span>"
        )
    if command.startswith("#"):
        channel_id = command[1:]
        name = names.channels.get(channel_id) or (decode_entities(label) if label else channel_id)
        return f'<span class="sk-mention">#{_esc(name.removeprefix("#"))}</span>'
    if command.startswith("!"):
        special = command[1:]
        if special.startswith("date^"):
            return _date(special, label)
        if special.startswith("subteam^"):
            group_id = special.split("^", 1)[1]
            handle = names.usergroups.get(group_id) or (
                decode_entities(label) if label else group_id
            )
            return f'<span class="sk-mention">@{_esc(handle.removeprefix("@"))}</span>'
        if special in ("here", "channel", "everyone"):
            return f'<span class="sk-mention">@{special}</span>'
        shown = decode_entities(label) if label else special
        return f'<span class="sk-mention">{_esc(shown)}</span>'
    return _link(command, label)


def _inline(
    raw: str,
    names: Names,
    styles: tuple[tuple[re.Pattern[str], str], ...],
    stash: _Stash,
    extra: Callable[[str], str] | None = None,
) -> str:
    """One line of text: code spans, controls (and ``extra`` rules), then emphasis."""
    text = _CODE_SPAN.sub(
        lambda m: stash.put(f'<code class="sk-code">{_esc(decode_entities(m.group(1)))}</code>'),
        raw,
    )
    if extra is not None:
        text = extra(text)
    text = _CONTROL.sub(lambda m: stash.put(_control(m.group(1), names)), text)
    text = _emoji(_esc(decode_entities(text)))
    for pattern, tag in styles:
        text = pattern.sub(rf"<{tag}>\1</{tag}>", text)
    return stash.restore(text)


def _pre(raw: str) -> str:
    body = raw.strip("\n")
    return f'<pre class="sk-pre">{_esc(decode_entities(body))}</pre>'


def mrkdwn_to_html(text: str, names: Names | None = None) -> str:
    """Slack ``mrkdwn`` as HTML; every character of the text itself is escaped."""
    names = names or _NO_NAMES
    text = _scrub(text)
    out: list[str] = []
    position = 0
    for fence in _FENCE.finditer(text):
        out.append(_mrkdwn_lines(text[position : fence.start()], names))
        out.append(_pre(fence.group(1)))
        position = fence.end()
    out.append(_mrkdwn_lines(text[position:], names))
    return "".join(out)


def _mrkdwn_lines(chunk: str, names: Names) -> str:
    if not chunk:
        return ""
    stash = _Stash()
    out: list[str] = []
    quote: list[str] = []
    previous_block = False

    def flush() -> None:
        nonlocal previous_block
        if quote:
            out.append(f'<blockquote class="sk-quote">{"<br>".join(quote)}</blockquote>')
            quote.clear()
            previous_block = True

    for line in chunk.split("\n"):
        quoted = _QUOTE.match(line)
        if quoted:
            quote.append(_inline(quoted.group(1), names, _MRKDWN_STYLES, stash))
            continue
        flush()
        if out and not previous_block:
            out.append("<br>")
        previous_block = False
        out.append(_inline(line, names, _MRKDWN_STYLES, stash))
    flush()
    return "".join(out)


def markdown_to_html(text: str, names: Names | None = None) -> str:
    """A ``markdown`` block as HTML: paragraphs, headings, lists, quotes, code, rules."""
    names = names or _NO_NAMES
    lines = _scrub(text).split("\n")
    stash = _Stash()

    def inline(raw: str) -> str:
        def links(part: str) -> str:
            return _MD_LINK.sub(lambda m: stash.put(_link(m.group(2), m.group(1))), part)

        return _inline(raw, names, _MARKDOWN_STYLES, stash, links)

    out: list[str] = []
    paragraph: list[str] = []
    quote: list[str] = []
    items: list[tuple[int, bool, int, str]] = []

    def flush() -> None:
        if paragraph:
            out.append(f"<p>{'<br>'.join(inline(p) for p in paragraph)}</p>")
            paragraph.clear()
        if quote:
            out.append(
                f'<blockquote class="sk-quote">{"<br>".join(inline(q) for q in quote)}</blockquote>'
            )
            quote.clear()
        if items:
            out.append(_lists(items))
            items.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if _MD_FENCE.match(line):
            flush()
            body: list[str] = []
            while index < len(lines) and not _MD_FENCE.match(lines[index]):
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end)
            out.append(_pre("\n".join(body)))
            continue
        if not line.strip():
            flush()
            continue
        heading = _MD_HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f'<h{level} class="sk-h">{inline(heading.group(2))}</h{level}>')
            continue
        if _MD_RULE.match(line):
            flush()
            out.append("<hr>")
            continue
        bullet = _MD_BULLET.match(line)
        numbered = None if bullet else _MD_NUMBERED.match(line)
        if bullet or numbered:
            if paragraph or quote:
                flush()
            if bullet:
                items.append((_indent(bullet.group(1)), False, 1, inline(bullet.group(2))))
            elif numbered:
                start = int(numbered.group(2))
                items.append((_indent(numbered.group(1)), True, start, inline(numbered.group(3))))
            continue
        quoted = _QUOTE.match(line.strip())
        if quoted:
            if paragraph or items:
                flush()
            quote.append(quoted.group(1))
            continue
        if quote or items:
            flush()
        paragraph.append(line.strip())
    flush()
    return "".join(out)


def _indent(spaces: str) -> int:
    return len(spaces.replace("\t", "    ")) // 2


def _lists(items: list[tuple[int, bool, int, str]]) -> str:
    """Nested ``ul``/``ol`` from (depth, ordered, start, html) items."""
    out: list[str] = []
    stack: list[tuple[int, str]] = []  # (depth, closing tag)
    for depth, ordered, start, body in items:
        depth = min(depth, (stack[-1][0] + 1) if stack else 0)
        while stack and stack[-1][0] > depth:
            out.append(f"</li>{stack.pop()[1]}")
        tag = "ol" if ordered else "ul"
        if stack and stack[-1][0] == depth and stack[-1][1] != f"</{tag}>":
            out.append(f"</li>{stack.pop()[1]}")
        if not stack or stack[-1][0] < depth:
            first = f' start="{start}"' if ordered and start != 1 else ""
            out.append(f'<{tag} class="sk-list"{first}><li>')
            stack.append((depth, f"</{tag}>"))
        else:
            out.append("</li><li>")
        out.append(body)
    while stack:
        out.append(f"</li>{stack.pop()[1]}")
    return "".join(out)


def text_to_html(obj: Mapping[str, Any], names: Names | None = None) -> str:
    """A text object (``plain_text`` or ``mrkdwn``) or a ``markdown`` block, as HTML."""
    text = obj.get("text")
    if not isinstance(text, str):
        return ""
    kind = obj.get("type")
    if kind == "plain_text":
        return plain_to_html(text, emoji=obj.get("emoji", True) is not False)
    if kind == "markdown":
        return markdown_to_html(text, names)
    return mrkdwn_to_html(text, names)


def with_html(value: Any, names: Names | None = None) -> Any:
    """A deep copy of blocks (or a view, a message) with ``html`` beside each text.

    Every ``plain_text``/``mrkdwn`` text object, every ``markdown`` block and every
    ``rich_text`` block gets an ``html`` key holding its safe rendering; everything else is
    copied unchanged.
    """
    copied = copy.deepcopy(value)
    _decorate(copied, names or _NO_NAMES)
    return copied


def _decorate(value: Any, names: Names) -> None:
    if isinstance(value, list):
        for item in value:
            _decorate(item, names)
        return
    if not isinstance(value, dict):
        return
    if value.get("type") in ("plain_text", "mrkdwn", "markdown") and isinstance(
        value.get("text"), str
    ):
        value["html"] = text_to_html(value, names)
    elif value.get("type") == "rich_text":
        value["html"] = rich_text_to_html(value, lambda user: names.users.get(user, user))
        return
    for key, item in value.items():
        if key != "html":
            _decorate(item, names)
