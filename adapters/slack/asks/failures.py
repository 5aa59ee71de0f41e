"""The provider's error boundary: store and transport failures become the seam's errors."""

from __future__ import annotations

import asyncio

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.slack.render.messages import QUESTION_FAILED, STORE_BUSY
from adapters.slack.stores import (
    StoreConflict,
    StoreUnavailable,
)
from bot.questions.errors import DELIVERY_FAILED, STORE_UNAVAILABLE, UserQuestionError

__all__ = ["SLACK_FAILURES", "describe", "question_error"]

SLACK_FAILURES = (SlackApiError, SlackClientError, aiohttp.ClientError, asyncio.TimeoutError)
"""What a Web API call raises when Slack refuses it or cannot be reached."""


def describe(exc: BaseException) -> str:
    """A short, secret-free account of a failure: Slack's error code, or the type and text."""
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error") if exc.response is not None else None
        return str(error or exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def question_error(exc: BaseException, what: str = QUESTION_FAILED) -> UserQuestionError:
    """``exc`` as the seam's error; ``what`` says what failed (Slack's part is appended)."""
    if isinstance(exc, UserQuestionError):
        return exc
    if isinstance(exc, StoreConflict | StoreUnavailable):
        return UserQuestionError(f"{STORE_BUSY}: {exc}", STORE_UNAVAILABLE, cause=exc)
    return UserQuestionError(f"{what}: {describe(exc)}", DELIVERY_FAILED, cause=exc)
