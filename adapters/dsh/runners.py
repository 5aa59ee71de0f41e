"""The host's two kinds of request, asked in Slack until the host takes a response, keyed
``dsh:<id>`` so a replay, reconnect or restart attaches instead of posting twice: questions,
and tool approvals (dsh-approvals.md), open until decided, withdrawn or the host restarts."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from adapters.dsh.asks import (
    CANCELLED_IN_HARNESS,
    DECLINED_NOTE,
    DELIVERED_NOTE,
    GONE_NOTE,
    NOT_DELIVERED_NOTE,
    REOPENED_NOTE,
    RETRYING_NOTE,
    SETTLED_ELSEWHERE,
    UNCONFIRMED_NOTE,
    HostAsk,
    ask_key,
    session_label,
)
from adapters.dsh.host import describe
from adapters.dsh.link import MuxLink
from adapters.dsh.mux import DISMISSED, answer_problem, approval_headline, result
from adapters.slack import ApprovalView, QuestionStatus, SlackQuestionProvider, plan_review_of
from bot.questions.errors import (
    ASK_ABORTED,
    ASK_CANCELLED,
    ASK_TIMEOUT,
    BAD_INTENT,
    BAD_REVIEW,
    EMPTY_QUESTIONS,
    SLACK_LIMIT,
    UserQuestionError,
)
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

_DISMISSED: Final = frozenset({ASK_CANCELLED, ASK_TIMEOUT})
"""Endings in Slack the host hears as a dismissal: it has no timeout of its own, so a question
past ``QUESTION_TIMEOUT`` would otherwise block the agent's turn for good."""
PERMANENT_CODES: Final = frozenset({SLACK_LIMIT, BAD_REVIEW, BAD_INTENT, EMPTY_QUESTIONS})
"""Why Slack could not show a request that asking again cannot fix: the host is told."""
_UNDELIVERED_NOTES: Final = frozenset({NOT_DELIVERED_NOTE, RETRYING_NOTE, UNCONFIRMED_NOTE})
_RESOLVED_WAIT: Final = 2.0
"""Seconds a response not seen taken waits for the host's ``cancel`` (was it ours?)."""
_NOTICE_MAX: Final = 300

APPROVAL_SETTLED_ELSEWHERE: Final = (
    "The harness had already settled this approval elsewhere; this decision was not used."
)
COMMAND_UNREAD_NOTE: Final = (
    "The bot could not read what this tool will run: check it in the harness before allowing it."
)


def _what(ask: HostAsk) -> str:
    """What a notice or log line calls the request: ``question`` or ``tool approval``."""
    return "question" if ask.approval is None else "tool approval"


@dataclass(frozen=True, slots=True)
class Retry:
    """Why the person is asked again: the note to reopen with, and the one if that fails."""

    note: str
    stuck: str


Asked = tuple[dict[str, Any], Callable[[str | None], bool], str]
"""What to send: the outcome, which settled outcome it asks for, and what the log calls it."""


