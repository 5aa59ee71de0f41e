"""The Slack settings: credentials, the default destination, who may answer, pacing (a part
of ``Settings``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from bot.settings.checks import (
    check_channel,
    check_mention,
    check_signing_secret,
    slack_token,
    url,
)
from bot.settings.types import Mode, PersonIds, Secret, UsergroupIds, UserIds

__all__ = ["SlackSettings"]


class SlackSettings(BaseSettings):
    """``SLACK_*``: how the bot reaches Slack, where questions go, who may answer them."""

    mode: Mode = Field(
        "sandbox", description="Chosen by the credentials; sandbox: run it with REDIS_URL etc."
    )
    slack_bot_token: (
        Annotated[
            Secret, AfterValidator(slack_token("xoxb-", "a bot token", "OAuth & Permissions"))
        ]
        | None
    ) = Field(None, description="Bot token, xoxb-… (OAuth & Permissions).")
    slack_app_token: (
        Annotated[
            Secret, AfterValidator(slack_token("xapp-", "an app-level token", "Basic Information"))
        ]
        | None
    ) = Field(
        None,
        description="App-level token, xapp-…, scope connections:write (Basic Information). "
        "With the bot token: Socket Mode.",
    )
    slack_signing_secret: Annotated[Secret, AfterValidator(check_signing_secret)] | None = Field(
        None,
        description="Signing secret (Basic Information). With the bot token and no app token: "
        "HTTP mode, Slack posts to https://YOUR-HOST/slack/events.",
    )
    slack_channel: Annotated[str, AfterValidator(check_channel)] | None = Field(
        None,
        validate_default=True,
        description="Default destination: a channel id (C…, G…), a DM id (D…) or a user id "
        "(U…, W…; the question goes to their DM with the bot). Required in socket and http "
        "mode; the sandbox has its own channel.",
    )
    slack_api_url: (
        Annotated[str, AfterValidator(url("http", "https", trailing_slash=True))] | None
    ) = Field(
        None,
        description="Web API base URL, for a stand-in Slack; http(s), a trailing / "
        "is added. Unset: Slack's.",
    )
    slack_allowed_users: UserIds = Field(
        (),
        description="Comma-separated user ids (U…, W…) who may answer. With "
        "SLACK_ALLOWED_USERGROUPS: members of either. Unset: anyone who can see the question.",
    )
    slack_allowed_usergroups: UsergroupIds = Field(
        (), description="Comma-separated user group ids (S…) whose members may answer."
    )
    slack_remind: PersonIds = Field(
        (),
        description="Comma-separated user (U…, W…) or group ids (S…) that reminders mention "
        "when anyone may answer. Unset: such a reminder is a top-level message in the channel.",
    )
    slack_mention: Annotated[str, AfterValidator(check_mention)] | None = Field(
        None,
        description="Mention added to the notification: <!here>, <!channel>, <@U…> or "
        "<!subteam^S…>.",
    )
    slack_rate_scale: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Web API calls are paced within Slack's published rate limits run this "
        "many times faster; 1 for Slack itself, more only for a faster stand-in Slack.",
    )

    @field_validator("slack_channel")
    @classmethod
    def _channel_needed_with_slack(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("mode", "sandbox") != "sandbox":
            raise ValueError(
                "required with Slack credentials: the id of the channel (C…, G…), DM (D…) or "
                "user (U…, W…) that questions go to by default. A channel's id is at the bottom "
                "of its About tab."
            )
        return value

    def _answerers(self) -> str:
        users, groups = len(self.slack_allowed_users), len(self.slack_allowed_usergroups)
        if not users and not groups:
            return "anyone who can see the question"
        parts = []
        if users:
            parts.append(f"{users} user{'' if users == 1 else 's'}")
        if groups:
            parts.append(f"{groups} user group{'' if groups == 1 else 's'}")
        return "only " + " and ".join(parts)
