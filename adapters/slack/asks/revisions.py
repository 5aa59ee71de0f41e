"""A team review's policy and revision, checked and gathered when the review is asked."""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.failures import SLACK_FAILURES
from adapters.slack.model.tally import Revision, combined_feedback
from adapters.slack.render.layout import plan_review_of
from adapters.slack.render.messages import NOT_A_PLAN_REVIEW, unknown_revised
from adapters.slack.stores import PendingStore
from bot.questions import AskOptions, AskUserQuestionItem, ReviewPolicy, UserQuestionError
from bot.questions.errors import BAD_REVIEW

__all__ = ["review_of"]

_log = logging.getLogger("adapters.slack")


async def review_of(
    client: AsyncWebClient,
    store: PendingStore,
    questions: list[AskUserQuestionItem],
    options: AskOptions,
) -> tuple[ReviewPolicy | None, Revision | None]:
    """The policy and revision a request's record carries (``BAD_REVIEW`` when they cannot
    apply: not a plan review, or an unknown or unfit earlier review)."""
    if options.review is None and options.revises is None:
        return None, None
    if plan_review_of(questions) is None:
        raise UserQuestionError(NOT_A_PLAN_REVIEW, BAD_REVIEW)
    if options.revises is None:
        return options.review, None
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
    return options.review, revision


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
