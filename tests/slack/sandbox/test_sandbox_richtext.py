"""richtext.py: Slack text formatting as safe HTML for the sandbox page."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.slack.render.mrkdwn import escape, reveal
from adapters.slack.sandbox.richtext import (
    Names,
    decode_entities,
    markdown_to_html,
    mrkdwn_to_html,
    plain_to_html,
    text_to_html,
    with_html,
)

NAMES = Names(
    users={"U1": "alice", "U2": "bob"},
    channels={"C1": "general"},
    usergroups={"S1": "reviewers"},
)

ALLOWED_TAGS = {
    "a",
    "b",
    "i",
    "s",
    "code",
    "pre",
    "blockquote",
    "br",
    "span",
    "time",
    "p",
    "ul",
    "ol",
    "li",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
}
ALLOWED_ATTRIBUTES = {
    "class", "href", "target", "rel", "data-user-id", "start", "data-date", "data-format"
}  # fmt: skip


class _Audit(HTMLParser):
    """Collects the tags, attributes and visible text of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend(attrs)
        if tag == "br":
            self.text.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def audit(fragment: str) -> _Audit:
    parser = _Audit()
    parser.feed(fragment)
    parser.close()
    return parser


def visible(fragment: str) -> str:
    """The text a browser shows for ``fragment`` (line breaks as ``\\n``)."""
    return "".join(audit(fragment).text)


# --- entities and escaping -------------------------------------------------------------


def test_slack_entities_are_decoded_then_html_escaped() -> None:
    out = mrkdwn_to_html("a &lt;b&gt; &amp; c")
    assert out == "a &lt;b&gt; &amp; c"
    assert visible(out) == "a <b> & c"


def test_only_the_three_slack_entities_are_decoded() -> None:
    assert visible(mrkdwn_to_html("&quot; &#39; &nbsp;")) == "&quot; &#39; &nbsp;"
    assert visible(mrkdwn_to_html("&amp;lt;")) == "&lt;"  # an escaped entity stays text
    assert decode_entities("&amp;amp; &lt;&gt;") == "&amp; <>"


def test_html_in_the_text_is_shown_not_run() -> None:
    out = mrkdwn_to_html('<script>alert("x")</script> <img src=x onerror=alert(1)>')
    assert "<script" not in out and "<img" not in out
    assert "onerror" not in "".join(v or "" for _, v in audit(out).attributes)


def test_quotes_are_escaped() -> None:
    assert mrkdwn_to_html('"it\'s"') == "&quot;it&#x27;s&quot;"


def test_asker_text_escaped_for_slack_reads_back_verbatim() -> None:
    attack = "<!channel> <@U1> <https://evil.example|click> & </div>"
    out = mrkdwn_to_html(escape(attack), NAMES)
    assert visible(out) == attack
    assert audit(out).tags == []


# --- formatting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("*bold*", "<b>bold</b>"),
        ("_italic_", "<i>italic</i>"),
        ("~strike~", "<s>strike</s>"),
        ("a *b* c", "a <b>b</b> c"),
        ("*bold _and italic_*", "<b>bold <i>and italic</i></b>"),
        ("*1. Ship it?*", "<b>1. Ship it?</b>"),
        ("`x < y`", '<code class="sk-code">x &lt; y</code>'),
        ("`*not bold*`", '<code class="sk-code">*not bold*</code>'),
    ],
)
def test_emphasis_and_code(source: str, expected: str) -> None:
    assert mrkdwn_to_html(source) == expected


@pytest.mark.parametrize(
    "source",
    ["snake_case_name", "2*3*4", "* not bold *", "a*b*c", "file_name_v2.txt", "~/path~x"],
)
def test_markers_inside_words_or_spaced_are_literal(source: str) -> None:
    out = mrkdwn_to_html(source)
    assert audit(out).tags == []
    assert visible(out) == source


def test_code_block_keeps_its_text_and_lines() -> None:
    out = mrkdwn_to_html("before\n```\nif a &lt; b:\n    *x*\n```\nafter")
    assert '<pre class="sk-pre">if a &lt; b:\n    *x*</pre>' in out
    assert out.startswith("before") and out.endswith("after")