class HostRunner:
    """Asks the host's questions and approvals in Slack and sends the outcome back; a request
    it cannot show, or fails on before a response went out, is declined in the host with a
    notice in the channel, so the host's agent never waits forever."""

    def __init__(
        self,
        service: UserQuestionService,
        provider: SlackQuestionProvider,
        link: MuxLink,
        *,
        asker: str,
        approvers: Sequence[str] | None,
        approver_groups: Sequence[str] | None,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
        review: ReviewPolicy | None = None,
    ) -> None:
        self._service = service
        self._notes = provider
        self._link = link
        self.asker = asker
        """The host as the audit trail names who asked its questions and approvals."""
        self._approvers = list(approvers) if approvers else None
        self._groups = list(approver_groups) if approver_groups else None
        self._on_posted = on_posted
        self._logger = logger
        self._review = review
        self._declined_reviews: dict[str, str] = {}
        """Session id -> the request id of its latest plan review, while it stands declined."""

    async def serve(self, ask: HostAsk) -> None:
        """Ask ``ask`` in Slack until the host takes a response or it ends otherwise."""
        try:
            await self._serve(ask)
        except Exception as exc:
            self._logger.exception(
                f"dsh host: could not handle a {_what(ask)}", extra={"rpc_id": ask.rpc_id}
            )
            if ask.sent:
                return
            ask.controller.abort(DECLINED_NOTE)  # its record (if any) is closed with this
            await self._decline(ask, f"the bot failed on it ({describe(exc)[:200]}).")

    async def _serve(self, ask: HostAsk) -> None:
        note, retry = await self._opening(ask)
        while True:
            ask.phase = "asking"
            before = None if retry is None else await _version(self._notes, ask)
            asking = self._ask_question if ask.approval is None else self._ask_approval
            try:
                got = await asking(ask, note if retry is None else retry.note)
            except UserQuestionError as exc:
                await self._not_answered(ask, exc)
                return
            if (
                retry is not None
                and before is not None
                and await _version(self._notes, ask) == before
            ):
                # Nothing was written: the message was not reopened and the earlier outcome
                # came back. Sending it again would loop, or decide for nobody: stop here.
                self._logger.error(
                    f"dsh host: could not reopen the {_what(ask).split()[-1]} in Slack",
                    extra={"rpc_id": ask.rpc_id},
                )
                await self._notes.add_note(ask.request_id, retry.stuck)
                return
            if isinstance(got, AskUserQuestionAnswer):
                asked: Asked | Retry | None = self._answered(ask, got)
            else:
                asked = _decided(self._logger, ask, got)
            if asked is None:
                return
            if not isinstance(asked, Retry):
                await self._respond(ask, *asked)
                return
            retry = asked

    async def _opening(self, ask: HostAsk) -> tuple[str | None, Retry | None]:
        """The note of the first ask, or the retry it is (a reopened question's message)."""
        if ask.approval is None:
            ask.revises = await self._revises(ask)
            return None, Retry(REOPENED_NOTE, GONE_NOTE) if await _reopening(
                self._notes, ask
            ) else None
        # Not in the log yet (or forgotten): wait briefly for its session's snapshot.
        if ask.call is None:
            ask.call = await self._link.call_of(ask.session_id, ask.approval.call_id)
        note = REOPENED_NOTE if await _reopening(self._notes, ask) else None
        if ask.call is None:
            note = f"{note} {COMMAND_UNREAD_NOTE}" if note else COMMAND_UNREAD_NOTE
        return note, None

    async def _ask_question(self, ask: HostAsk, note: str | None) -> AskUserQuestionAnswer:
        key, label = ask_key(ask.rpc_id), session_label(ask.session_id)
        options = AskOptions(
            key=key,
            label=label,
            note=note,
            on_posted=lambda _: self._on_posted(ask),
            review=None if plan_review_of(ask.questions) is None else self._review,
            revises=ask.revises,
            asked_by=self.asker,
        )
        request = AskUserQuestionRequest(
            questions=ask.questions, signal=ask.controller.signal, options=options
        )
        return await self._service.ask(request)

    async def _ask_approval(self, ask: HostAsk, note: str | None) -> QuestionStatus:
        payload, call = ask.approval, ask.call
        assert payload is not None
        view = ApprovalView(
            tool_name=payload.tool_name,
            headline=approval_headline(payload),
            command=call.command if call else None,
            path=call.path if call else None,
        )
        options = AskOptions(
            key=ask_key(ask.rpc_id),
            label=session_label(ask.session_id),
            note=note,
            on_posted=lambda _: self._on_posted(ask),
            asked_by=self.asker,
        )
        return await self._notes.ask_approval(
            view,
            options=options,
            approvers=self._approvers,
            approver_groups=self._groups,
            signal=ask.controller.signal,
        )

    def _answered(self, ask: HostAsk, answer: AskUserQuestionAnswer) -> Asked | Retry:
        """What to send for a question's answer, or a retry at once (the host would refuse it)."""
        problem = answer_problem(ask.questions, answer)
        if problem is not None:
            # The host would refuse it: do not send it, ask the person again at once.
            self._logger.info(
                "dsh host: answer would not match the question; asking again",
                extra={"rpc_id": ask.rpc_id, "problem": problem},
            )
            what = f"That answer cannot be sent to the harness: {problem}."
            where = "This message could not be reopened; answer in the harness instead."
            return Retry(f"{what} Please answer again.", f"{what} {where}")
        self._remember_plan_review(ask, answer)
        return result(answer.to_wire()), lambda outcome: outcome == "answered", "answer"

    async def _revises(self, ask: HostAsk) -> str | None:
        """The declined review a plan review revises: the session's previous plan review, when
        that one was declined and is still known."""
        if plan_review_of(ask.questions) is None:
            return None
        revises = self._declined_reviews.get(ask.session_id)
        if revises is None or revises == ask.request_id:
            return None
        return revises if await self._notes.status(revises) is not None else None

    def _remember_plan_review(self, ask: HostAsk, answer: AskUserQuestionAnswer) -> None:
        """Keep a declined plan review, so the session's next plan review shows what changed."""
        review = plan_review_of(ask.questions)
        if review is None or not answer.answers:
            return
        approve = ask.questions[0].option_labels[review.approve]
        if answer.answers[0].selected == [approve]:
            self._declined_reviews.pop(ask.session_id, None)
        else:
            self._declined_reviews[ask.session_id] = ask.request_id

    async def _respond(
        self, ask: HostAsk, outcome: dict[str, Any], used: Callable[[str | None], bool], what: str
    ) -> None:
        """Send ``outcome``; the message says when it is not delivered, or another settled the
        request (one that reached the host counts as taken when it settled it as ``used``)."""

        async def overdue(note: str) -> None:
            await self._notes.add_note(ask.request_id, note or RETRYING_NOTE, in_flight=True)

        ask.phase = "responding"
        ask.sent = True
        delivery = await self._link.respond(
            ask.rpc_id, outcome, settled=lambda: ask.resolved is not None, overdue=overdue
        )
        if delivery.taken is None and not delivery.settled:
            await self._notes.add_note(ask.request_id, NOT_DELIVERED_NOTE, in_flight=True)
            return
        extra = {"rpc_id": ask.rpc_id, "session": ask.session_id}
        taken = delivery.taken
        if not taken and delivery.reached:
            with contextlib.suppress(TimeoutError):  # was it ours? its ``cancel`` says
                await asyncio.wait_for(ask.settled.wait(), _RESOLVED_WAIT)
        if not taken and delivery.reached and used(ask.resolved):
            self._logger.info(
                "dsh host: response taken (the host's log did not show it; its cancel does)",
                extra=extra,
            )
            taken = True
        if not taken:
            self._logger.info(f"dsh host: {what} not taken (not-pending)", extra=extra)
            await self._notes.add_note(ask.request_id, _settled_note(ask))
            return
        self._logger.info(f"dsh host: {what} accepted", extra=extra)
        status = await self._notes.status(ask.request_id)
        if status is not None and status.note in _UNDELIVERED_NOTES:
            await self._notes.add_note(ask.request_id, DELIVERED_NOTE)

    async def _not_answered(self, ask: HostAsk, error: UserQuestionError) -> None:
        """Slack did not show ``ask``: a question's dismissal (or deadline) is sent as one;
        declined when asking again cannot fix it; otherwise the host keeps it pending for its
        other clients and replays it on the next downlink."""
        if ask.approval is None and error.code in _DISMISSED:
            what = "dismissal" if error.code == ASK_CANCELLED else "dismissal at the deadline"
            used = lambda outcome: outcome == "cancelled"  # noqa: E731
            await self._respond(ask, DISMISSED, used, what)
        elif error.code in PERMANENT_CODES:
            await self._decline(ask, f"{error.message} ({error.code}).")
        elif error.code != ASK_ABORTED:
            self._logger.warning(
                f"dsh host: could not ask a {_what(ask)} in Slack",
                extra={"rpc_id": ask.rpc_id, "code": error.code, "error": error.message},
            )

    async def _decline(self, ask: HostAsk, why: str) -> None:
        """Dismiss or reject the request in the host, so its agent can act, and say so in Slack."""
        self._logger.warning(
            f"dsh host: declining a {_what(ask)} that cannot be asked in Slack",
            extra={"rpc_id": ask.rpc_id, "session": ask.session_id, "error": why},
        )
        ask.sent = True
        question = ask.approval is None
        delivery = await self._link.respond(
            ask.rpc_id,
            DISMISSED if question else result("rejected"),
            settled=lambda: ask.resolved is not None,
        )
        if delivery.taken:
            done = "dismissed" if question else "rejected"
            told = f"The bot {done} it in the harness, so the agent can carry on."
        elif delivery.taken is not None or delivery.settled:
            told = "The harness had already settled it."
        else:
            told = "The bot could not tell the harness; it tries again if the harness asks again."
        reason = why if len(why) <= _NOTICE_MAX else why[: _NOTICE_MAX - 1] + "…"
        await _notice(
            self._notes,
            self._logger,
            f"The harness asked for a {_what(ask)} ({session_label(ask.session_id)}) that the "
            f"bot cannot show in Slack: {reason} {told}",
        )


