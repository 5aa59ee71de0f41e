"""Every branch of link defusing, seen as a reader sees the text (issue 41).

A link never shows one target while going to another; code is shown as written only where
it is surely code. Checked with CommonMark (markdown-it-py) and, for tables, its GFM preset.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from adapters.slack.render.mrkdwn import markdown_text

pytestmark = pytest.mark.timeout(60)
EVIL = "https://evil.example/steal"
_ENTITY = re.compile(r"&(amp|lt|gt);")
_READERS = [MarkdownIt("commonmark", {"html": False}), MarkdownIt("gfm-like", {"html": False})]


def evil_links(source: str) -> list[str]:
    """The text of every link to ``EVIL`` that does not show ``EVIL``, as sent and decoded."""
    sent = markdown_text(source)
    decoded = _ENTITY.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m[1]], sent)
    found: list[str] = []
    for reader in _READERS:
        for text in (sent, decoded):
            for token in reader.parse(text):
                children = token.children or []
                for i, child in enumerate(children):
                    if child.type == "image" and child.attrGet("src") == EVIL:
                        found.append(child.content)
                    if child.type == "link_open" and child.attrGet("href") == EVIL:
                        shown = children[i + 1].content if i + 1 < len(children) else ""
                        if shown != EVIL:
                            found.append(shown)
    return found


@pytest.mark.parametrize(
    "source",
    [
        f"<http://a`>[x]({EVIL})`",  # the autolink takes the backtick: no code span
        f"x <mailto:a`b> [x]({EVIL}) `",
        f"| h | i |\n|---|---|\n| `a | [x]({EVIL})` |",  # a table cell splits the span
        f"[x](<{EVIL}>)",
        f"![x]({EVIL})",
        f"[{EVIL}]({EVIL}) ]({EVIL}",
        f"[x]: {EVIL}\n\n[x]",
        f"> - [x]: {EVIL}\n\n[x]",
        f"[[x]({EVIL})]({EVIL})",
        f"- a\n\n  ```\n  [x]({EVIL})\n  ```",
        f"```a`b\n[x]({EVIL})\n```",
        f"para\n    [x]({EVIL})",
        f"\ue000[x]({EVIL})\ue001",
        f"a ` b\n`[x]({EVIL})`",
    ],
)
def test_no_link_is_disguised(source: str) -> None:
    assert evil_links(source) == []


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("[x](<https://a.example/a b>)", "x (https://a.example/a b)"),
        ("![alt](https://a.example/p.png)", "alt (https://a.example/p.png)"),
        ("![https://a.example](https://a.example)", "https://a.example (https://a.example)"),
        ("[https://a.example](https://a.example)", "[https://a.example](https://a.example)"),
        ("[a<b](a<b)", "a&lt;b (a&lt;b)"),
        ("[a\\b](a\\b)", "a\\b (a\\b)"),
        ("[[x](y)](z)", "x (y) (z)"),
        ("[a]: https://e.example", "a: https://e.example"),
        ("> - [a]: https://e.example", "&gt; - a: https://e.example"),
        (
            "[https://a.example](https://a.example) ](x",
            "[https://a.example](https://a.example) ]（x",
        ),
        ("a&b<c>", "a&amp;b&lt;c&gt;"),
    ],
)
def test_each_link_form_is_shown_as_it_goes(source: str, shown: str) -> None:
    assert markdown_text(source) == shown


@pytest.mark.parametrize(
    "source",
    [
        "`[x](y)`",
        "```\n[x](y)\n```",
        "  ```\n[x](y)\n  ```",
        "- a\n```\n[x](y)\n```",
        "\n    [x](y)",
        "a ` b\n\n`[x](y)`",  # a blank line ends the paragraph whose backtick was open
        "x\n\n```\n[x](y)\n```\n\nz",
    ],
)
def test_code_is_shown_as_written(source: str) -> None:
    assert markdown_text(source) == source


@pytest.mark.parametrize(
    "source",
    ["a \ue0000\ue001", f"```\n[x]({EVIL})\n```\na \ue0000\ue001 [x]({EVIL})", "\ue0017\ue000"],
)
def test_text_holding_the_private_characters_of_code_masking_is_shown(source: str) -> None:
    assert evil_links(source) == []
    shown = markdown_text(source)
    assert shown.count("\ue000") == source.count("\ue000")  # nothing put in their place
    assert shown.count("```") == source.count("```")


def test_only_the_link_outside_code_is_rewritten() -> None:
    assert markdown_text("`[x](y)` [x](y)") == "`[x](y)` x (y)"
    assert markdown_text("x\n\n```\n[x](y)\n```\n\n[x](y)") == "x\n\n```\n[x](y)\n```\n\nx (y)"


_FORMS = st.sampled_from(
    [
        "`",
        "``",
        "```\n",
        "\n",
        "\n\n",
        "    ",
        "- ",
        "> ",
        "|",
        "---|---\n",
        "\\",
        "[x]",
        f"({EVIL})",
        f"[x]({EVIL})",
        f"![x]({EVIL})",
        f"[x]: {EVIL}\n",
        "](",
        "<http://a`>",
        "<a@b`c>",
        "<",
        ">",
        "[",
        "]",
        "(",
        ")",
        EVIL,
        "a",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_FORMS, max_size=14).map("".join))
def test_no_mixture_of_link_and_code_forms_disguises_a_link(source: str) -> None:
    assert evil_links(source) == []
