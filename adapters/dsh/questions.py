"""One question of the host, asked in Slack until the host takes an answer, keyed ``dsh:<id>``
so a replay, reconnect or restart attaches instead of posting twice."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

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
from adapters.dsh.protocol import answer_problem, answer_response, cancel_response
from adapters.dsh.uplink import HostUplink
from adapters.slack import SlackQuestionProvider, plan_review_of
from bot.questions.errors import ASK_CANCELLED, ASK_TIMEOUT, UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

__all__ = ["QuestionRunner"]

_DISMISSED: Final = frozenset({ASK_CANCELLED, ASK_TIMEOUT})
"""Endings in Slack the host hears as a dismissal: it has no timeout of its own, so a question
past ``QUESTION_TIMEOUT`` would otherwise block the agent's turn for good."""


class QuestionRunner(HostRunner):
    """Asks one host question in Slack and sends the outcome back."""

    what = "question"
    done = "dismissed it in the harness"

    def __init__(
        self,
        service: UserQuestionService,
        provider: SlackQuestionProvider,
        uplink: HostUplink,
        *,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
        review: ReviewPolicy | None = None,
    ) -> None:
        super().__init__(provider, uplink, on_posted=on_posted, logger=logger)
        self._service = service
        self._review = review
        self._declined_reviews: dict[str, str] = {}
        """Session id -> the request id of its latest plan review, while it stands declined."""

    def _declined(self, ask: HostAsk) -> dict[str, Any]:
        return cancel_response(ask.rpc_id)

    def _settled_note(self, ask: HostAsk) -> str:
        if ask.resolved == "cancelled":
            return f"{CANCELLED_IN_HARNESS} This answer was not used."
        return SETTLED_ELSEWHERE

    async def _opening(self, ask: HostAsk) -> tuple[str | None, Retry | None]:
        ask.revises = await self._revises(ask)
        return None, Retry(REOPENED_NOTE, GONE_NOTE) if await self._reopening(ask) else None

    async def _ask(self, ask: HostAsk, note: str | None) -> Asked | Retry:
        key, label = ask_key(ask.rpc_id), session_label(ask.session_id)
        options = AskOptions(
            key=key,
            label=label,
            note=note,
            on_posted=lambda _: self._on_posted(ask),
            review=None if plan_review_of(ask.questions) is None else self._review,
            revises=ask.revises,
            asked_by=self._uplink.asker,
        )
        request = AskUserQuestionRequest(
            questions=ask.questions, signal=ask.controller.signal, options=options
        )
        answer = await self._service.ask(request)
        problem = answer_problem(ask.questions, answer)
        if problem is not None:
            # The host would refuse it: do not send it, ask the person again at once.
            self._logger.info(
                "dsh host: answer would not match the question; asking again",
                extra={"rpc_id": ask.rpc_id, "problem": problem},
            )
            return Retry.of(f"That answer cannot be sent to the harness: {problem}.")
        self._remember_plan_review(ask, answer)
        body = answer_response(ask.rpc_id, ask.session_id, answer)
        return body, lambda outcome: outcome == "answered", "answer"

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
        await self._respond(ask, cancel_response(ask.rpc_id), used, what)
