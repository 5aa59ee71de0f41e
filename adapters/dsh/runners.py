"""The host's two kinds of request, asked in Slack until the host takes a response, keyed
``dsh:<id>`` so a replay, reconnect or restart attaches instead of posting twice: questions,
and tool approvals (dsh-approvals.md), open until decided, withdrawn or the host restarts."""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Final

from adapters.dsh.asks import (
    CANCELLED_IN_HARNESS,
    GONE_NOTE,
    REOPENED_NOTE,
    SETTLED_ELSEWHERE,
    Asked,
    HostAsk,
    HostRunner,
    Retry,
    ask_key,
    session_label,
)
from adapters.dsh.link import MuxLink
from adapters.dsh.mux import DISMISSED, answer_problem, approval_headline, result
from adapters.slack import ApprovalView, QuestionStatus, SlackQuestionProvider, plan_review_of
from bot.questions.errors import ASK_CANCELLED, ASK_TIMEOUT, UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

_DISMISSED: Final = frozenset({ASK_CANCELLED, ASK_TIMEOUT})
"""Endings in Slack the host hears as a dismissal: it has no timeout of its own, so a question
past ``QUESTION_TIMEOUT`` would otherwise block the agent's turn for good."""


APPROVAL_SETTLED_ELSEWHERE: Final = (
    "The harness had already settled this approval elsewhere; this decision was not used."
)
COMMAND_UNREAD_NOTE: Final = (
    "The bot could not read what this tool will run: check it in the harness before allowing it."
)


class QuestionRunner(HostRunner):
    """Asks one host question in Slack and sends the outcome back."""

    what = "question"
    done = "dismissed it in the harness"
    declined = DISMISSED

    def __init__(
        self,
        service: UserQuestionService,
        provider: SlackQuestionProvider,
        link: MuxLink,
        *,
        asker: str,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
        review: ReviewPolicy | None = None,
    ) -> None:
        super().__init__(provider, link, asker=asker, on_posted=on_posted, logger=logger)
        self._service = service
        self._review = review
        self._declined_reviews: dict[str, str] = {}
        """Session id -> the request id of its latest plan review, while it stands declined."""

    def _settled_note(self, ask: HostAsk) -> str:
        if ask.resolved == "cancelled":
            return f"{CANCELLED_IN_HARNESS} This answer was not used."
        return SETTLED_ELSEWHERE

    async def _opening(self, ask: HostAsk) -> tuple[str | None, Retry | None]:
        ask.revises = await self._revises(ask)
        return None, Retry(REOPENED_NOTE, GONE_NOTE) if await self._reopening(ask) else None

    async def _ask(self, ask: HostAsk, note: str | None) -> AskUserQuestionAnswer:
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

    def _outcome(self, ask: HostAsk, answer: AskUserQuestionAnswer) -> Asked | Retry:
        problem = answer_problem(ask.questions, answer)
        if problem is not None:
            # The host would refuse it: do not send it, ask the person again at once.
            self._logger.info(
                "dsh host: answer would not match the question; asking again",
                extra={"rpc_id": ask.rpc_id, "problem": problem},
            )
            return Retry.of(f"That answer cannot be sent to the harness: {problem}.")
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

    async def _not_answered(self, ask: HostAsk, error: UserQuestionError) -> None:
        if error.code not in _DISMISSED:
            await super()._not_answered(ask, error)
            return
        what = "dismissal" if error.code == ASK_CANCELLED else "dismissal at the deadline"
        used = lambda outcome: outcome == "cancelled"  # noqa: E731
        await self._respond(ask, DISMISSED, used, what)


class ApprovalRunner(HostRunner):
    """Asks one host approval in Slack and sends the decision back."""

    what = "tool approval"
    done = "rejected it in the harness"
    declined = result("rejected")

    def __init__(
        self,
        provider: SlackQuestionProvider,
        link: MuxLink,
        *,
        asker: str,
        approvers: Sequence[str] | None,
        approver_groups: Sequence[str] | None,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
    ) -> None:
        super().__init__(provider, link, asker=asker, on_posted=on_posted, logger=logger)
        self._approvers = list(approvers) if approvers else None
        self._groups = list(approver_groups) if approver_groups else None

    def _settled_note(self, ask: HostAsk) -> str:
        return APPROVAL_SETTLED_ELSEWHERE

    async def _opening(self, ask: HostAsk) -> tuple[str | None, Retry | None]:
        # Not in the log yet (or forgotten): wait briefly for its session's snapshot.
        if ask.call is None and ask.approval is not None:
            ask.call = await self._link.call_of(ask.session_id, ask.approval.call_id)
        note = REOPENED_NOTE if await self._reopening(ask) else None
        if ask.call is None:
            note = f"{note} {COMMAND_UNREAD_NOTE}" if note else COMMAND_UNREAD_NOTE
        return note, None

    async def _ask(self, ask: HostAsk, note: str | None) -> QuestionStatus:
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

    def _outcome(self, ask: HostAsk, record: QuestionStatus) -> Asked | None:
        outcome = record.decision
        if record.state != "answered" or outcome is None:
            self._logger.debug("dsh host: approval ended", extra={"rpc_id": ask.rpc_id})
            return None
        return result(outcome), functools.partial(operator.eq, outcome), "approval decision"
