"""An approval message, shaped like the dsh host's own approval panel: pure rendering."""

from __future__ import annotations

import re
import time
from typing import Final

from adapters.slack.blockkit import MAX_CONFIRM_TEXT, MAX_SECTION_TEXT
from adapters.slack.model import ids
from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.render.blocks import parts
from adapters.slack.render.blocks.message import render_final, render_open
from adapters.slack.render.blocks.options import button, confirmation
from adapters.slack.render.blocks.overflow import MAX_THREAD_REPLIES, split_text
from adapters.slack.render.mrkdwn import escape, mrkdwn, reveal, shorten, shorten_escaped
from adapters.slack.render.outcomes import IN_FLIGHT, date, literal, one_line
from adapters.slack.render.rich import Block, bold, rich_text, words

ALLOW_TEXT: Final = "Allow once"
_CODE_LIMIT: Final = MAX_SECTION_TEXT - 20
"""Room for the fences, their two guards (``_code``) and ``Path: `` in one section."""
_PER_REPLY: Final = 3
"""Code boxes of ``MAX_SECTION_TEXT`` characters per thread reply (well within the budget)."""
_OUTCOME: Final = {
    "allowed-once": ":white_check_mark: Allowed once",
    "rejected": ":no_entry_sign: Rejected",
}


_BACKTICK_RUN: Final = re.compile(r"`(?=`)")
_ZWSP: Final = "\u200b"


def _code(text: str) -> str:
    """``text`` escaped in a code block only the bot's own fences open and close: a zero-width
    space between two backticks, and before (after) a backtick it starts (ends) with."""
    safe = _BACKTICK_RUN.sub(f"`{_ZWSP}", escape(text))
    return f"```{_ZWSP * safe.startswith('`')}{safe}{_ZWSP * safe.endswith('`')}```"


def _target(view: ApprovalView) -> tuple[str, str] | None:
    """What the approval runs or writes, and its noun (``command``, ``path``), if any."""
    if view.command:
        return view.command, "command"
    if view.path:
        return view.path, "path"
    return None


def _whole(view: ApprovalView) -> bool:
    """Whether the message shows the command (or path) whole, in one section."""
    target = _target(view)
    return target is None or len(_code(target[0])) <= _CODE_LIMIT


def _code_blocks(text: str, noun: str, prefix: str) -> list[Block]:
    """The command (or path) in code: whole, or its ends and how much is in the thread."""
    head, tail = parts.ends(text, _CODE_LIMIT, lambda t: len(_code(t)))
    if not tail:
        return [parts.section(f"{prefix}{_code(head)}")]
    gap = parts.left_out(len(text) - len(head) - len(tail))
    marker = f":warning: _{gap}_ The full {noun} is in the thread below."
    return [
        parts.section(f"{prefix}{_code(head)}"),
        parts.context(marker),
        parts.section(_code(tail)),
    ]


def _thread(view: ApprovalView) -> tuple[list[list[Block]], list[parts.Attachment]]:
    """The whole command (or path) in the thread, when the message shows only its ends."""
    target = _target(view)
    if target is None or _whole(view):
        return [], []
    text, noun = reveal(target[0]), target[1]
    chunks = split_text(text, MAX_SECTION_TEXT)
    groups = [chunks[i : i + _PER_REPLY] for i in range(0, len(chunks), _PER_REPLY)]
    if len(groups) > MAX_THREAD_REPLIES:
        comment = (
            f"The full {noun} to allow ({len(text):,} characters, {parts.size_of(text)}), as sent."
        )
        return [], [parts.Attachment(f"{noun}.txt", f"The full {noun}", text, comment)]
    replies: list[list[Block]] = []
    for n, group in enumerate(groups, start=1):
        caption = f"The full {noun} to allow, as sent ({n}/{len(groups)}):"
        boxes = [{"type": "rich_text_preformatted", "elements": [words(chunk)]} for chunk in group]
        replies.append([parts.context(caption), {"type": "rich_text", "elements": boxes}])
    return replies, []


def _tool(name: str) -> str:
    """The tool's name on a code line, a backtick shown as ``ˋ`` (none can be escaped there)."""
    return escape(shorten(" ".join(name.split()), 200)).replace("`", "\u02cb")


