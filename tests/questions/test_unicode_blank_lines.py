"""Issue 38, item 2: link-defusing reads blank lines and indentation as CommonMark does.

A blank line is one of spaces and tabs only: a line of a no-break space (or any other
Unicode space) is a paragraph's text, so an indented line after it continues that paragraph
and is no code block; its link must be rewritten like any other.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.slack.render.test_disguised_links import EVIL, disguised

pytestmark = pytest.mark.timeout(60)

UNICODE_SPACES = sorted(
    {
        chr(c)
        for c in range(sys.maxunicode + 1)
        if chr(c).isspace() or chr(c) in "\u200b\u2060\ufeff"
    }
    - {"\n", "\r", " ", "\t"}
)
"""Every character Python calls whitespace (plus the zero-width ones) that CommonMark does
not count as a space for blank lines or indentation."""


def test_the_reported_shape_is_shown_as_it_goes() -> None:
    source = f"Plan:\n\u00a0\n    [https://github.com/acme/app]({EVIL})\n"
    assert disguised(source) == []


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    space=st.sampled_from(UNICODE_SPACES),
    repeat=st.integers(1, 3),
    before=st.sampled_from(["Plan:", "", "- item", "> quoted"]),
    indent=st.sampled_from(["    ", "\t", "        ", "  \u00a0  "]),
    after_blank=st.booleans(),
)
def test_no_unicode_space_line_turns_a_link_into_code(
    space: str, repeat: int, before: str, indent: str, after_blank: bool
) -> None:
    blank = space * repeat
    middle = f"{blank}\n\n" if after_blank else f"{blank}\n"
    source = f"{before}\n{middle}{indent}[https://github.com/acme/app]({EVIL})\n"
    assert disguised(source) == [], repr(source)
