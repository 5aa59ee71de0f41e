"""Where a request is asked and what it gets by default: ``Destination``, ``AskDefaults``,
and the pending record a request starts as (its options over the defaults)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adapters.slack.model.audit_trail import approval_digest, shown_digest
from adapters.slack.model.record import ApprovalView, PendingRecord
from bot.questions import AskOptions, AskUserQuestionRequest

__all__ = ["AskDefaults", "Destination", "DestinationHook"]


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

    def where(self, request: AskUserQuestionRequest, options: AskOptions) -> Destination:
        """The request's destination: its options, else the hook, else the default."""
        if options.channel:
            return Destination(options.channel, options.thread_ts)
        if self.choose is not None:
            chosen = self.choose(request)
            if chosen is not None:
                return chosen
        return self.destination

    def question_record(
        self, request: AskUserQuestionRequest, options: AskOptions, *, owner: str | None, now: float
    ) -> PendingRecord:
        """The record a question starts as (its id still to be given): where, who may
        answer, and its deadline, reminders and escalation, from ``options`` over these."""
        where = self.where(request, options)
        timeout = options.timeout or self.timeout
        deadline = now + timeout if timeout else None
        before = options.reminders or self.reminders
        after = options.escalate_after or self.escalate_after
        escalate_to = options.escalate_to or self.escalate_to
        return PendingRecord(
            id="-",
            owner=owner,
            questions=list(request.questions),
            shown_sha256=shown_digest(request.questions),
            channel=where.channel,
            thread_ts=where.thread_ts,
            allowed_users=self.allowed_users,
            allowed_usergroups=self.allowed_usergroups,
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
        *,
        owner: str | None,
    ) -> PendingRecord:
        """The record a tool-permission approval starts as (no deadline of its own)."""
        where = self.destination
        if options.channel:
            where = Destination(options.channel, options.thread_ts)
        users, groups = self.allowed_users, self.allowed_usergroups
        if approvers or approver_groups:
            users = list(approvers) if approvers else None
            groups = list(approver_groups) if approver_groups else None
        return PendingRecord(
            id="-",
            owner=owner,
            questions=[],
            shown_sha256=approval_digest(approval),
            approval=approval,
            channel=where.channel,
            thread_ts=where.thread_ts,
            allowed_users=users,
            allowed_usergroups=groups,
            link=options.link,
            callback=options.callback,
            asked_by=options.asked_by,
        )
