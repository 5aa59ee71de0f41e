"""What a request starts as: where it is asked (``Destination``), what it gets by default
(``AskDefaults``), its team review and revision, and the callback it is owed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.synchroniser import SLACK_FAILURES
from adapters.slack.model import ids
from adapters.slack.model.audit_trail import approval_digest, shown_digest
from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.model.tally import Revision, combined_feedback
from adapters.slack.render.layout import plan_review_of
from adapters.slack.render.messages import NOT_A_PLAN_REVIEW, unknown_revised
from adapters.slack.stores import PendingStore
from bot.questions import AskOptions, AskUserQuestionItem, AskUserQuestionRequest, UserQuestionError
from bot.questions.errors import BAD_CALLBACK, BAD_REVIEW

_log = logging.getLogger("adapters.slack")


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request is posted: a channel id or user id (a DM), optionally in a thread."""

    channel: str
    thread_ts: str | None = None


DestinationHook = Callable[[AskUserQuestionRequest], Destination | None]
"""Chooses a destination per request (``None``: the provider's default)."""


@dataclass(slots=True)
class AskDefaults:
    """What every request gets unless its ``AskOptions`` say otherwise."""

    destination: Destination
    allowed_users: list[str] | None = None
    allowed_usergroups: list[str] | None = None
    mention: str | None = None
    choose: DestinationHook | None = None
    timeout: float | None = None
    reminders: tuple[float, ...] = ()
    escalate_after: float | None = None
    escalate_to: str | None = None
    remind: tuple[str, ...] = ()

    def where(self, options: AskOptions, request: AskUserQuestionRequest | None) -> Destination:
        """A request's destination: its options, else the hook (a question), else the default."""
        if options.channel:
            return Destination(options.channel, options.thread_ts)
        if self.choose is not None and request is not None:
            chosen = self.choose(request)
            if chosen is not None:
                return chosen
        return self.destination

    def question_record(
        self, request: AskUserQuestionRequest, options: AskOptions, *, now: float
    ) -> PendingRecord:
        """The record a question starts as (its id still to be given), ``options`` over these."""
        where = self.where(options, request)
        timeout = options.timeout or self.timeout
        deadline = now + timeout if timeout else None
        before = options.reminders or self.reminders
        after = options.escalate_after or self.escalate_after
        escalate_to = options.escalate_to or self.escalate_to
        return PendingRecord(
            id="-",
            questions=list(request.questions),
            shown_sha256=shown_digest(request.questions),
            channel=where.channel,
            thread_ts=where.thread_ts,
            allowed_users=self.allowed_users,
            allowed_usergroups=self.allowed_usergroups,
            mention=self.mention,
            created_at=now,
            deadline=deadline,
            reminders=sorted(deadline - b for b in before if deadline and 0 < b < (timeout or 0)),
            escalate_at=now + after if after and escalate_to else None,
            escalate_to=escalate_to if after else None,
            remind=list(options.remind or self.remind) or None,
            link=options.link,
            callback=options.callback,
            asked_by=options.asked_by,
        )

    def approval_record(
        self,
        approval: ApprovalView,
        options: AskOptions,
        approvers: Sequence[str] | None,
        approver_groups: Sequence[str] | None,
    ) -> PendingRecord:
        """The record a tool-permission approval starts as (no deadline of its own)."""
        where = self.where(options, None)
        users, groups = self.allowed_users, self.allowed_usergroups
        if approvers or approver_groups:
            users = list(approvers) if approvers else None
            groups = list(approver_groups) if approver_groups else None
        return PendingRecord(
            id="-",
            questions=[],
            shown_sha256=approval_digest(approval),
            approval=approval,
            channel=where.channel,
            thread_ts=where.thread_ts,
            allowed_users=users,
            allowed_usergroups=groups,
            mention=self.mention,
            link=options.link,
            callback=options.callback,
            asked_by=options.asked_by,
        )


async def review_of(
    client: AsyncWebClient,
    store: PendingStore,
    questions: list[AskUserQuestionItem],
    options: AskOptions,
) -> dict[str, Any]:
    """The ``review`` and ``revision`` a request's record carries (``BAD_REVIEW`` when they
    cannot apply: not a plan review, or an unknown or unfit earlier review)."""
    if options.review is None and options.revises is None:
        return {}
    if plan_review_of(questions) is None:
        raise UserQuestionError(NOT_A_PLAN_REVIEW, BAD_REVIEW)
    if options.revises is None:
        return {"review": options.review}
    earlier = await store.get(options.revises)
    if earlier is None or plan_review_of(earlier.questions) is None:
        raise UserQuestionError(unknown_revised(options.revises), BAD_REVIEW)
    feedback = combined_feedback(earlier.votes)
    if feedback is None and earlier.answer is not None and earlier.answer.answers:
        feedback = earlier.answer.answers[0].custom
    revision = Revision(
        previous_id=earlier.id,
        previous_plan=earlier.questions[0].detail or "",
        previous_link=await _permalink(client, earlier.message_channel, earlier.message_ts),
        feedback=feedback,
    )
    return {"review": options.review, "revision": revision}


async def _permalink(client: AsyncWebClient, channel: str | None, ts: str | None) -> str | None:
    if not channel or not ts:
        return None
    try:
        response = await client.chat_getPermalink(channel=channel, message_ts=ts)
    except SLACK_FAILURES as exc:
        _log.warning("no link to the revised review's message", extra={"error": str(exc)})
        return None
    link = response.get("permalink")
    return link if isinstance(link, str) and link.startswith(("https://", "http://")) else None


UNWIRED = (
    "this provider delivers no callbacks: wire webhooks to it first "
    "(bot.app.embedded.embed_webhooks(provider, secret=..., hosts=[...])), or ask without one"
)


class Callbacks(Protocol):
    """Owes a question's callback one POST when it ends (``bot.webhooks.Webhooks``)."""

    async def owe(self, request_id: str, url: str, asked_by: str | None) -> str | None:
        """Keep the delivery owed; or why ``url`` may not be a callback (nothing kept)."""
        ...


async def owe_callback(callbacks: Callbacks | None, options: AskOptions) -> AskOptions:
    """``options`` with the request id its delivery is owed under; raises ``BAD_CALLBACK``."""
    if options.callback is None:
        return options
    if callbacks is None:
        raise UserQuestionError(UNWIRED, BAD_CALLBACK)
    request_id = options.request_id or (
        ids.key_request_id(options.key) if options.key else ids.new_request_id()
    )
    why = await callbacks.owe(request_id, options.callback, options.asked_by)
    if why is not None:
        raise UserQuestionError(f"callback refused: {why}", BAD_CALLBACK)
    return options.model_copy(update={"request_id": request_id})