def _settled_note(ask: HostAsk) -> str:
    """What the message says when the host settled the request without this response."""
    if ask.approval is not None:
        return APPROVAL_SETTLED_ELSEWHERE
    if ask.resolved == "cancelled":
        return f"{CANCELLED_IN_HARNESS} This answer was not used."
    return SETTLED_ELSEWHERE


def _decided(logger: logging.Logger, ask: HostAsk, record: QuestionStatus) -> Asked | None:
    """What to send for an approval's decision; ``None`` when it ended undecided."""
    outcome = record.decision
    if record.state != "answered" or outcome is None:
        logger.debug("dsh host: approval ended", extra={"rpc_id": ask.rpc_id})
        return None
    return result(outcome), functools.partial(operator.eq, outcome), "approval decision"


async def _reopening(notes: SlackQuestionProvider, ask: HostAsk) -> bool:
    """Whether a record this bot ended without an answer (gone, interrupted, owner lost)
    is to be reopened: the host replaying it means it is still pending there."""
    if ask.reopen:
        return True
    status = await notes.status(ask.request_id)
    return status is not None and status.state in ("aborted", "failed")


async def _version(notes: SlackQuestionProvider, ask: HostAsk) -> int | None:
    """The record's version; ``None`` (not checked) when it or the store is not there."""
    try:
        status = await notes.status(ask.request_id)
    except UserQuestionError:
        return None
    return None if status is None else status.version


async def _notice(notes: SlackQuestionProvider, logger: logging.Logger, text: str) -> None:
    """Post ``text`` as a plain message in the provider's channel (best effort), escaped: no
    mention, link or markup from host text."""
    plain = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    try:
        await notes.client.chat_postMessage(channel=notes.defaults.destination.channel, text=plain)
    except Exception as exc:  # a notice is best effort: the log line stays
        logger.warning(
            "dsh host: could not post a notice", extra={"notice": text, "error": describe(exc)}
        )
