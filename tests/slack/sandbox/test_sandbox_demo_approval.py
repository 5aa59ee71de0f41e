"""The demo's fourth step: a tool approval (Allow once / Reject), asked after its questions.

The bot runs in sandbox mode in-process, as ``python -m bot`` with no tokens runs it; the
tests act as the page does (``tests/slack/sandbox/test_sandbox_server.py``'s ``Page``). The
page asks to confirm "Allow once" itself (the button's ``confirm``, as Slack does; the browser test
clicks through it): over HTTP the click after the confirm is what reaches the bot.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.slack.sandbox.demo import DemoAgent
from bot.app.runtime import Runtime
from tests.slack.sandbox import test_sandbox_server as _server_tests
from tests.slack.sandbox.test_sandbox_server import (
    Page,
    element,
    elements,
    is_record,
    option_value,
    outcome_text,
)

runtime = _server_tests.runtime  # the fixtures of the sandbox server tests
page = _server_tests.page

Json = dict[str, Any]
HEADLINE = "run the release script"
SHOWN = "Run the release script"  # the panel writes the headline as a sentence
COMMAND = "./scripts/release.sh --tag v2.3.1"


def step_of(state: Json, step_id: str) -> Json:
    step: Json = next(s for s in state["demo"]["runs"][0]["steps"] if s["id"] == step_id)
    return step


async def finished_run(page: Page) -> Json:
    demo = await page.until(lambda s: not s["demo"]["running"] and s["demo"])
    run: Json = demo["runs"][0]
    return run


async def answer_the_three_questions(page: Page) -> None:
    """Plan review: Approve; multi-select: Unit tests, Submit; free text: "Northwind"."""
    plan = await page.message_with("Plan review")
    assert (await page.click(plan, "Approve"))[0] == 200
    checks = await page.message_with("Which checks should run")
    block_id, action_id = element(checks, "checkboxes")
    ticked = [[block_id, action_id, [option_value(checks, "Unit tests")]]]
    assert (await page.click(checks, "checkboxes", values=ticked))[0] == 200
    assert (await page.click(checks, "Submit", values=ticked))[0] == 200
    name = await page.message_with("What should the release be called?")
    # Not asked before the questions are answered: the approval is the run's last step.
    state = await page.state()
    assert step_of(state, "approval")["state"] == "pending"
    assert _server_tests.find_message(state, SHOWN) is None
    assert (await page.click(name, "Answer…"))[0] == 200
    view = await page.until(lambda s: s["view"])
    (field,) = [b for b in view["blocks"] if b["type"] == "input"]
    values = [[field["block_id"], field["element"]["action_id"], "Northwind"]]
    status, body = await page.post(
        "sandbox/submit", {"user": "alice", "view_id": view["id"], "values": values}
    )
    assert (status, body["ok"]) == (200, True)


@pytest.mark.slow
async def test_the_demo_ends_with_a_tool_approval_allowed_once(page: Page) -> None:
    status, body = await page.post("sandbox/demo", {})
    assert status == 200
    steps = body["demo"]["runs"][0]["steps"]
    assert [(s["id"], s["kind"]) for s in steps] == [
        ("plan", "question"),
        ("checks", "question"),
        ("name", "question"),
        ("approval", "approval"),
    ]
    assert steps[3]["question"] == f"bash: {HEADLINE}" and steps[3]["command"] == COMMAND
    await answer_the_three_questions(page)

    # The approval panel, asked by the demo agent: the tool, the command, Allow once behind
    # a confirm naming the command (the page shows it before sending the click), Reject.
    approval = await page.message_with(SHOWN)
    shown = json.dumps(approval["blocks"], ensure_ascii=False)
    assert "Tool: `bash`" in shown and COMMAND in shown and "demo agent" in shown
    buttons = {item["text"]["text"]: item for _, item in elements(approval)}
    assert list(buttons) == ["Allow once", "Reject"]
    confirm = buttons["Allow once"]["confirm"]
    assert confirm["title"]["text"] == "Allow once?" and COMMAND in confirm["text"]["text"]
    assert step_of(await page.state(), "approval")["state"] == "waiting"

    assert (await page.click(approval, "Allow once"))[0] == 200
    run = await finished_run(page)
    assert [(s["id"], s["state"], s["error"]) for s in run["steps"]] == [
        ("plan", "answered", None),
        ("checks", "answered", None),
        ("name", "answered", None),
        ("approval", "answered", None),
    ]
    assert run["steps"][3]["decision"] == "allowed-once"
    record = await page.until(
        lambda s: next(
            (m for m in s["messages"] if m["ts"] == approval["ts"] and is_record(m)), None
        )
    )
    assert "Allowed once by" in outcome_text(record) and "@alice" in outcome_text(record)


@pytest.mark.slow
async def test_a_rejected_tool_approval_reaches_the_demo(page: Page) -> None:
    await page.post("sandbox/demo", {})
    # Dismissed questions fail their steps; the run goes on to the approval.
    for text in ("Plan review", "Which checks should run", "What should the release be called?"):
        question = await page.message_with(text)
        assert (await page.click(question, "Dismiss", user="carol"))[0] == 200
    approval = await page.message_with(SHOWN)
    # Anyone in the sandbox's channel may decide: the demo names no approvers.
    assert (await page.click(approval, "Reject", user="bob"))[0] == 200
    run = await finished_run(page)
    assert [(s["id"], s["state"], (s["error"] or {}).get("code")) for s in run["steps"]] == [
        ("plan", "failed", "ASK_CANCELLED"),
        ("checks", "failed", "ASK_CANCELLED"),
        ("name", "failed", "ASK_CANCELLED"),
        ("approval", "answered", None),
    ]
    assert run["steps"][3]["decision"] == "rejected"
    ended = await page.until(
        lambda s: next(
            (m for m in s["messages"] if m["ts"] == approval["ts"] and is_record(m)), None
        )
    )
    assert "Rejected by" in outcome_text(ended) and "@bob" in outcome_text(ended)


async def test_without_an_approval_asker_the_demo_asks_its_three_questions(
    runtime: Runtime,
) -> None:
    """Library use: ``DemoAgent(service)`` alone leaves the approval step out."""
    agent = DemoAgent(runtime.service)
    try:
        run = agent.start()
        assert [step.to_dict()["id"] for step in run.steps] == ["plan", "checks", "name"]
    finally:
        await agent.aclose()
    with_approvals = DemoAgent(runtime.service, approvals=runtime.provider)
    try:
        (*_, last) = with_approvals.start().steps
        assert last.to_dict()["id"] == "approval"
        assert last.to_dict()["question"] == f"bash: {HEADLINE}"
    finally:
        await with_approvals.aclose()
