"""An approval message in the sandbox page, in a real browser (screenshots in the temp folder).

The panel a person sees: the reason, the tool, the command on a code line, Allow once
(primary) behind a confirm dialog naming the command, and Reject; then the record.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import Browser, expect

from adapters.slack.model.record import ApprovalView
from bot.app.runtime import Runtime
from bot.questions.models import AskOptions
from tests.slack.sandbox import test_sandbox_browser as _browser_module
from tests.slack.sandbox.test_sandbox_browser import TEST_BUDGET, open_page, pinned

pytestmark = _browser_module.pytestmark
runtime = _browser_module.runtime  # the fixtures of the sandbox browser tests
browser = _browser_module.browser

COMMAND = "echo escalated-ok > /srv/outside.txt && cat /srv/outside.txt"
REASON = (
    "escalate sandbox to danger-full-access: The user asked for a file under /srv, which is "
    "outside the workspace."
)


async def test_an_approval_panel_allowed_once_in_the_browser(
    runtime: Runtime, browser: Browser, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_BUDGET):
        page, errors = await open_page(browser, runtime)
        view = ApprovalView(tool_name="bash", headline=REASON, command=COMMAND)
        options = AskOptions(key="dsh:browser-approval", label="session 3f2a9c1e")
        decided = asyncio.ensure_future(runtime.provider.ask_approval(view, options=options))
        panel = await pinned(page, "escalate sandbox")
        await expect(panel).to_contain_text(COMMAND)
        await expect(panel).to_contain_text("Tool: bash")
        await expect(panel).to_contain_text("Waiting for approval")
        await expect(panel).to_contain_text("session 3f2a9c1e")
        buttons = panel.locator(".msg-main").get_by_role("button")
        await expect(buttons).to_have_text(["Allow once", "Reject"])
        await page.screenshot(path=tmp_path / "approval-01-open.png")

        await panel.get_by_role("button", name="Allow once").click()
        confirm = page.get_by_test_id("confirm")
        await expect(confirm).to_contain_text("Allow once?")
        await expect(confirm).to_contain_text(COMMAND)
        await page.screenshot(path=tmp_path / "approval-02-confirm.png")
        await confirm.get_by_test_id("confirm-ok").click()

        record = await asyncio.wait_for(decided, 10)
        assert (record.state, record.decision) == ("answered", "allowed-once")
        await expect(panel).to_contain_text("Allowed once by")
        await expect(panel.locator(".msg-main").get_by_role("button")).to_have_count(0)
        await page.screenshot(path=tmp_path / "approval-03-allowed.png")
        assert errors == []
    print(tmp_path)
