"""A long plan cut inside a code block: the message closes the block before its "continued
in the thread" line, and each thread reply reopens it (same fence, same info string) and
closes it where the reply ends inside it, so code never reads as prose nor prose as code.

Before, the message ended inside an open fence (the "continued" line drawn as code) and the
reply began mid-code with no fence: ``# step 53: make sure *all* …`` became a heading.
"""

from __future__ import annotations

from typing import Any

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.message import render_open
from adapters.slack.render.blocks.overflow import CONTINUED, detail_blocks, open_fence
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.models import AskUserQuestionItem
from tests.slack.asks.test_slack_provider import plan
from tests.slack_harness import SlackHarness, until

STEPS = "\n".join(
    f"# step {i}: make sure *all* replicas are drained\nkubectl drain node-{i} --ignore-daemonsets"
    for i in range(150)
)
PLAN = (
    "# Migrate the cluster\n\n"
    + "Some context. " * 300
    + "\n\n```bash\n"
    + STEPS
    + "\n```\n\nAfter the script: **announce in #ops**, then close the ticket.\n"
)


def fences(text: str) -> list[str]:
    """The fence lines of ``text``, in order."""
    return [line for line in text.split("\n") if line.lstrip(" ").startswith(("```", "~~~"))]


def review(detail: str) -> PendingRecord:
    item = AskUserQuestionItem.model_validate(plan(detail)["questions"][0])
    return PendingRecord(id="0123456789abcdef0123", owner="p", channel="C1", questions=[item])


def test_open_fence_follows_commonmark_fences() -> None:
    assert open_fence("text") is None
    assert open_fence("```bash\nls") == ("```", "bash")
    assert open_fence("```bash\nls\n```") is None
    assert open_fence("~~~~ py\nx = 1\n~~~") == ("~~~~", "py")  # shorter run: not closed
    assert open_fence("````\n```\nstill code") == ("````", "")
    assert open_fence("``` a`b\nnot code") is None  # a backtick in the info: no fence
    assert open_fence("```\ncode\n``` trailing") == ("```", "")  # text after: no closer
    assert open_fence("    ```\nindented four: code, not a fence") is None


def test_a_cut_inside_a_code_block_closes_it_before_the_continued_line() -> None:
    (block,) = detail_blocks("Intro\n\n```bash\nkubectl drain node-1", PLAN)
    text = block["text"]
    assert CONTINUED.sub("", text).endswith("kubectl drain node-1\n```")
    after = detail_blocks("Intro\n\n```bash\nls\n```\n\nAfter", PLAN)[0]["text"]
    assert CONTINUED.search(after) and CONTINUED.sub("", after).endswith("After")


def test_the_message_and_its_thread_reply_each_keep_their_code_blocks_whole() -> None:
    rendered = render_open(review(PLAN))
    assert check_message(rendered.blocks, rendered.text) == []
    (shown,) = [b["text"] for b in rendered.blocks if b["type"] == "markdown"]
    assert fences(shown) == ["```bash", "```"]
    assert CONTINUED.search(shown) and CONTINUED.sub("", shown).endswith("```")
    assert len(rendered.thread) == 1
    reply = rendered.thread[0][1]["text"]
    assert reply.startswith("```bash\n# step ")
    assert fences(reply) == ["```bash", "```"]
    assert reply.endswith("then close the ticket.\n")


def test_code_across_several_replies_is_reopened_and_closed_in_each() -> None:
    long_steps = "\n".join(f"echo step {i} of the long migration script" for i in range(900))
    detail = "Context. " * 1200 + "\n\n~~~sh\n" + long_steps + "\n~~~\n\nDone.\n"
    rendered = render_open(review(detail))
    assert check_message(rendered.blocks, rendered.text) == []
    replies: list[str] = [message[1]["text"] for message in rendered.thread]
    assert len(replies) >= 2
    for reply in replies[:-1]:
        assert fences(reply)[-1] == "~~~", reply[-80:]
    for reply in replies[1:]:
        assert reply.startswith("~~~sh\n")
    for reply in replies:
        assert len(fences(reply)) % 2 == 0
    for message in rendered.thread:
        assert check_message(message, "continued") == []


async def test_posted_through_slack_the_code_reads_as_code_in_message_and_thread() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan(PLAN))
        message = await h.posted()
        (shown,) = [b["text"] for b in message.blocks if b["type"] == "markdown"]
        assert fences(shown) == ["```bash", "```"]
        replies: list[Any] = await until(
            lambda: [
                m
                for ms in h.slack.workspace.messages.values()
                for m in ms
                if m.thread_ts == message.ts and m.ts != message.ts
            ],
            what="the plan's thread reply",
        )
        (text,) = [b["text"] for b in replies[0].blocks if b["type"] == "markdown"]
        assert text.startswith("```bash\n# step ")
        task.cancel()
