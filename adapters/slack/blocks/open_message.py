"""The open question message: the questions, their widgets, Submit and Dismiss (pure).

How a request is laid out (tap buttons, a menu, a form, free text, a plan review) is
``layout.layout_of``; this module puts each layout's widgets under its questions and checks
the result against Block Kit's limits before anything is posted.
"""

from __future__ import annotations

from typing import Any

from adapters.slack import ids
from adapters.slack.blockkit import check_message
from adapters.slack.blockkit.limits import MAX_BLOCKS_MESSAGE, MAX_HEADER_TEXT
from adapters.slack.blocks.full_labels import options_blocks, options_thread
from adapters.slack.blocks.overflow import detail_blocks, detail_shares, thread_parts
from adapters.slack.blocks.parts import (
    byline_blocks,
    context,
    deadline_blocks,
    header_block,
    link_blocks,
    note_blocks,
    question_block,
    tally_blocks,
)
from adapters.slack.blocks.rendered import Block, Rendered, fallback
from adapters.slack.blocks.widgets import button, dismiss_button, draft_widget, menu_options
from adapters.slack.layout import Layout, layout_of, plan_review_of
from adapters.slack.mrkdwn import escape, plain, shorten
from adapters.slack.record import PendingRecord
from adapters.slack.review_view import revision_blocks
from bot.questions.errors import SLACK_LIMIT, UserQuestionError

__all__ = ["render_open"]


def render_open(record: PendingRecord) -> Rendered:
    """The open question message (and continuation messages for long details).

    Raises ``UserQuestionError`` (``SLACK_LIMIT``) when the request cannot be shown within
    Block Kit's limits; whatever it returns passes ``blockkit.check_message``. Options'
    full texts are listed in the message when they fit, else in the thread.
    """
    problems: list[Any] = []
    for inline in (True, False):
        rendered = _render_open(record, inline_options=inline)
        problems = check_message(rendered.blocks, rendered.text)
        for part in rendered.thread:
            problems.extend(check_message(part))
        if not problems:
            return rendered
    raise UserQuestionError(
        f"this request cannot be shown within Slack's limits: {problems[0]}", SLACK_LIMIT
    )


def _render_open(record: PendingRecord, *, inline_options: bool = True) -> Rendered:
    layout = layout_of(record.questions)
    rid, rev = record.id, record.version
    shown = detail_shares(record)
    blocks: list[Block] = [*byline_blocks(record), *deadline_blocks(record)]
    count = len(record.questions)
    revision_thread: list[list[Block]] = []

    if layout == "plan":
        question = record.questions[0]
        header = plain(question.header or "Plan review", MAX_HEADER_TEXT)
        blocks.append({"type": "header", "text": header})
        if record.revision is not None:
            revised, revision_thread = revision_blocks(record.revision, question.detail or "")
            blocks.extend(revised)
        blocks.append(question_block(question, 0, 1))
        blocks.extend(detail_blocks(shown[0], question.detail or ""))
        blocks.extend(options_blocks(question, layout, inline_options))
        blocks.extend(tally_blocks(record))
        blocks.append(_plan_actions(record))
    else:
        for index in range(count):
            blocks.extend(
                _question_blocks(record, layout, index, shown[index], count, inline_options)
            )
        if layout == "form":
            submit = button("Submit", "submit", "0")
            submit["style"] = "primary"
            blocks.append(
                {
                    "type": "actions",
                    "block_id": ids.block_id(rid, None, f"s{rev}"),
                    "elements": [submit, dismiss_button()],
                }
            )
            if count > 1:
                blocks.append(context("A question left unanswered is sent as skipped."))
    blocks.extend(note_blocks(record))
    blocks.extend(link_blocks(record))
    if len(blocks) > MAX_BLOCKS_MESSAGE:
        raise UserQuestionError(
            f"this request needs {len(blocks)} blocks; a Slack message holds at most "
            f"{MAX_BLOCKS_MESSAGE} (ask fewer questions at once)",
            SLACK_LIMIT,
        )
    thread, files = thread_parts(record, shown)
    thread.extend(revision_thread)
    if not inline_options:
        thread.extend(options_thread(record, layout))
    return Rendered(fallback(record), blocks, thread, files)


def _plan_actions(record: PendingRecord) -> Block:
    """A plan review's buttons: approve, decline (if the plan has one), feedback, dismiss."""
    review = plan_review_of(record.questions)
    assert review is not None
    options = record.questions[0].options or []
    approve = button(options[review.approve].label, "pick", ids.option_value(review.approve), 0)
    approve["style"] = "primary"
    buttons = [approve]
    if review.decline is not None:
        decline = button(options[review.decline].label, "pick", ids.option_value(review.decline), 1)
        decline["style"] = "danger"
        buttons.append(decline)
    buttons.append(button("Decline with feedback…", "text", "0"))
    buttons.append(dismiss_button())
    block_id = ids.block_id(record.id, 0, f"a{record.version}")
    return {"type": "actions", "block_id": block_id, "elements": buttons}


def _question_blocks(
    record: PendingRecord, layout: Layout, index: int, shown: str, count: int, inline: bool
) -> list[Block]:
    question = record.questions[index]
    rid, rev = record.id, record.version
    options = question.options or []
    blocks: list[Block] = []
    if question.header:
        blocks.append(header_block(question.header))
    blocks.append(question_block(question, index, count))
    blocks.extend(detail_blocks(shown, question.detail or ""))
    blocks.extend(options_blocks(question, layout, inline))
    elements: list[Block] = []
    if layout == "tap":
        elements = [
            button(option.label, "pick", ids.option_value(i), i) for i, option in enumerate(options)
        ]
        elements.append(button("Other…", "text", str(index)))
        elements.append(dismiss_button())
    elif layout == "menu":
        menu = {
            "type": "static_select",
            "action_id": ids.action_id("pick"),
            "placeholder": plain("Choose an option…"),
            **menu_options(question),
        }
        elements = [menu, button("Other…", "text", str(index)), dismiss_button()]
    elif layout == "text":
        answer = button("Answer…", "text", str(index))
        answer["style"] = "primary"
        elements = [answer, dismiss_button()]
    else:
        draft = record.draft(index)
        if options:
            elements.append(draft_widget(question, draft))
            elements.append(button("Other…", "text", str(index)))
        else:
            elements.append(button("Answer…", "text", str(index)))
        if draft.custom:
            blocks.append(context(f":pencil2: {escape(shorten(draft.custom, 2000))}"))
    blocks.append(
        {"type": "actions", "block_id": ids.block_id(rid, index, f"c{rev}"), "elements": elements}
    )
    return blocks
