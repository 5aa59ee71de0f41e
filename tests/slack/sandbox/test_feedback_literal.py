"""A declined plan's feedback in the record and on the sandbox page.

A single reviewer's feedback is quoted in a ``markdown`` block above the outcome line,
formatted as they wrote it (``**bold**``, code, ``:emoji:``), every line inside the quote,
never a mention or a link of its own. A team's vote lines quote each decliner's feedback on
one line of a ``section``, as typed: ``outcomes.literal`` fences each marker with zero-width
spaces and breaks each emoji code after its colon (the sandbox's mrkdwn renderer counts the
zero-width space as white space, as that assumes Slack does).
"""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path
from typing import Any, Final

import pytest
from playwright.async_api import Browser, expect

from adapters.slack.clicks.transitions import apply_vote
from adapters.slack.model.record import PendingRecord
from adapters.slack.model.tally import Vote
from adapters.slack.render.blocks.message import render_final
from adapters.slack.render.blocks.parts import Rendered
from adapters.slack.sandbox.blockcheck import check_message
from adapters.slack.sandbox.richtext import mrkdwn_to_html, with_html
from bot.app.runtime import Runtime
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.review import ReviewPolicy
from tests.slack.sandbox import test_sandbox_browser as _browser_module
from tests.slack.sandbox.test_sandbox_browser import TEST_BUDGET, ask, open_page, pinned

runtime = _browser_module.runtime  # the fixtures of the sandbox browser tests
browser = _browser_module.browser

RID: Final = "0123456789abcdef0123"
ALICE: Final = "U0ALICE001"
BOB: Final = "U0BOB00001"
AT: Final = 1_700_000_000.0
ZWSP: Final = "\u200b"
REVIEWED: Final = "Stage it *first* on a copy of prod; :fire: and `drop` are risky."
EVERYTHING: Final = (
    f"{REVIEWED}\n_really_ and ~never~ <!here> <@U1> <https://evil.example|docs> &amp; & < >"
    "\n\n:white_check_mark: *Approved by @alice*"
)
MARKUP: Final = re.compile(r"<(b|i|s|code|pre|blockquote|a|span)\b")
"""Any markup the sandbox builds (text is escaped, so a ``<`` in it is ``&lt;``)."""


