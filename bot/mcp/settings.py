"""Settings of ``python -m bot.mcp``: where the bot is, read from the environment and ``.env``."""

from __future__ import annotations

from typing import Annotated, Final, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.settings.checks import url
from bot.settings.config import Secret
from bot.settings.text import problem, render_help

__all__ = ["MCP_SETTINGS_HELP", "McpSettings", "load_mcp_settings"]


class McpSettings(BaseSettings):
    """Where the bot's HTTP API is, and how the wait for an answer behaves."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        hide_input_in_errors=True,
    )

    bot_url: Annotated[str, AfterValidator(url("http", "https"))] = Field(
        "http://127.0.0.1:3000",
        description="Base URL of a running bot's HTTP API (`python -m bot`: HOST and PORT).",
    )
    bot_api_token: Secret | None = Field(
        None, description="The bot's BOT_API_TOKEN, when it has one."
    )
    mcp_progress_seconds: float = Field(
        15.0,
        gt=0,
        le=120,
        description="Seconds between progress notifications while a question waits.",
    )
    mcp_reconnect_seconds: float = Field(
        30.0,
        ge=0,
        description="Seconds to keep retrying when the bot stops answering while a question "
        "waits, before the call fails with BOT_UNREACHABLE.",
    )

    @model_validator(mode="after")
    def _one_authorization(self) -> Self:
        """A user:password@ in BOT_URL (a proxy's basic auth) and BOT_API_TOKEN would both
        be the request's Authorization: refused here, not at every call."""
        if self.bot_api_token is not None and urlsplit(self.bot_url).username is not None:
            raise ValueError(
                "BOT_URL carries a user name and password (user:password@) and BOT_API_TOKEN "
                "is set: both would be the request's Authorization. Remove the credentials "
                "from BOT_URL, or unset BOT_API_TOKEN."
            )
        return self


MCP_SETTINGS_HELP: Final = render_help(
    {name.upper(): field for name, field in McpSettings.model_fields.items()},
    intro="Settings are read from the environment, then from KEY=VALUE lines in ./.env.\n",
)
"""The table of settings that ``python -m bot.mcp --help`` prints."""


def load_mcp_settings() -> McpSettings:
    """The settings, or ``ValueError`` listing every problem, each naming its variable."""
    try:
        return McpSettings()
    except ValidationError as exc:
        problems = [problem(e, McpSettings.model_fields) for e in exc.errors(include_url=False)]
        raise ValueError("\n".join(f"  - {p}" for p in problems)) from None
