"""On a phone in the sandbox (issue 39, item 2): a plan longer than its message is read
whole in a modal and approved from its end; the record says it was opened. Screenshots
are kept in the test's temp folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from bot.app.runtime import Runtime
from bot.questions.models import AskOptions
from tests.slack.render.test_long_plan_unseen import STEPS
from tests.slack.sandbox.test_look_browser import PHONE, asked
from tests.slack.sandbox.test_sandbox_browser import (
    STEP_TIMEOUT_MS,
    TEST_BUDGET,
    browser,
    open_page,
    pinned,
    runtime,
)

__all__ = ["browser", "runtime"]  # the fixtures, used by name

pytestmark = [pytest.mark.browser, pytest.mark.timeout(TEST_BUDGET + 30)]


async def test_on_a_phone_the_whole_plan_is_read_in_a_modal_and_approved_there(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        options = [{"label": "Approve"}, {"label": "Keep planning"}]
        intent = {"kind": "plan-review", "approve": "Approve"}
        item = {"id": "plan", "question": "Approve the migration?", "detail": STEPS}
        wire = {"questions": [{**item, "header": "Plan review", "options": options,
                               "intent": intent}]}  # fmt: skip
        task = asked(runtime, wire, AskOptions(label="session 3f2a"))
        review = await pinned(page, "Approve the migration?")
        read = review.get_by_role("button", name="Read the whole plan")
        await read.scroll_into_view_if_needed()
        await page.screenshot(path=tmp_path / "plan-modal-00-message-phone.png")
        await read.tap()
        modal = page.get_by_test_id("modal")
        await expect(modal).to_contain_text("The whole plan", timeout=STEP_TIMEOUT_MS)
        await expect(modal).to_contain_text("1. Step 1: migrate shard 1")
        await page.screenshot(path=tmp_path / "plan-modal-01-top-phone.png")
        last = modal.get_by_text("40. Step 40: migrate shard 40", exact=False)
        await expect(last).to_have_count(1)  # the last step, in the modal itself
        approve = modal.get_by_role("button", name="Approve", exact=True)
        await approve.scroll_into_view_if_needed()
        await expect(modal.get_by_role("button", name="Decline with feedback…")).to_be_visible()
        await page.screenshot(path=tmp_path / "plan-modal-02-end-phone.png")
        await approve.tap()
        said = modal.get_by_text("after opening the whole plan")
        await said.scroll_into_view_if_needed()
        await page.screenshot(path=tmp_path / "plan-modal-03-approved-phone.png")
        assert (await task).answers[0].selected == ["Approve"]  # type: ignore[attr-defined]
        await page.get_by_test_id("modal-close").tap()
        await expect(review).to_contain_text("Approved by", timeout=STEP_TIMEOUT_MS)
        await expect(review).to_contain_text("after opening the whole plan")
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        assert errors == []