def plan_question() -> AskUserQuestionItem:
    return AskUserQuestionItem.model_validate(
        {
            "id": "plan-review",
            "header": "Plan review",
            "question": "Approve this plan and leave plan mode?",
            "detail": "# Plan\n\n1. Ship it",
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
    )


def review(**fields: Any) -> PendingRecord:
    fields.setdefault("owner", "proc-1")
    return PendingRecord(id=RID, channel="C0QUESTION", questions=[plan_question()], **fields)


def declined(custom: str) -> PendingRecord:
    answer = AskUserQuestionAnswer.model_validate(
        {"answers": [{"id": "plan-review", "selected": [], "custom": custom}]}
    )
    return review().next(state="answered", answer=answer, answered_by=BOB, finished_at=AT)


def outcome_element(rendered: Rendered) -> dict[str, Any]:
    """The outcome line's text object (the context element with the date), with its html."""
    (element,) = [
        e
        for b in with_html(rendered.blocks)
        if b["type"] == "context"
        for e in b["elements"]
        if "<!date^" in e.get("text", "")
    ]
    return dict(element)


def shown(fragment: str) -> str:
    """What a person reads of an HTML fragment: the text, entities decoded, no ZWSP."""
    return html.unescape(re.sub(r"<[^>]*>", "", fragment)).replace(ZWSP, "")


@pytest.mark.parametrize(
    "feedback",
    [
        REVIEWED,
        EVERYTHING,
        "a *b* c _d_ e ~f~ g `h` i",
        "```code``` and ``two``",
        "```\nfenced\n```\nafter",
        ":fire::fire: :+1: :white_check_mark:",
        "line one\nline *two*\r\n\u2028_three_",
    ],
)
def test_a_single_reviewers_feedback_is_a_formatted_quote(feedback: str) -> None:
    rendered = render_final(declined(feedback))
    assert check_message(rendered.blocks, rendered.text) == []
    quote, outcome = with_html(rendered.blocks)[-2:]
    assert quote["type"] == "markdown" and quote["html"].startswith("<blockquote")
    assert all(line.startswith("> ") for line in quote["text"].split("\n"))
    assert "<a " not in quote["html"] and "sk-mention" not in quote["html"]
    assert "«" not in outcome["elements"][0]["text"]  # quoted once, above


def test_the_reviewers_example_is_formatted() -> None:
    quote = with_html(render_final(declined(REVIEWED)).blocks)[-2]
    assert "<i>first</i>" in quote["html"] and '<code class="sk-code">drop</code>' in quote["html"]
    assert "\N{FIRE}" in quote["html"] and "*" not in shown(quote["html"])


def test_every_decliners_feedback_shows_as_typed() -> None:
    record = review(review=ReviewPolicy(approvals=1, declines=2))
    for user, feedback in ((ALICE, "Stage it *first*."), (BOB, f"`drop`\n{EVERYTHING}")):
        vote = Vote(user=user, name=user.lower(), approve=False, feedback=feedback, at=AT)
        after = apply_vote(record, vote)
        assert after is not None
        record = after
    rendered = render_final(record)
    assert check_message(rendered.blocks, rendered.text) == []
    assert "«" not in outcome_element(rendered)["html"]  # quoted once, in the vote lines
    sections = [b["text"] for b in with_html(rendered.blocks) if b["type"] == "section"]
    (tally,) = [t for t in sections if "declined" in t["html"]]
    quotes = re.findall(r"“(.*?)”(?:<br>|$)", str(tally["html"]), re.S)
    assert len(quotes) == 2 and all(MARKUP.findall(q) == [] for q in quotes), quotes
    assert "Stage it *first*." in shown(quotes[0]) and "`drop` / Stage it *first* on" in shown(
        quotes[1]
    )


def test_the_bots_own_formatting_still_renders() -> None:
    # Zero-width spaces make no difference to markup that does not touch them.
    assert mrkdwn_to_html("*Not approved* · `bash`") == (
        '<b>Not approved</b> · <code class="sk-code">bash</code>'
    )
    # A fenced marker never closes the bot's own emphasis early: every character shows.
    assert mrkdwn_to_html(f"Asked by *a{ZWSP}*{ZWSP}b*") == f"Asked by *a{ZWSP}*{ZWSP}b*"
    assert mrkdwn_to_html("_a_ ~b~ *c d*") == "<i>a</i> <s>b</s> <b>c d</b>"


# ---------------------------------------------------------------------------------------
# The page: a plan declined with that feedback in the browser shows it as typed


def browser_test(test: Any) -> Any:
    """The marks of the sandbox browser tests (skipped without Chromium, outside CI)."""
    for mark in _browser_module.pytestmark:
        test = mark(test)
    return test


@browser_test
async def test_declined_feedback_in_the_browser_has_no_formatting(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, viewport={"width": 390, "height": 844})
        plan = ask(
            runtime,
            {
                "questions": [
                    {
                        "id": "plan",
                        "question": "May I migrate the invoices?",
                        "detail": "1. Migrate",
                        "options": [{"label": "Approve"}, {"label": "Keep planning"}],
                        "intent": {"kind": "plan-review", "approve": "Approve"},
                    }
                ]
            },
        )
        record = await pinned(page, "May I migrate the invoices?")
        await page.get_by_test_id("user-switcher").select_option(label="bob (Bob Okafor)")
        await record.get_by_role("button", name="Decline with feedback…").click()
        modal = page.get_by_test_id("modal")
        feedback = "Backfill at night, and **do not** drop `customer_id` :warning:"
        await modal.locator("textarea").fill(f"{feedback}\nSecond _line_.")
        await modal.get_by_test_id("modal-submit").click()
        line = record.locator(".sk-context").filter(has_text="Declined by")
        await expect(line).to_contain_text("Declined by @bob")
        quote = record.locator("[data-block-type=markdown] blockquote").last
        await expect(quote.locator("b")).to_have_text("do not")
        await expect(quote.locator("code")).to_have_text("customer_id")
        await expect(quote).to_contain_text("\N{WARNING SIGN}")
        await line.scroll_into_view_if_needed()
        path = tmp_path / "plan-declined-feedback-phone.png"
        await page.screenshot(path=path)
        assert (await plan).answers[0].custom == f"{feedback}\nSecond _line_."
        assert "**" not in await quote.inner_text() and "Declined" not in await quote.inner_text()
        assert await line.locator("b, i, s, code, pre, a").count() == 0
        assert errors == []
    print(path)