def test_quote_lines_become_one_blockquote() -> None:
    out = mrkdwn_to_html("intro\n&gt; first *line*\n> second\nafter")
    assert out == (
        'intro<blockquote class="sk-quote">first <b>line</b><br>second</blockquote>after'
    )


def test_line_breaks_are_kept() -> None:
    assert mrkdwn_to_html("one\ntwo") == "one<br>two"


# --- links and mentions ----------------------------------------------------------------


def test_link_with_a_label() -> None:
    out = mrkdwn_to_html("see <https://example.com/a?b=1&amp;c=2|the *docs*>")
    assert out == (
        'see <a class="sk-link" href="https://example.com/a?b=1&amp;c=2" target="_blank" '
        'rel="noopener noreferrer">the *docs*</a>'
    )


def test_link_without_a_label_shows_the_address() -> None:
    out = mrkdwn_to_html("<https://example.com>")
    assert visible(out) == "https://example.com"
    assert ("href", "https://example.com") in audit(out).attributes


def test_mailto_link_shows_the_address() -> None:
    out = mrkdwn_to_html("<mailto:a@example.com>")
    assert visible(out) == "a@example.com"
    assert ("href", "mailto:a@example.com") in audit(out).attributes


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "vbscript:x"]
)
def test_unsafe_links_are_plain_text(url: str) -> None:
    out = mrkdwn_to_html(f"<{url}|click me>")
    assert audit(out).tags == []
    assert visible(out) == "click me"


def test_a_quote_in_a_link_cannot_break_out_of_the_attribute() -> None:
    out = mrkdwn_to_html('<https://x.example/" onmouseover="alert(1)|x>')
    attributes = dict(audit(out).attributes)
    assert set(attributes) == {"class", "href", "target", "rel"}
    assert attributes["href"] == 'https://x.example/" onmouseover="alert(1)'


def test_user_mentions_show_the_name_as_text() -> None:
    out = mrkdwn_to_html("hi <@U1> and <@U2|bobby> and <@U9>", NAMES)
    assert visible(out) == "hi @alice and @bob and @U9"
    assert "href" not in dict(audit(out).attributes)


def test_a_mention_label_is_used_for_an_unknown_user() -> None:
    assert visible(mrkdwn_to_html("<@U9|zed>", NAMES)) == "@zed"


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("<!here>", "@here"),
        ("<!channel>", "@channel"),
        ("<!everyone>", "@everyone"),
        ("<!here|@here>", "@here"),
        ("<!subteam^S1>", "@reviewers"),
        ("<!subteam^S9|@ops>", "@ops"),
        ("<#C1>", "#general"),
        ("<#C9|random>", "#random"),
    ],
)
def test_special_mentions_are_text(source: str, shown: str) -> None:
    out = mrkdwn_to_html(source, NAMES)
    assert visible(out) == shown
    assert "a" not in audit(out).tags


def test_a_date_shows_its_fallback() -> None:
    source = "<!date^1733150000^{date_short_pretty} at {time}|2024-12-02 14:33 UTC>"
    assert visible(mrkdwn_to_html(f"Answered · {source}")) == "Answered · 2024-12-02 14:33 UTC"


def test_a_date_without_fallback_shows_the_time_in_utc() -> None:
    assert visible(mrkdwn_to_html("<!date^0^{date}>")) == "1970-01-01 00:00 UTC"
    assert visible(mrkdwn_to_html("<!date^soon^{date}>")) == "date^soon^{date}"


def test_a_fallback_with_html_is_escaped() -> None:
    out = mrkdwn_to_html("<!date^1^{date}|&lt;b&gt;x>")
    assert visible(out) == "<b>x"
    assert audit(out).tags == ["time"]


def test_a_date_carries_its_time_and_format_for_the_readers_zone() -> None:
    out = mrkdwn_to_html('<!date^1700000000^{date_short_pretty} at {time}"&lt;b&gt;|fallback>')
    assert out == (
        '<time class="sk-date" data-date="1700000000" '
        'data-format="{date_short_pretty} at {time}&quot;&lt;b&gt;">fallback</time>'
    )


