"""An approval message, shaped like the dsh host's own approval panel: pure rendering.

Open: the reason as the headline, the tool, what it will run (the command for bash-like
tools, the path for write/edit) on a code line, and exactly two buttons: **Allow once**
(primary, behind a confirm dialog naming the command) and **Reject**. Final: the same
facts and who decided what ("Allowed once by @alice"), or how it ended elsewhere.
"""

from __future__ import annotations

import time
from typing import Any, Final

from adapters.slack import ids
from adapters.slack.blockkit import check_message
from adapters.slack.blockkit.limits import MAX_SECTION_TEXT
from adapters.slack.blocks import Rendered, render_final, render_open
from adapters.slack.mrkdwn import escape, mrkdwn, plain, shorten, shorten_escaped
from adapters.slack.outcomes import code_block, code_text, literal, one_line
from adapters.slack.record import ApprovalView, PendingRecord
from adapters.slack.rich import bold, rich_text
from bot.questions.errors import SLACK_LIMIT, UserQuestionError

__all__ = [
    "ALLOW_TEXT",
    "APPROVAL_ACTION_PATTERN",
    "REJECT_TEXT",
    "render_approval",
    "render_record",
]

ALLOW_TEXT: Final = "Allow once"
REJECT_TEXT: Final = "Reject"
APPROVAL_ACTION_PATTERN: Final = ids.APPROVAL_ACTION_PATTERN
_CODE_LIMIT: Final = MAX_SECTION_TEXT - 20
"""Room for the fences, their two guards (``code_block``) and ``Path: `` in one section."""
_CONFIRM_TEXT: Final = 300
_OUTCOME: Final = {
    "allowed-once": ":white_check_mark: Allowed once",
    "rejected": ":no_entry_sign: Rejected",
}


def _code(text: str) -> str:
    # Backticks in the text must not end the block early: broken up before shortening.
    return code_block(shorten_escaped(code_text(escape(text)), _CODE_LIMIT))


def _tool(name: str) -> str:
    """The tool's name on a code line: no escape exists for a backtick inside one, so a
    backtick in the name shows as ``ˋ`` (U+02CB) rather than ending the code early."""
    return escape(shorten(" ".join(name.split()), 200)).replace("`", "\u02cb")


def _facts(record: PendingRecord, view: ApprovalView) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    byline = []
    if record.is_open:
        byline.append(":lock: *Waiting for approval*")  # as the harness's own panel says
    if record.mention and record.is_open:
        byline.append(record.mention)  # validated by the configuration, never host text
    if record.label:
        byline.append(f"Asked by *{literal(one_line(record.label))}*")
    if byline:
        blocks.append({"type": "context", "elements": [mrkdwn(" · ".join(byline))]})
    # The host's reason as typed, bold by its style: a ``*`` in it cannot end the bold early.
    blocks.append(rich_text(bold(view.headline), limit=MAX_SECTION_TEXT))
    blocks.append({"type": "context", "elements": [mrkdwn(f"Tool: `{_tool(view.tool_name)}`")]})
    if view.command:
        blocks.append({"type": "section", "text": mrkdwn(_code(view.command))})
    elif view.path:
        blocks.append({"type": "section", "text": mrkdwn(f"Path: {_code(view.path)}")})
    return blocks


def _buttons(record: PendingRecord, view: ApprovalView) -> dict[str, Any]:
    what = view.command or view.path or f"the {view.tool_name} tool"
    confirm = {
        "title": plain("Allow once?"),
        "text": plain(shorten(f"Run with wider sandbox rights, this once: {what}", _CONFIRM_TEXT)),
        "confirm": plain(ALLOW_TEXT),
        "deny": plain("Cancel"),
    }
    return {
        "type": "actions",
        "block_id": ids.block_id(record.id, None, f"ap{record.version}"),
        "elements": [
            {
                "type": "button",
                "action_id": ids.approval_action_id("allow"),
                "text": plain(ALLOW_TEXT),
                "style": "primary",
                "value": "allowed-once",
                "confirm": confirm,
            },
            {
                "type": "button",
                "action_id": ids.approval_action_id("reject"),
                "text": plain(REJECT_TEXT),
                "value": "rejected",
            },
        ],
    }


def _ending(record: PendingRecord, view: ApprovalView) -> str:
    if record.state == "answered" and view.outcome is not None:
        line = _OUTCOME[view.outcome]
        if record.answered_by:
            line += f" by <@{record.answered_by}>"
    elif record.note:
        line = f":black_square_for_stop: {escape(record.note)}"
    else:
        line = ":warning: Failed" if record.state == "failed" else ":black_square_for_stop: Ended"
    return line


def render_approval(record: PendingRecord) -> Rendered:
    """The approval message for ``record`` as it stands (open with buttons, or final)."""
    view = record.approval
    if view is None:
        raise ValueError(f"request {record.id} is not an approval")
    blocks = _facts(record, view)
    who = f"{record.label}: " if record.label else ""
    if record.is_open:
        if record.note:
            blocks.append(
                {"type": "context", "elements": [mrkdwn(f":warning: {escape(record.note)}")]}
            )
        blocks.append(_buttons(record, view))
        text = escape(f"{who}Waiting for approval: {view.headline}")
    else:
        line = _ending(record, view)
        when = record.finished_at or time.time()
        fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
        stamp = f" · <!date^{int(when)}^{{date_short_pretty}} at {{time}}|{fallback}>"
        extra = f"\n{escape(record.note)}" if record.note and record.state == "answered" else ""
        blocks.append({"type": "context", "elements": [mrkdwn(line + stamp + extra)]})
        words = line.split(" ", 1)[1]
        text = f"{words}: {escape(who)}{escape(view.headline)}"
    text = shorten_escaped(text, 3000)
    problems = check_message(blocks, text)
    if problems:
        raise UserQuestionError(
            f"this approval cannot be shown within Slack's limits: {problems[0]}", SLACK_LIMIT
        )
    return Rendered(text, blocks)


def render_record(record: PendingRecord) -> Rendered:
    """The message for any record as it stands: an approval panel, or an open/final question."""
    if record.approval is not None:
        return render_approval(record)
    return render_open(record) if record.is_open else render_final(record)
