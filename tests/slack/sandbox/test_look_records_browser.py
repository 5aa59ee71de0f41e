"""What a person sees of a revised plan on a phone (issue 39): a superseded plan links to
its replacement, each changed line of the diff keeps its + or − however it wraps, and the
approved revision's record keeps its link, the feedback and the diff. Screenshots are kept
in the test's temp folder."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from bot.app.runtime import Runtime
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions
from tests.slack.sandbox.test_look_browser import PHONE, asked
from tests.slack.sandbox.test_sandbox_browser import (
    TEST_BUDGET,
    browser,
    open_page,
    pinned,
    runtime,
)

__all__ = ["browser", "runtime"]  # the fixtures, used by name

pytestmark = [pytest.mark.browser, pytest.mark.timeout(TEST_BUDGET + 30)]

OLD = "# Rotate the cache credentials\n\n1. Deploy the new secret to all 14 services at once.\n"
NEW = (
    "# Rotate the cache credentials\n\n1. Deploy the new secret to the 14 services in three "
    "waves, fifteen minutes apart, watching the connection error rate after each wave.\n"
)
NEWER = (
    NEW.replace("three waves", "three waves of five services")
    + "2. Revoke the old credentials after 24 hours, once no service uses them.\n"
)


def plan(question: str, detail: str) -> dict[str, object]:
    options = [{"label": "Approve"}, {"label": "Keep planning"}]
    intent = {"kind": "plan-review", "approve": "Approve"}
    item = {"id": "plan", "question": question, "detail": detail, "intent": intent}
    return {"questions": [{**item, "header": "Plan review", "options": options}]}


async def test_on_a_phone_a_revised_plan_keeps_its_history(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        ids: list[str] = []
        first = asked(runtime, plan("First plan?", OLD), AskOptions(on_posted=ids.append))
        old = await pinned(page, "First plan?")

        # Revised while open: the first one is superseded and links to its replacement.
        options = AskOptions(revises=ids[0], on_posted=ids.append)
        second = asked(runtime, plan("Second plan?", NEW), options)
        with pytest.raises(UserQuestionError):
            await first
        revised = await pinned(page, "Second plan?")
        link = old.get_by_role("link", name="See the revised plan.")
        ts = str(await revised.get_attribute("data-ts")).replace(".", "")
        await expect(link).to_have_attribute("href", re.compile(f"/archives/C[0-9A-Z]+/p{ts}$"))
        await link.scroll_into_view_if_needed()
        await page.screenshot(path=tmp_path / "look-05-superseded-phone.png")

        # Declined with feedback, revised again: the diff's lines wrap under their markers.
        await page.get_by_test_id("user-switcher").select_option(label="bob (Bob Okafor)")
        await revised.get_by_role("button", name="Decline with feedback…").tap()
        modal = page.get_by_test_id("modal")
        await modal.locator("textarea").fill("Roll out in **waves** :warning:")
        await modal.get_by_test_id("modal-submit").tap()
        await second
        third = asked(runtime, plan("Third plan?", NEWER), AskOptions(revises=ids[1]))
        latest = await pinned(page, "Third plan?")
        rows = latest.locator("[data-block-type=rich_text] li")
        await expect(rows).to_have_count(3)  # − 1., + 1., + 2.
        for row in await rows.all():
            text = await row.inner_text()
            assert text.startswith(("+ ", "− ")), text
            box, marker = await row.bounding_box(), await row.locator("b").bounding_box()
            assert box is not None and marker is not None and marker["x"] - box["x"] < 4
            if "waves" in text:  # wraps on a phone: its marker on the first line only
                assert box["height"] > 2.5 * marker["height"], (text, box, marker)
        await rows.first.scroll_into_view_if_needed()
        await page.screenshot(path=tmp_path / "look-06-diff-phone.png")

        # Approved: the record keeps the link, the feedback and the diff.
        await page.get_by_test_id("user-switcher").select_option(label="alice (Alice Moreau)")
        await latest.get_by_role("button", name="Approve").tap()
        assert (await third).answers[0].selected == ["Approve"]  # type: ignore[attr-defined]
        await expect(latest).to_contain_text("Approved by @alice")
        await expect(latest.get_by_role("link", name="the previous review")).to_have_count(1)
        await expect(latest.locator("blockquote b")).to_have_text("waves")
        await expect(latest.locator("[data-block-type=rich_text] li")).to_have_count(3)
        await page.screenshot(path=tmp_path / "look-07-revision-approved-phone.png", full_page=True)
        assert errors == []
