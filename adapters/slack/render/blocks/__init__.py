"""A pending record as Block Kit: the open message, its modals, its final form (pure)."""

from __future__ import annotations

from adapters.slack.render.blocks.message import render_final, render_open, render_stale
from adapters.slack.render.blocks.modals import (
    render_plan_modal,
    render_skip_modal,
    render_text_modal,
)
from adapters.slack.render.blocks.overflow import (
    CONTINUED,
    MAX_THREAD_REPLIES,
    THREAD_PART,
    split_text,
)
from adapters.slack.render.blocks.parts import Attachment, Rendered, answer_by
from adapters.slack.render.layout import MAX_TAP_OPTIONS, layout_of, plan_review_of

__all__ = [
    "CONTINUED",
    "MAX_TAP_OPTIONS",
    "MAX_THREAD_REPLIES",
    "THREAD_PART",
    "Attachment",
    "Rendered",
    "answer_by",
    "layout_of",
    "plan_review_of",
    "render_final",
    "render_open",
    "render_plan_modal",
    "render_skip_modal",
    "render_stale",
    "render_text_modal",
    "split_text",
]