# --- emoji -----------------------------------------------------------------------------


def test_common_emoji_codes_become_characters() -> None:
    out = mrkdwn_to_html(":white_check_mark: Answered :warning: :tada:")
    assert out == "✅ Answered ⚠️ 🎉"


def test_unknown_emoji_codes_and_times_stay_as_typed() -> None:
    assert mrkdwn_to_html(":no_such_emoji: at 10:30:45") == ":no_such_emoji: at 10:30:45"


def test_emoji_names_are_not_italicised() -> None:
    assert mrkdwn_to_html(":black_square_for_stop: Cancelled") == "⏹️ Cancelled"


# --- plain_text ------------------------------------------------------------------------


def test_plain_text_is_literal() -> None:
    assert plain_to_html("*a* &lt; <b>") == "*a* &amp;lt; &lt;b&gt;"
    assert plain_to_html("go :rocket:") == "go 🚀"
    assert plain_to_html("go :rocket:", emoji=False) == "go :rocket:"
    assert plain_to_html("a\nb") == "a<br>b"


# --- markdown blocks -------------------------------------------------------------------


def test_markdown_headings_lists_and_emphasis() -> None:
    source = (
        "## Plan\n"
        "1. Wrap it in **backoff**\n"
        "2. Log `export_id`\n"
        "   - nested *item*\n"
        "- bullet ~~gone~~\n"
        "\n"
        "Risk: _low_ [docs](https://example.com/d)"
    )
    out = markdown_to_html(source)
    assert out == (
        '<h2 class="sk-h">Plan</h2>'
        '<ol class="sk-list"><li>Wrap it in <b>backoff</b></li>'
        '<li>Log <code class="sk-code">export_id</code>'
        '<ul class="sk-list"><li>nested <i>item</i></li></ul></li></ol>'
        '<ul class="sk-list"><li>bullet <s>gone</s></li></ul>'
        '<p>Risk: <i>low</i> <a class="sk-link" href="https://example.com/d" target="_blank" '
        'rel="noopener noreferrer">docs</a></p>'
    )


def test_markdown_numbered_list_keeps_its_start() -> None:
    assert markdown_to_html("3. three\n4. four") == (
        '<ol class="sk-list" start="3"><li>three</li><li>four</li></ol>'
    )


def test_markdown_code_fence_quote_and_rule() -> None:
    out = markdown_to_html("```python\nx = a &lt; b\n**no**\n```\n&gt; quoted\n\n---\nend")
    assert out == (
        '<pre class="sk-pre">x = a &lt; b\n**no**</pre>'
        '<blockquote class="sk-quote">quoted</blockquote><hr><p>end</p>'
    )


def test_markdown_paragraph_lines_keep_their_breaks() -> None:
    assert markdown_to_html("one\ntwo\n\nthree") == "<p>one<br>two</p><p>three</p>"


def test_markdown_escaped_by_the_provider_reads_back_verbatim() -> None:
    detail = "Run <script>alert(1)</script> & check <@U1> <!here>"
    out = markdown_to_html(escape(detail), NAMES)
    assert visible(out) == detail
    assert audit(out).tags == ["p"]


def test_markdown_unsafe_link_is_text() -> None:
    out = markdown_to_html("[click](javascript:alert(1))")
    assert "a" not in audit(out).tags


# --- text objects and decorated blocks -------------------------------------------------


def test_text_to_html_follows_the_type() -> None:
    assert text_to_html({"type": "plain_text", "text": "*a*"}) == "*a*"
    assert text_to_html({"type": "plain_text", "text": ":x:", "emoji": False}) == ":x:"
    assert text_to_html({"type": "mrkdwn", "text": "*a*"}) == "<b>a</b>"
    assert text_to_html({"type": "markdown", "text": "# T"}) == '<h1 class="sk-h">T</h1>'
    assert text_to_html({"type": "mrkdwn"}) == ""


