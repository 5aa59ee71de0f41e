"""The sandbox page as a person sees it on a phone (issue 39): dates in the reader's own
zone, a modal that stays with the person who opened it, the bot's own note for the loser of
a simultaneous click, and menus filtered as you type. Screenshots are kept in the test's
temp folder."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, Route, expect

from bot.app.runtime import Runtime
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

PLAN = {
    "questions": [
        {
            "id": "plan",
            "question": "Rotate the cache credentials?",
            "detail": "1. Deploy the new secret in three waves.",
            "intent": {"kind": "plan-review", "approve": "Approve"},
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
        }
    ]
}


async def test_on_a_phone_dates_show_in_the_readers_zone(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, timezone_id="Asia/Tokyo", **PHONE)
        task = asked(runtime, PLAN, AskOptions(label="security agent"))
        plan = await pinned(page, "Rotate the cache credentials?")
        await plan.get_by_role("button", name="Approve").tap()
        await task
        when = plan.locator(".sk-context time.sk-date")
        await expect(when).to_have_text(re.compile(r"^(Today|Yesterday) at \d{1,2}:\d{2}\s[AP]M$"))
        assert (await when.get_attribute("title") or "").endswith(" UTC")  # the fallback
        await expect(plan).not_to_contain_text("UTC")
        shown = await when.inner_text()
        at = int(await when.get_attribute("data-date") or 0)
        options = "{hour: 'numeric', minute: '2-digit'}"
        tokyo = await page.evaluate(
            f"(s) => new Date(s * 1000).toLocaleTimeString([], {options})", at
        )
        assert shown.endswith(f" at {tokyo}")
        await page.screenshot(path=tmp_path / "look-08-local-date-phone.png")
        assert errors == []


async def test_switching_person_never_brings_back_an_old_modal(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        task = asked(runtime, PLAN, AskOptions())
        plan = await pinned(page, "Rotate the cache credentials?")
        await plan.get_by_role("button", name="Decline with feedback…").tap()
        modal = page.get_by_test_id("modal")
        await expect(modal).to_be_visible()
        switcher = page.get_by_test_id("user-switcher")
        await switcher.select_option(label="bob (Bob Okafor)")
        await expect(page.locator("body")).to_have_attribute("data-user", "bob")
        await expect(modal).to_have_count(0)
        await switcher.select_option(label="alice (Alice Moreau)")
        await expect(page.locator("body")).to_have_attribute("data-user", "alice")
        await expect(plan).to_be_visible()
        await page.wait_for_timeout(300)  # any modal state would have arrived by now
        await expect(modal).to_have_count(0)
        await page.screenshot(path=tmp_path / "look-09-switched-back-phone.png")
        # Alice can open it again afresh, and answer.
        await plan.get_by_role("button", name="Decline with feedback…").tap()
        await modal.locator("textarea").fill("Two waves, not three.")
        await modal.get_by_test_id("modal-submit").tap()
        assert (await task).answers[0].custom == "Two waves, not three."  # type: ignore[attr-defined]
        assert errors == []


async def test_the_loser_of_a_simultaneous_click_gets_the_bots_note(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        alice, errors = await open_page(browser, runtime, **PHONE)
        bob, bob_errors = await open_page(browser, runtime, path="?as=bob", **PHONE)
        await expect(bob.locator("body")).to_have_attribute("data-user", "bob")
        task = asked(runtime, PLAN, AskOptions())
        stale = await pinned(bob, "Rotate the cache credentials?")
        # Bob's page keeps showing the open plan while Alice approves it.
        held = asyncio.Event()

        async def hold(route: Route) -> None:
            await held.wait()
            await route.continue_()

        await bob.route("**/sandbox/state*", hold)
        await (
            (await pinned(alice, "Rotate the cache credentials?"))
            .get_by_role("button", name="Approve")
            .tap()
        )
        assert (await task).answers[0].selected == ["Approve"]  # type: ignore[attr-defined]
        await stale.get_by_role("button", name="Keep planning").tap()
        held.set()  # (the route lets every later request through)
        note = bob.get_by_test_id("message").filter(has_text="already approved")
        await expect(note).to_contain_text("This plan was already approved by @alice.")
        await expect(note.get_by_test_id("only-you")).to_have_count(1)
        await expect(bob.get_by_test_id("toast")).to_have_count(0)
        await expect(alice.get_by_test_id("message").filter(has_text="already")).to_have_count(0)
        await note.scroll_into_view_if_needed()
        await bob.screenshot(path=tmp_path / "look-10-click-lost-phone.png")
        assert errors == [] and bob_errors == []


async def test_on_a_phone_a_long_menu_filters_as_you_type(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        regions = ["eu-west-1", "eu-west-2", "eu-central-1", "us-east-1", "us-east-2", "us-west-1",
                   "us-west-2", "ap-south-1", "ap-northeast-1", "sa-east-1"]  # fmt: skip
        options = [{"label": region} for region in regions]
        wire = {"questions": [{"id": "q", "question": "Which region?", "options": options}]}
        task = asked(runtime, wire, AskOptions())
        question = await pinned(page, "Which region?")
        search = question.get_by_test_id("select-filter")
        await search.fill("north")
        menu = question.locator("select")
        shown = menu.locator("option:not([hidden]):not([disabled])")
        await expect(shown).to_have_text(["ap-northeast-1"])
        await search.fill("west")
        await expect(shown).to_have_count(4)
        await page.screenshot(path=tmp_path / "look-11-menu-filter-phone.png")
        await search.fill("us-west-2")
        await search.press("Enter")
        assert (await task).answers[0].selected == ["us-west-2"]  # type: ignore[attr-defined]
        assert errors == []


async def test_on_a_phone_a_long_multi_select_menu_filters_as_you_type(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        regions = [f"{area}-{n}" for area in ("eu-west", "us-east", "us-west") for n in (1, 2)]
        regions += ["eu-central-1", "ap-south-1", "ap-northeast-1", "sa-east-1", "ca-central-1"]
        options = [{"label": region} for region in regions]
        question = {"id": "q", "question": "Which regions?", "multiSelect": True}
        task = asked(runtime, {"questions": [{**question, "options": options}]}, AskOptions())
        form = await pinned(page, "Which regions?")
        await form.get_by_test_id("multi-summary").tap()
        await form.get_by_role("checkbox", name="eu-west-1").check()
        search = form.get_by_test_id("select-filter")
        await search.fill("us-")
        shown = form.locator(".sk-multi-option:not([hidden])")
        await expect(shown).to_have_text(["us-east-1", "us-east-2", "us-west-1", "us-west-2"])
        await form.get_by_role("checkbox", name="us-west-2").check()
        await page.screenshot(path=tmp_path / "look-12-multi-menu-filter-phone.png")
        await search.fill("")
        await expect(shown).to_have_count(len(regions))
        await form.get_by_role("button", name="Submit", exact=True).tap()
        answer = (await task).answers[0]  # type: ignore[attr-defined]
        assert answer.selected == ["eu-west-1", "us-west-2"]
        assert errors == []


async def test_on_a_phone_a_saved_draft_leaves_no_note_behind_the_submit(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        options = [{"label": "Unit tests"}, {"label": "Lint"}]
        item = {"id": "q", "question": "Which checks?", "multiSelect": True, "options": options}
        task = asked(runtime, {"questions": [item]}, AskOptions())
        checks = await pinned(page, "Which checks?")
        await checks.get_by_label("Unit tests").check()
        await checks.get_by_role("button", name="Other…").tap()
        modal = page.get_by_test_id("modal")
        await expect(modal).to_contain_text("Only you see this until you press Submit")
        await expect(modal.get_by_test_id("modal-submit")).to_have_text("Save")
        await modal.locator("textarea").fill("Smoke test on staging")
        await page.screenshot(path=tmp_path / "look-12-draft-modal-phone.png")
        await modal.get_by_test_id("modal-submit").tap()
        await expect(modal).to_have_count(0)
        await checks.get_by_role("button", name="Submit", exact=True).tap()
        await expect(checks).to_contain_text("“Smoke test on staging”")
        assert (await task).answers[0].custom == "Smoke test on staging"  # type: ignore[attr-defined]
        await expect(page.get_by_test_id("only-you")).to_have_count(0)  # no note left behind
        await expect(page.locator("#messages")).not_to_contain_text("Press Submit")
        await page.screenshot(path=tmp_path / "look-13-form-sent-phone.png", full_page=True)
        assert errors == []
