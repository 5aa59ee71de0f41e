"""mrkdwn.py: untrusted text made inert for Slack (slack-platform.md §3.3)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.slack.render.mrkdwn import (
    ELLIPSIS,
    escape,
    mrkdwn,
    plain,
    reveal,
    shorten,
    shorten_escaped,
)

_ENTITY = re.compile(r"&(amp|lt|gt);")


def unescape(text: str) -> str:
    """Slack's decoding: exactly the three entities ``escape`` produces."""
    return _ENTITY.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], text)


def test_escape_replaces_the_three_control_characters() -> None:
    assert escape("a & b < c > d") == "a &amp; b &lt; c &gt; d"
    assert escape("&&") == "&amp;&amp;"
    assert escape("&amp;") == "&amp;amp;"  # already-escaped text is text too


@pytest.mark.parametrize(
    ("attack", "escaped"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<!here>", "&lt;!here&gt;"),
        ("<!everyone>", "&lt;!everyone&gt;"),
        ("<@U123>", "&lt;@U123&gt;"),
        ("<!subteam^S123>", "&lt;!subteam^S123&gt;"),
        ("<#C123>", "&lt;#C123&gt;"),
        ("<https://evil|x>", "&lt;https://evil|x&gt;"),
        ("<mailto:a@b.c|boss>", "&lt;mailto:a@b.c|boss&gt;"),
        ("<!date^1392734382^{date}|fallback>", "&lt;!date^1392734382^{date}|fallback&gt;"),
    ],
)
def test_special_syntax_becomes_literal(attack: str, escaped: str) -> None:
    assert escape(attack) == escaped
    assert "<" not in escape(attack) and ">" not in escape(attack)


def test_escape_leaves_everything_else_alone() -> None:
    text = "*bold* _it_ ~s~ `code` ```block``` > not a quote? @here #general \"q\" 'a' é 🎉 \n\t"
    expected = text.replace(">", "&gt;")
    assert escape(text) == expected


@given(st.text())
def test_escape_is_undone_by_slacks_decoding_and_leaves_no_control_characters(text: str) -> None:
    escaped = escape(text)
    assert unescape(escaped) == reveal(text)  # hiding characters are shown, not obeyed
    assert "<" not in escaped and ">" not in escaped
    assert re.sub(r"&(amp|lt|gt);", "", escaped).count("&") == 0


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("hello", 5, "hello"),
        ("hello", 10, "hello"),
        ("hello!", 5, "hell…"),
        ("hello", 1, "…"),
        ("hello", 0, ""),
        ("", 0, ""),
    ],
)
def test_shorten(text: str, limit: int, expected: str) -> None:
    assert shorten(text, limit) == expected


@pytest.mark.slow
@given(st.text(), st.integers(min_value=0, max_value=200))
def test_shorten_never_exceeds_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    short = shorten(text, limit)
    assert len(short) <= limit
    if len(text) <= limit:
        assert short == text
    else:
        assert short.endswith(ELLIPSIS) or short == ""
        assert text.startswith(short[:-1])


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("a&amp;b", 10, "a&amp;b"),
        ("ab&amp;cdef", 6, "ab…"),  # not "ab&am…"
        ("ab&lt;cdef", 5, "ab…"),
        ("ab&lt;cdef", 7, "ab&lt;…"),
        ("&gt;&gt;&gt;", 6, "&gt;…"),
    ],
)
def test_shorten_escaped_never_leaves_half_an_entity(text: str, limit: int, expected: str) -> None:
    assert shorten_escaped(text, limit) == expected


@pytest.mark.slow
@given(st.text(alphabet="ab<>&", max_size=60), st.integers(min_value=0, max_value=80))
def test_shorten_escaped_keeps_text_escaped(text: str, limit: int) -> None:
    short = shorten_escaped(escape(text), limit)
    assert len(short) <= limit
    assert "<" not in short and ">" not in short
    assert _ENTITY.sub("", short).count("&") == 0
    assert text.startswith(unescape(short.removesuffix(ELLIPSIS)))


def test_mrkdwn_text_object_is_verbatim() -> None:
    assert mrkdwn("*x*") == {"type": "mrkdwn", "text": "*x*", "verbatim": True}


def test_plain_text_object_shortens_only_when_asked() -> None:
    assert plain("x" * 100) == {"type": "plain_text", "text": "x" * 100, "emoji": True}
    short = plain("x" * 100, 75)
    assert short["type"] == "plain_text" and len(short["text"]) == 75
    assert short["text"].endswith(ELLIPSIS)
    assert "verbatim" not in short