def test_with_html_decorates_every_text_and_leaves_the_original_alone() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Q* <@U1>"}},
        {"type": "markdown", "text": "**plan**"},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Go <now>"},
                    "confirm": {"title": {"type": "plain_text", "text": "Sure?"}},
                }
            ],
        },
    ]
    decorated = with_html(blocks, NAMES)
    assert decorated[0]["text"]["html"] == (
        '<b>Q</b> <span class="sk-mention" data-user-id="U1">@alice</span>'
    )
    assert decorated[1]["html"] == "<p><b>plan</b></p>"
    button = decorated[2]["elements"][0]
    assert button["text"]["html"] == "Go &lt;now&gt;"
    assert button["confirm"]["title"]["html"] == "Sure?"
    assert "html" not in blocks[0]["text"]


# --- properties ------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "1",
        " ",
        "\n",
        "*",
        "_",
        "~",
        "`",
        "```",
        "<",
        ">",
        "&",
        '"',
        "'",
        "|",
        "@",
        "!",
        "#",
        ":",
        "/",
        "(",
        ")",
        "[",
        "]",
        "&lt;",
        "&gt;",
        "&amp;",
        "<@U1>",
        "<!here>",
        "<!date^1^x|y>",
        "<https://ok.example|ok>",
        "<javascript:alert(1)|x>",
        "javascript:",
        "<script>",
        "</b>",
        "<img src=x onerror=alert(1)>",
        "> ",
        "&gt; ",
        "# ",
        "- ",
        "1. ",
        "[x](https://ok.example)",
        "[x](javascript:x)",
        ":tada:",
        "\ue000",
        "\ue0010\ue001",
    ]
)
_TEXT = st.lists(_PIECES, max_size=40).map("".join)


def _assert_safe(fragment: str) -> None:
    parsed = audit(fragment)
    assert set(parsed.tags) <= ALLOWED_TAGS
    for name, value in parsed.attributes:
        assert name in ALLOWED_ATTRIBUTES
        if name == "href":
            assert value is not None
            assert value.startswith(("http://", "https://", "mailto:"))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_mrkdwn_output_is_always_safe(text: str) -> None:
    _assert_safe(mrkdwn_to_html(text, NAMES))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_markdown_output_is_always_safe(text: str) -> None:
    _assert_safe(markdown_to_html(text, NAMES))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="*_~`:\ue000\ue001\r")))
def test_escaped_text_without_markers_reads_back_exactly(text: str) -> None:
    lines = text.split("\n")
    if any(line.startswith(">") for line in lines):
        return  # a quote line: shown without its marker
    out = mrkdwn_to_html(escape(text))
    shown = reveal(text)  # hiding characters are shown, not obeyed
    assert visible(out) == shown
    assert html.unescape(out.replace("<br>", "\n")) == shown


# --- rich_text blocks ------------------------------------------------------------------


def test_rich_text_is_shown_as_typed_with_its_styles() -> None:
    from adapters.slack.sandbox.richblocks import rich_text_to_html

    block = {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_section",
                "elements": [
                    {
                        "type": "text",
                        "text": "Run **v2.4** <!channel> <b>x</b> &amp;",
                        "style": {"bold": True},
                    },
                    {"type": "text", "text": " later", "style": {"italic": True}},
                ],
            },
            {
                "type": "rich_text_list",
                "style": "ordered",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": "a_b_"}]}
                ],
            },
        ],
    }
    rendered = rich_text_to_html(block)
    assert rendered == (
        '<div class="sk-rich-section"><b>Run **v2.4** &lt;!channel&gt; &lt;b&gt;x&lt;/b&gt; '
        "&amp;amp;</b><i> later</i></div>"
        '<ol class="sk-list sk-rich-list"><li>a_b_</li></ol>'
    )


def test_rich_text_blocks_get_html_beside_them() -> None:
    blocks = [{"type": "rich_text", "elements": [{"type": "rich_text_section",
               "elements": [{"type": "text", "text": "*x*"}]}]}]  # fmt: skip
    (decorated,) = with_html(blocks)
    assert decorated["html"] == '<div class="sk-rich-section">*x*</div>'
