"""The modals a question opens: free text (Other…, Answer…, plan feedback), an empty
Submit's confirmation, the whole plan (pure)."""

from __future__ import annotations

import re
from typing import Final

from adapters.slack import blockkit
from adapters.slack.model import ids
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.message import outcome_line, plan_actions
from adapters.slack.render.blocks.overflow import open_fence, reopened, split_text
from adapters.slack.render.blocks.parts import context, question_block, section
from adapters.slack.render.layout import layout_of
from adapters.slack.render.mrkdwn import escape, plain, reveal, shorten, shorten_escaped
from adapters.slack.render.review_view import tally_blocks
from adapters.slack.render.rich import Block

MODAL_DETAIL: Final = 1500
"""Characters of a question's detail shown in its modal (the message has all of it)."""

TAKE_BACK_HINT: Final = "Leave it empty and press Save to take your text back."
"""Under a form question's saved text: how to take it back."""
FORM_DRAFT: Final = (
    "Only you see this until you press Submit on the message, which sends it with your "
    "other choices."
)
"""What a form question's Save does (a draft of the person's own, not an answer yet)."""


def render_skip_modal(record: PendingRecord, reply_url: str | None = None) -> Block:
    """The confirmation an empty Submit asks for: "Submit with nothing selected?"."""
    what = "questions were" if len(record.questions) > 1 else "question was"
    blocks = [
        {"type": "section", "text": plain("Submit with nothing selected?")},
        {"type": "section", "text": plain(f"The asker is told the {what} skipped.")},
    ]
    return _modal(
        record, 0, "Nothing selected", "Go back", blocks, "skip", "Submit empty", reply_url
    )


def render_text_modal(
    record: PendingRecord, index: int, user: str | None = None, reply_url: str | None = None
) -> Block:
    """The modal that collects free text for question ``index`` (Other…, Answer…, feedback)."""
    question = record.questions[index]
    layout = layout_of(record.questions)
    feedback = layout == "plan"
    words = ("What should change?", "Plan feedback", "Decline")
    prompt, title, submit = words if feedback else ("Your answer", "Your answer", "Send")
    element: Block = {
        "type": "plain_text_input",
        "action_id": ids.action_id("text"),
        "multiline": True,
        "max_length": blockkit.MAX_INPUT_LENGTH,
    }
    current = record.draft(index, user).custom or record.draft(index).custom
    if current:
        element["initial_value"] = current[: blockkit.MAX_INPUT_LENGTH]
    blocks: list[Block] = [question_block(question, 0, 1)]
    detail = (question.detail or "").strip()
    if detail and feedback:
        blocks.append(section(plan_mrkdwn(detail, MODAL_DETAIL)))
    elif detail:
        detail = reveal(detail)  # measured as shown
        if len(detail) > MODAL_DETAIL:
            detail = shorten(detail, MODAL_DETAIL) + "\n(See the message for the rest.)"
        blocks.append({"type": "section", "text": plain(detail)})
    field: Block = {
        "type": "input",
        "block_id": ids.block_id(record.id, index, "in"),
        "label": plain(prompt),
        "element": element,
    }
    if layout == "form":  # saved, not sent: said here, so no note is left to go stale
        submit = "Save"
        field["hint"] = plain(f"{FORM_DRAFT} {TAKE_BACK_HINT}" if current else FORM_DRAFT)
        # Slack sends no empty required input: left optional, emptying the box and pressing
        # Save takes the saved text back (one form question among several).
        if current:
            field["optional"] = True
    blocks.insert(1 if feedback else len(blocks), field)  # feedback: the box before the plan
    return _modal(record, index, title, "Cancel", blocks, "text", submit, reply_url)


_FENCES: Final = 8
"""What a part's reopened and closed code fence add at most (``plan_mrkdwn``'s fences)."""


def render_plan_modal(record: PendingRecord, note: str | None = None) -> Block:
    """The plan whole in sections (as many as a modal holds), then Approve and Decline or its
    outcome; ``note``: why a click in it changed nothing (escaped mrkdwn)."""
    question, plan = record.questions[0], record.questions[0].detail or ""
    tail = [*([context(note)] if note else []), *tally_blocks(record)]
    ended = not record.is_open
    tail.append(context(outcome_line(record)) if ended else plan_actions(record, whole=True))
    parts = split_text(plan, blockkit.MAX_SECTION_TEXT - _FENCES, escaped=True)
    room = blockkit.MAX_BLOCKS_MODAL - 1 - len(tail)
    parts = parts if len(parts) <= room else parts[: room - 1]
    blocks, carry, done = [question_block(question, 0, 1)], "", 0
    for part in parts:
        drawn = reopened(carry, part)
        blocks.append(section(plan_mrkdwn(drawn)))
        fence, done = open_fence(carry + part), done + len(part)
        carry = f"{fence[0]}{fence[1]}\n" if fence else ""  # the fence the next part is in
    if done < len(plan):
        rest = len(plan) - done
        blocks.append(context(f"_… {rest:,} more characters, more than a modal holds, "
                              "are in the thread of the plan's message._"))  # fmt: skip
    return _modal(record, 0, "The whole plan", "Close", [*blocks, *tail])


_HEADING: Final = re.compile(r" {0,3}#{1,6} +(.*?)(?: +#+)? *")
_BULLET: Final = re.compile(r"^( *)[-*+] ")
_STRONG: Final = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")


def plan_mrkdwn(plan: str, limit: int | None = None) -> str:
    """A Markdown plan as escaped mrkdwn for a modal (bold headings, • bullets), cut at
    ``limit`` characters as shown (escaped, hiding characters revealed), if given."""
    lines: list[str] = []
    fence, size, cut = False, 0, False
    for line in escape(plan).split("\n"):
        if line.lstrip(" ").startswith(("```", "~~~")):
            opens, line = not fence, "```"
        elif not fence and (heading := _HEADING.fullmatch(line)):
            opens, line = fence, f"*{heading.group(1)}*"
        elif not fence:
            bullets = _BULLET.sub(r"\1• ", line)
            opens, line = fence, _STRONG.sub(lambda m: f"*{m.group(1) or m.group(2)}*", bullets)
        else:
            opens = fence
        if limit is not None and size + len(line) > limit:
            cut = True
            if limit - size > 1:
                lines.append(shorten_escaped(line, limit - size))
            break
        lines.append(line)
        size, fence = size + len(line) + 1, opens
    rest = "\n_(The rest of the plan is in the message.)_" if cut else ""
    return "\n".join(lines) + ("\n```" if fence else "") + rest


def _modal(
    record: PendingRecord,
    index: int,
    title: str,
    close: str,
    blocks: list[Block],
    kind: ids.ViewKind | None = None,
    submit: str | None = None,
    reply_url: str | None = None,
) -> Block:
    """A modal of question ``index``, carrying ``reply_url`` in its ``external_id``."""
    view: Block = {
        "type": "modal",
        "private_metadata": ids.private_metadata(record.id, index),
        "title": plain(title, blockkit.MAX_MODAL_TITLE),
        "close": plain(close, blockkit.MAX_MODAL_CLOSE),
        "blocks": blocks,
    }
    if kind is not None:
        view["callback_id"] = ids.callback_id(kind)
    if submit is not None:
        view["submit"] = plain(submit, blockkit.MAX_MODAL_SUBMIT)
    if (external := ids.external_id(reply_url)) is not None:
        view["external_id"] = external
    return view
