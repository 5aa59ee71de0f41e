"""The settings of how long things wait: a question for its answer, shutdown for Slack.

A part of :class:`bot.config.Settings`; never used on its own.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from bot.config_types import Seconds

__all__ = ["DeadlineSettings"]


class DeadlineSettings(BaseSettings):
    """``QUESTION_TIMEOUT`` and ``SHUTDOWN_GRACE``."""

    question_timeout: Seconds | None = Field(
        None,
        gt=0,
        description="Seconds a question waits for an answer before it fails with ASK_TIMEOUT. "
        "Unset: no limit.",
    )
    shutdown_grace: Seconds = Field(
        5.0, ge=0, description="Seconds to finish pending Slack updates on shutdown."
    )
