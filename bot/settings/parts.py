"""The parts of ``Settings`` by concern: Slack, the store, the deadlines, the dsh host (the HTTP
server's is ``http_server``); ``Settings`` reads their fields in reverse order of its bases."""

from __future__ import annotations

from typing import Annotated, Final, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
)

from adapters.urls import redact_url
from bot.questions.review import ReviewPolicy
from bot.settings.checks import (
    Mode,
    PersonIds,
    Seconds,
    Secret,
    UsergroupIds,
    UserIds,
    check_channel,
    check_mention,
    check_redis_prefix,
    check_redis_url,
    check_signing_secret,
    json_object,
    one_of,
    slack_token,
    url,
)
from bot.settings.text import plural

StoreKind = Literal["memory", "sqlite", "redis"]
MAX_QUESTION_TIMEOUT: Final = 7 * 24 * 3600.0
"""The longest ``QUESTION_TIMEOUT``: a week, as the API's ``timeout`` (``bot.api.body``);
a deadline beyond what a clock can show would fail every question at its post."""


class SlackSettings(BaseModel):
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
        parts = [plural(users, "user")] if users else []
        parts += [plural(groups, "user group")] if groups else []
        return "only " + " and ".join(parts) if parts else "anyone who can see the question"


class StoreSettings(BaseModel):
    """``STORE``, ``STORE_PATH``, ``REDIS_*`` and ``RETENTION_DAYS``."""

    redis_url: Annotated[Secret, AfterValidator(check_redis_url)] | None = Field(
        None,
        description="redis://, rediss:// or unix:// URL of a Redis that several processes, on "
        "any hosts, share: their pending store (unless STORE says otherwise) and their Slack "
        "rate-limit budget. Unset: the store is SQLite at STORE_PATH (memory in the sandbox).",
    )
    redis_prefix: Annotated[str, AfterValidator(check_redis_prefix)] = Field(
        "uq", description="Prefix of every Redis key and channel."
    )
    store: Annotated[StoreKind, BeforeValidator(one_of(*get_args(StoreKind)))] = Field(
        "memory",
        description="Where questions live: sqlite (one file, survives restarts and crashes; "
        "several processes on one host), redis (several hosts; needs REDIS_URL) or memory "
        "(lost on exit). Unset: redis with REDIS_URL, memory in the sandbox, else sqlite.",
        # (the settings' loader picks it when unset: the field's own default is not it)
        json_schema_extra={"shown_default": "auto"},
    )
    store_path: str = Field(
        "slack-questions.db",
        min_length=1,
        description="The SQLite store's file (created if missing; relative to the working "
        "directory).",
    )
    retention_days: float = Field(
        90.0,
        gt=0,
        allow_inf_nan=False,
        description="Days finished questions and their audit trail are kept (every store).",
    )

    def _store(self) -> str:
        kept = f"finished kept {self.retention_days:g} days"
        if self.store == "memory":
            return "memory (one process, lost on exit)"
        if self.store == "sqlite":
            return f"sqlite {self.store_path} ({kept})"
        assert self.redis_url is not None
        url = redact_url(self.redis_url.get_secret_value())
        return f"redis {url} (prefix {self.redis_prefix}, {kept})"


class DeadlineSettings(BaseModel):
    """``QUESTION_TIMEOUT``, ``SHUTDOWN_GRACE`` and ``APPROVAL_TTL``."""

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


class DshSettings(BaseModel):
    """``DSH_*``: the harness host, its plan reviews' policy, who decides its approvals."""

    dsh_host_url: Annotated[str, AfterValidator(url("http", "https"))] | None = Field(
        None,
        description="http(s) URL of a DeepSeek Harness web host to serve; the whole URL "
        "`dsh web` prints (http://127.0.0.1:PORT/?token=…) carries its launch token.",
    )
    dsh_host_token: Secret | None = Field(
        None, description="The host's launch token (new on every start of the host)."
    )
    dsh_review_policy: (
        Annotated[ReviewPolicy, BeforeValidator(json_object('{"approvals": 2}.'))] | None
    ) = Field(
        None,
        description='Review policy (JSON) for the dsh host\'s plan reviews, e.g. {"approvals": 2, '
        '"required": [{"usergroups": ["S0123ABCD"]}]}. Unset: one approval decides.',
    )
    dsh_approvers: UserIds = Field(
        (),
        description="Comma-separated user ids (U…, W…) who may decide the harness's tool "
        "approvals. With DSH_APPROVER_USERGROUPS: members of either. Unset (both): the people "
        "who may answer questions.",
    )
    dsh_approver_usergroups: UsergroupIds = Field(
        (), description="Comma-separated user group ids (S…) whose members may decide approvals."
    )
