"""What a person sees, round 2 (issue 39), on a phone in the sandbox: who asked and who may
answer, a reminder that reaches the channel, a long plan that says how much is unseen.
Screenshots are kept in the test's temp folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from bot.app.runtime import Runtime
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionRequest
from tests.slack.render.test_distinct_labels import ROLLOUT
from tests.slack.render.test_long_plan_unseen import STEPS
from tests.slack.sandbox.test_sandbox_browser import (
    TEST_BUDGET,
    browser,
    open_page,
    pinned,
    runtime,
)

__all__ = ["browser", "runtime"]  # the fixtures, used by name

pytestmark = [pytest.mark.browser, pytest.mark.timeout(TEST_BUDGET + 30)]

PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True,
         "has_touch": True}  # fmt: skip


def asked(runtime: Runtime, wire: dict[str, object], options: AskOptions) -> asyncio.Task[object]:
    request = AskUserQuestionRequest.model_validate(wire)
    request.options = options
    return asyncio.ensure_future(runtime.service.ask(request))


async def test_on_a_phone_who_asked_the_reminder_and_the_unseen_plan(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        wire = {"questions": [{"id": "q", "question": "Ship 2.3.1?",
                               "options": [{"label": "Yes"}, {"label": "No"}]}]}  # fmt: skip
        task = asked(runtime, wire, AskOptions(asked_by="api", timeout=3, reminders=(2,)))
        question = await pinned(page, "Ship 2.3.1?")
        await expect(question).to_contain_text("Asked by the HTTP API")
        await expect(question).to_contain_text("Anyone here may answer")
        reminder = page.get_by_test_id("message").filter(has_text="Reminder: a question is still")
        await expect(reminder).to_have_count(1)  # at the top level of the channel
        await page.screenshot(path=tmp_path / "look-01-reminder-phone.png", full_page=True)
        with pytest.raises(UserQuestionError):
            await task

        options = [{"label": "Approve"}, {"label": "Keep planning"}]
        intent = {"kind": "plan-review", "approve": "Approve"}
        item = {"id": "plan", "question": "Approve?", "detail": STEPS, "intent": intent}
        plan = {"questions": [{**item, "header": "Plan review", "options": options}]}
        review = asked(runtime, plan, AskOptions(label="session 3f2a"))
        shown = await pinned(page, "Approve?")
        await expect(shown).to_contain_text("more characters are in the thread below")
        await expect(shown).to_contain_text("–40 and")
        unseen = shown.get_by_text("more characters are in the thread below")
        await unseen.scroll_into_view_if_needed()
        await page.screenshot(path=tmp_path / "look-02-long-plan-phone.png")
        review.cancel()
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        assert errors == []


async def test_on_a_phone_long_labels_are_numbered_on_their_buttons(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        options = [{"label": label} for label in ROLLOUT] + [{"label": "No"}]
        wire = {"questions": [{"id": "q", "question": "Roll out v2?", "options": options}]}
        task = asked(runtime, wire, AskOptions(label="payments agent"))
        question = await pinned(page, "Roll out v2?")
        buttons = [t.strip() for t in await question.locator(".sk-btn").all_inner_texts()]
        assert [b[:3] for b in buttons[:4]] == ["1. ", "2. ", "3. ", "4. "], buttons
        assert len(set(buttons)) == len(buttons)
        await page.screenshot(path=tmp_path / "look-03-numbered-labels-phone.png", full_page=True)
        await question.get_by_role("button", name="No", exact=True).tap()
        assert (await task).answers[0].selected == ["No"]  # type: ignore[attr-defined]
        assert errors == []


async def test_on_a_phone_the_feedback_box_comes_before_the_formatted_plan(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime, **PHONE)
        detail = "## Rollout\n\n1. **Risk:** drain node-1\n\n```bash\nkubectl drain node-1\n```"
        options = [{"label": "Approve"}, {"label": "Keep planning"}]
        intent = {"kind": "plan-review", "approve": "Approve"}
        item = {"id": "plan", "question": "Migrate?", "detail": detail, "intent": intent}
        task = asked(runtime, {"questions": [{**item, "options": options}]}, AskOptions())
        review = await pinned(page, "Migrate?")
        await expect(review).to_contain_text("Dismiss: the agent gets no answer.")
        await review.get_by_role("button", name="Decline with feedback…").tap()
        modal = page.get_by_test_id("modal")
        await expect(modal).to_contain_text("Risk:")
        box = await modal.locator("textarea").bounding_box()
        heading = await modal.get_by_text("Rollout", exact=True).bounding_box()
        assert box is not None and heading is not None and box["y"] < heading["y"]
        assert "##" not in await modal.inner_text() and "**" not in await modal.inner_text()
        await page.screenshot(path=tmp_path / "look-04-feedback-modal-phone.png")
        await modal.locator("textarea").fill("Add a rollback step.")
        await modal.get_by_test_id("modal-submit").tap()
        assert (await task).answers[0].custom == "Add a rollback step."  # type: ignore[attr-defined]
        assert errors == []