def _facts(record: PendingRecord, view: ApprovalView) -> list[Block]:
    blocks: list[Block] = []
    byline = [":lock: *Waiting for approval*"] if record.is_open else []  # the harness's words
    if record.mention and record.is_open:
        byline.append(record.mention)  # validated by the configuration, never host text
    if record.label:
        byline.append(f"Asked by *{literal(one_line(record.label))}*")
    if byline:
        blocks.append({"type": "context", "elements": [mrkdwn(" · ".join(byline))]})
    # The host's reason as typed, bold by its style: a ``*`` in it cannot end the bold early.
    headline = view.headline[:1].upper() + view.headline[1:]  # a sentence, as the rest read
    blocks.append(rich_text(bold(headline), limit=MAX_SECTION_TEXT))
    said = [mrkdwn(f"Tool: `{_tool(view.tool_name)}`")]
    if view.outcome is None:
        said.append(mrkdwn("*Allow once* runs it this once with wider sandbox rights"))
    blocks.append({"type": "context", "elements": said})
    blocks.extend(parts.hidden_notice(view.headline, view.tool_name, view.command, view.path))
    if target := _target(view):
        blocks.extend(_code_blocks(*target, "Path: " if target[1] == "path" else ""))
    return blocks


def _confirm_text(view: ApprovalView) -> str:
    """The confirm dialog's text: the command whole, or its ends and where the whole is."""
    intro = "Run with wider sandbox rights, this once: "
    target = _target(view)
    if target is None:
        return shorten(f"{intro}the {view.tool_name} tool", MAX_CONFIRM_TEXT)
    text, noun = reveal(target[0]), target[1]
    if len(intro) + len(text) <= MAX_CONFIRM_TEXT:
        return intro + text
    where = "the thread" if not _whole(view) else "the message"
    note = f" (the full {noun} is in {where})"
    head, gap, tail = parts.abridged(text, MAX_CONFIRM_TEXT - len(intro) - len(note))
    return f"{intro}{head} {gap} {tail}{note}"


def _buttons(record: PendingRecord, view: ApprovalView) -> Block:
    asked = confirmation("Allow once?", _confirm_text(view), ALLOW_TEXT, "Cancel")
    allow = button(ALLOW_TEXT, ids.approval_action_id("allow"), "allowed-once", "primary", asked)
    reject = button("Reject", ids.approval_action_id("reject"), "rejected")
    return parts.actions(record, None, "ap", [allow, reject])


def _ending(record: PendingRecord, view: ApprovalView) -> str:
    by = f" by <@{record.answered_by}>" if record.answered_by else ""
    if record.state == "answered" and record.in_flight:
        return f":outbox_tray: Sent{by}: {IN_FLIGHT}"
    if record.state == "answered" and view.outcome is not None:
        return _OUTCOME[view.outcome] + by
    if record.note:
        return f":black_square_for_stop: {escape(record.note)}"
    return ":warning: Failed" if record.state == "failed" else ":black_square_for_stop: Ended"


def render_approval(record: PendingRecord) -> parts.Rendered:
    """The approval message for ``record`` as it stands (open with buttons, or final)."""
    view = record.approval
    assert view is not None, "render_record sends only approvals here"
    blocks = _facts(record, view)
    who = f"{record.label}: " if record.label else ""
    if record.is_open:
        if record.note:
            blocks.append(parts.context(f":warning: {escape(record.note)}"))
        blocks.append(_buttons(record, view))
        text = escape(f"{who}Waiting for approval: {view.headline}")
    else:
        line = _ending(record, view)
        stamp = f" · {date(record.finished_at or time.time())}"
        extra = f"\n{escape(record.note)}" if record.note and record.state == "answered" else ""
        blocks.append({"type": "context", "elements": [mrkdwn(line + stamp + extra)]})
        words = line.split(" ", 1)[1]
        text = f"{words}: {escape(who)}{escape(view.headline)}"
    text = shorten_escaped(text, parts.MAX_FALLBACK_TEXT)
    thread, files = _thread(view)
    return parts.checked(parts.Rendered(text, blocks, thread, files), "approval")


def render_record(record: PendingRecord) -> parts.Rendered:
    """The message for any record as it stands: an approval panel, or an open/final question."""
    if record.approval is not None:
        return render_approval(record)
    return render_open(record) if record.is_open else render_final(record)
