"""One question of the host, asked in Slack until the host takes an answer, under the
idempotency key ``dsh:<id>`` so a replay, reconnect or restart attaches instead of posting
twice."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from adapters.dsh.asks import (
    CANCELLED_IN_HARNESS,
    GONE_NOTE,
    REFUSED,
    REOPENED_NOTE,
    SETTLED_ELSEWHERE,
    HostAsk,
    HostRunner,
    QuestionNotes,
    ask_key,
    session_label,
)
from adapters.dsh.matching import answer_problem
from adapters.dsh.protocol import answer_response, cancel_response
from adapters.dsh.uplink import HostUplink
from adapters.slack import plan_review_of
from bot.questions.errors import ASK_CANCELLED, ASK_TIMEOUT, UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

__all__ = ["QuestionRunner"]

_DISMISSED: Final = frozenset({ASK_CANCELLED, ASK_TIMEOUT})
"""Endings in Slack the host hears as a dismissal: it has no timeout of its own, so a question
past ``QUESTION_TIMEOUT`` would otherwise block the agent's turn for good."""


@dataclass(frozen=True, slots=True)
class _Retry:
    """Why the person is asked again: the note to reopen with, and the one if that fails."""

    note: str
    stuck: str

    @classmethod
    def of(cls, what: str) -> _Retry:
        """The notes for an answer that was not taken, for the reason ``what``."""
        return cls(
            f"{what} Please answer again.",
            f"{what} This message could not be reopened; answer in the harness instead.",
        )


class QuestionRunner(HostRunner):
    """Asks one host question in Slack and sends the outcome back."""

    what = "question"
    done = "dismissed it in the harness"

    def __init__(
        self,
        service: UserQuestionService,
        notes: QuestionNotes,
        uplink: HostUplink,
        *,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
        review: ReviewPolicy | None = None,
    ) -> None:
        super().__init__(notes, uplink, on_posted=on_posted, logger=logger)
        self._service = service
        self._review = review
        self._declined_reviews: dict[str, str] = {}
        """Session id -> the request id of its latest plan review, while it stands declined."""

    def _declined(self, ask: HostAsk) -> dict[str, Any]:
        return cancel_response(ask.rpc_id)

    async def _serve(self, ask: HostAsk) -> None:
        reopen = await self._reopening(ask)
        retry = _Retry(REOPENED_NOTE, GONE_NOTE) if reopen else None
        key, label = ask_key(ask.rpc_id), session_label(ask.session_id)
        review, revises = await self._review_of(ask)
        while True:
            ask.phase = "asking"
            before = await self._version(ask) if retry is not None else None
            note = None if retry is None else retry.note
            options = AskOptions(
                key=key,
                label=label,
                note=note,
                on_posted=lambda _: self._on_posted(ask),
                review=review,
                revises=revises,
                asked_by=self._uplink.asker,
            )
            request = AskUserQuestionRequest(
                questions=ask.questions, signal=ask.controller.signal, options=options
            )
            try:
                answer = await self._service.ask(request)
            except UserQuestionError as exc:
                await self._not_answered(ask, exc)
                return
            if retry is not None and before is not None and await self._version(ask) == before:
                # Nothing was written: the provider did not reopen the message and handed back
                # the earlier outcome. Sending it again would loop; say so and stop here.
                self._logger.error(
                    "dsh host: could not reopen the question in Slack",
                    extra={"rpc_id": ask.rpc_id},
                )
                await self._notes.add_note(ask.request_id, retry.stuck)
                return
            problem = answer_problem(ask.questions, answer)
            if problem is not None:
                # The host would refuse it: do not send it, ask the person again at once.
                self._logger.info(
                    "dsh host: answer would not match the question; asking again",
                    extra={"rpc_id": ask.rpc_id, "problem": problem},
                )
                retry = _Retry.of(f"That answer cannot be sent to the harness: {problem}.")
                continue
            self._remember_plan_review(ask, answer)
            ask.phase = "responding"
            body = answer_response(ask.rpc_id, ask.session_id, answer)
            receipt = await self._send(ask, body, lambda outcome: outcome == "answered")
            if receipt is None:
                return
            self._log_receipt("answer", ask, receipt)
            if receipt.accepted:
                return
            if receipt.reason == "not-pending":
                await self._notes.add_note(ask.request_id, self._settled_note(ask))
                return
            retry = _Retry.of(REFUSED)

    async def _review_of(self, ask: HostAsk) -> tuple[ReviewPolicy | None, str | None]:
        """A plan review's policy (the bot's default) and the declined review it revises:
        the session's previous plan review, when that one was declined and is still known."""
        if plan_review_of(ask.questions) is None:
            return None, None
        revises = self._declined_reviews.get(ask.session_id)
        if revises is not None and (revises == ask.request_id or not await self._known(revises)):
            revises = None
        return self._review, revises

    async def _known(self, request_id: str) -> bool:
        return await self._notes.status(request_id) is not None

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
        if error.code in _DISMISSED:
            ask.phase = "responding"
            body = cancel_response(ask.rpc_id)
            receipt = await self._send(ask, body, lambda outcome: outcome == "cancelled")
            if receipt is None:
                return
            what = "dismissal" if error.code == ASK_CANCELLED else "dismissal at the deadline"
            self._log_receipt(what, ask, receipt)
            if receipt.reason == "not-pending":
                await self._notes.add_note(ask.request_id, self._settled_note(ask))
            return
        await self._not_asked(ask, error)

    @staticmethod
    def _settled_note(ask: HostAsk) -> str:
        if ask.resolved == "cancelled":
            return f"{CANCELLED_IN_HARNESS} This answer was not used."
        return SETTLED_ELSEWHERE
