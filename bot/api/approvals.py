"""Tool approvals over the HTTP API and MCP (``POST /v1/approvals``): the panel a harness's
approval gets, to the same approvers, decided ``allowed-once`` or ``rejected``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Self

from pydantic import Field, model_validator

from adapters.slack import ApprovalView, QuestionStatus
from bot.api.body import Callback, Label, Link, Where
from bot.questions.abort import AbortSignal
from bot.questions.models import AskOptions, WireModel

__all__ = ["ApprovalPost", "Approve", "same_approval"]

Approve = Callable[[ApprovalView, AskOptions, AbortSignal], Awaitable[QuestionStatus]]
"""Asks a tool approval (``SlackQuestionProvider.ask_approval`` with the operator's
approvers) and waits for its ending."""


class ApprovalPost(WireModel):
    """What an agent asks to run, and why: one approval, decided once."""

    tool: str = Field(
        min_length=1, max_length=200, description="The tool that would run (e.g. bash, write)."
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        max_length=100_000,
        description="The command the tool would run, shown whole (long ones in the thread).",
    )
    path: str | None = Field(
        default=None, min_length=1, max_length=4096, description="The file the tool would touch."
    )
    reason: str = Field(
        min_length=1, max_length=2000, description="Why the agent asks: the panel's headline."
    )
    destination: Where = None
    label: Label = None
    link: Link = None
    callback: Callback = None

    @model_validator(mode="after")
    def _names_what(self) -> Self:
        if self.command is None and self.path is None:
            raise ValueError("name the command or the path the tool would act on")
        return self

    def view(self) -> ApprovalView:
        """The panel this approval is shown as."""
        return ApprovalView(
            tool_name=self.tool, headline=self.reason, command=self.command, path=self.path
        )


def same_approval(asked: QuestionStatus, post: ApprovalPost, default_channel: str | None) -> bool:
    """Whether ``post`` asks what ``asked`` asked (a retry with its key, not a new request)."""
    where = post.destination
    channel = where.channel if where else default_channel
    thread_ts = where.thread_ts if where else None
    shown = asked.approval.model_copy(update={"outcome": None}) if asked.approval else None
    return (
        shown == post.view()
        and (asked.label, asked.link, asked.callback) == (post.label, post.link, post.callback)
        and (channel is None or (asked.channel, asked.thread_ts) == (channel, thread_ts))
    )
