"""Code in a plan is shown as written: CommonMark makes no link inside a code span or a
code block, so the link rewriting (``markdown_text``) leaves them alone, and still no link
anywhere shows one target while going to another."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.slack.render.mrkdwn import markdown_text
from tests.slack.render.test_disguised_links import EVIL
from tests.slack.render.test_disguised_links import disguised as _disguised
from tests.slack_harness import SlackHarness


def disguised(source: str) -> list[tuple[str, str]]:
    """The disguised links in ``markdown_text(source)`` (an autolink's target is the
    percent-encoded text it shows: not a disguise)."""
    return [(shown, to) for shown, to in _disguised(source) if unquote(to) != shown]


CODE = [
    "Call `handlers[event.type](event)` for each event.",
    "```python\nresult = self.hooks[name](*args)\nfirst = fns[0]()\n```",
    "```js\nconst md = `[docs](${url})`;\n```",
    "~~~\n[d]: https://x.example\n~~~",
    "Before:\n\n    table[i](x)\n    [d]: y\n\nafter.",
    "Use ``a[`b`](c)`` here.",
    "1. Run `fns[0]()` then:\n\n```sh\nx[1](2)\n```",
]


@pytest.mark.parametrize("source", CODE)
def test_code_is_shown_as_written(source: str) -> None:
    assert markdown_text(source) == source


def test_links_around_code_are_still_rewritten() -> None:
    shown = markdown_text("See [the docs](https://x.example) and `a[0](1)`.")
    assert shown == "See the docs (https://x.example) and `a[0](1)`."


def test_a_code_span_inside_a_link_text_keeps_the_link_rewritten() -> None:
    assert markdown_text(f"[`x`]({EVIL})") == f"`x` ({EVIL})"
    assert disguised(f"[`ok`]({EVIL}) and `[y]({EVIL})`") == []


TRICKS = {
    "a link whose target takes a backtick": f"[a](`) [b]({EVIL}) `",
    "backticks in two paragraphs": f"a `b\n\n[x]({EVIL})\n\nc` d",
    "backticks in two list items": f"- a `b\n- [x]({EVIL}) `c",
    "a backslash inside a code span": f"`a\\` [x]({EVIL}) `b`",
    "an escaped backtick": f"\\`a [x]({EVIL}) `b`",
    "an autolink taking a backtick": f"<http://x`>`[a]({EVIL})`",
    "a span over two lines": f"`a\nb` [x]({EVIL}) `c`",
    "a fence closed inside a list item": f"- ```\n  code\n  ```\n  [x]({EVIL})\n",
    "a list fence closed by an unindented line": f"- a\n  ```\nb\n[x]({EVIL})\n  ```",
    "an indented paragraph in a list item": f"- a\n\n    [x]({EVIL})",
    "a numbered item's paragraph": f"10. a\n\n    [x]({EVIL})",
    "a quoted fence": f"> ```\n> [x]({EVIL})\n> ```\n[y]({EVIL})",
    "a definition whose label holds a backtick": f"[d`]: {EVIL} '`'\n\n[the docs][d`]",
    "a table cell": f"| `a | [x]({EVIL}) | b` |\n| - | - | - |",
    "a fence with a backtick in its info": f"``` a`b\n[x]({EVIL})\n```",
    "a code block after a paragraph": f"text\n    [x]({EVIL})",
    "a masked-looking text": f"\ue000 0\ue001 `[x]({EVIL})`",
}


@pytest.mark.parametrize("source", list(TRICKS.values()), ids=list(TRICKS))
def test_nothing_that_only_looks_like_code_keeps_a_link(source: str) -> None:
    assert disguised(source) == []


_PIECES = st.sampled_from(
    [
        "`",
        "``",
        "```",
        "~~~",
        "\\",
        "[x]",
        f"({EVIL})",
        "](",
        "[",
        "]",
        "(",
        ")",
        "x",
        " ",
        "\n",
        "\n\n",
        "- ",
        "> ",
        "1. ",
        "    ",
        "  ",
        "<http://a`>",
        "[d]: ",
        EVIL,
        "[d]",
        "|",
        "'`'",
        "<",
        ">",
    ]
)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(st.lists(_PIECES, max_size=24).map("".join))
def test_no_mixture_of_code_and_link_syntax_disguises_a_link(source: str) -> None:
    assert disguised(source) == []


async def test_the_posted_plan_shows_its_code_as_written() -> None:
    plan = (
        "# Route events\n\n1. Dispatch with `handlers[event.type](event)`.\n\n"
        "```python\nfirst = fns[0]()\nresult = self.hooks[name](*args)\n```\n\n"
        "See [the design](https://evil.example/steal) first.\n"
    )
    request = {
        "questions": [
            {
                "id": "plan-review",
                "header": "Plan review",
                "question": "Approve this plan and leave plan mode?",
                "detail": plan,
                "options": [{"label": "Approve"}, {"label": "Keep planning"}],
                "intent": {"kind": "plan-review", "approve": "Approve"},
            }
        ]
    }
    async with SlackHarness() as h:
        h.ask(request)
        message = await h.posted()
        shown = next(b["text"] for b in message.blocks if b["type"] == "markdown")
        assert "`handlers[event.type](event)`" in shown
        assert "first = fns[0]()\nresult = self.hooks[name](*args)\n```" in shown
        assert "the design (https://evil.example/steal)" in shown
