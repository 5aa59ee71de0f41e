"""The settings of how long things wait: a question for its answer, a stop for Slack."""

from __future__ import annotations

from typing import Final

from pydantic import Field
from pydantic_settings import BaseSettings

from bot.settings.types import Seconds

__all__ = ["MAX_QUESTION_TIMEOUT", "DeadlineSettings"]


MAX_QUESTION_TIMEOUT: Final = 7 * 24 * 3600.0
"""The longest ``QUESTION_TIMEOUT``: a week, as the API's ``timeout`` (``bot.api.body``);
a deadline beyond what a clock can show would fail every question at its post."""


class DeadlineSettings(BaseSettings):
    """``QUESTION_TIMEOUT`` and ``SHUTDOWN_GRACE``."""

    question_timeout: Seconds | None = Field(
        None,
        gt=0,
        le=MAX_QUESTION_TIMEOUT,
        description="Seconds a question waits for an answer before it fails with ASK_TIMEOUT "
        "(at most 604800, a week, as the API's timeout). Unset: no limit.",
    )
    shutdown_grace: Seconds = Field(
        5.0, ge=0, description="Seconds to finish pending Slack updates on shutdown."
    )
    approval_ttl: Seconds = Field(
        900.0,
        gt=0,
        description="Seconds an answer (an approval, a plan review's decision) may be "
        "consumed after it was given (POST /v1/questions/{id}/consume, once): its expiresAt.",
    )
