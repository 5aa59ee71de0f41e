"""Pure rendering: a pending record -> Block Kit (the open message, its modal, its record).

Nothing here does I/O. Questions and answers are shown as typed, in ``rich_text`` (bold
by style, never by ``*…*`` that their own text could break; see ``rich``); every other
piece of asker-provided text goes through ``escape`` and into ``verbatim`` mrkdwn, a
``markdown`` block, or ``plain_text``. Labels are shortened for display only (the answer
maps back by index, never by shown text), and whatever is shortened on a widget is listed
in full above it. How a request is laid out is ``layout.layout_of``; how an ending is
worded is ``outcomes``.

One idea a module:

- ``parts``: the blocks every rendering shares (the question as typed, its header, who
  asked, the deadline, the asker's link, the note, a review's tally);
- ``widgets``: option buttons, menus, radio buttons and checkboxes, Dismiss;
- ``full_labels``: the full text of whatever a widget shortens, above it or in the thread;
- ``overflow``: long details and plans continued in the thread (or as files);
- ``open_message``: the open question message; ``final``: the record of its outcome;
- ``modals``: the free-text modal and the empty-Submit confirmation;
- ``rendered``: what rendering returns (``Rendered``, ``Attachment``).
"""

from __future__ import annotations

from adapters.slack.render.blocks.final import answer_summary, render_final, render_stale
from adapters.slack.render.blocks.modals import render_skip_modal, render_text_modal
from adapters.slack.render.blocks.open_message import render_open
from adapters.slack.render.blocks.overflow import (
    CONTINUED,
    DETAIL_BUDGET,
    MAX_THREAD_REPLIES,
    THREAD_PART,
    split_text,
)
from adapters.slack.render.blocks.parts import answer_by
from adapters.slack.render.blocks.rendered import Attachment, Rendered
from adapters.slack.render.layout import (
    MAX_TAP_OPTIONS,
    Layout,
    PlanReview,
    layout_of,
    plan_review_of,
)

__all__ = [
    "CONTINUED",
    "DETAIL_BUDGET",
    "MAX_TAP_OPTIONS",
    "MAX_THREAD_REPLIES",
    "THREAD_PART",
    "Attachment",
    "Layout",
    "PlanReview",
    "Rendered",
    "answer_by",
    "answer_summary",
    "layout_of",
    "plan_review_of",
    "render_final",
    "render_open",
    "render_skip_modal",
    "render_stale",
    "render_text_modal",
    "split_text",
]
