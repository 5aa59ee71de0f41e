"""Settings for ``python -m bot``: one pydantic-settings class over the environment and ``.env``.

:func:`load_settings` reads the bot's variables from the environment, then from ``./.env``
(a variable set in the environment wins, even when empty; empty means unset), validates them
all at once and raises one :class:`ConfigError` listing every problem, each naming its
variable. Secrets are :class:`pydantic.SecretStr` and never appear in a message, a ``repr``
or :meth:`Settings.describe`; a password in ``REDIS_URL`` is shown as ``***``.
``Settings(**values)`` validates exactly the values given (what code and tests use); it does
not read the environment.

The Slack credentials choose the mode::

    SLACK_BOT_TOKEN + SLACK_APP_TOKEN       socket   (wins when all three are set)
    SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET  http
    none of the three                       sandbox

How to add a setting
--------------------
1. Add a field to :class:`Settings`: its name is the variable in lower case (``FOO_BAR`` →
   ``foo_bar``). Give it a type that says what a good value is (``int`` with ``ge``/``le``,
   ``Seconds``, a ``Literal``, ``Secret`` for anything secret, ``X | None = None`` when it
   may be unset) and a ``description``: that is its entry in ``python -m bot --help``.
2. When the type cannot say it, attach a check from :mod:`bot.config_checks` (or add one
   there) with ``AfterValidator``; a check raises ``ValueError`` with one sentence that
   quotes the value only through ``show()`` and never quotes a secret.
3. A rule between settings is a ``field_validator`` on the later field reading
   ``info.data`` (fields declared above it); a rule about which credentials are present
   goes in ``bot.config_checks.choose_mode``.
4. Read it as ``settings.foo_bar``; add a line to :meth:`Settings.describe` when the
   startup log should show it. ``tests/test_config.py`` checks that ``--help`` lists it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from bot.config_checks import (
    USER,
    USERGROUP,
    check_channel,
    check_host,
    check_mention,
    check_redis_prefix,
    check_redis_url,
    check_signing_secret,
    choose_mode,
    distinct_tokens,
    host_names,
    id_list,
    is_loopback,
    is_wildcard,
    no_whitespace,
    one_of,
    plain_http_elsewhere,
    slack_token,
    token_file,
    token_list,
    url,
)
from bot.config_sources import DotEnvFile, Environment
from bot.config_text import invalid, problem, render_help
from bot.logs import redact_url
from bot.questions.review import ReviewPolicy

__all__ = [
    "SETTINGS_HELP",
    "SETTING_NAMES",
    "ConfigError",
    "LogFormat",
    "LogLevel",
    "Mode",
    "Seconds",
    "Secret",
    "Settings",
    "load_settings",
]

Mode = Literal["socket", "http", "sandbox"]
StoreKind = Literal["memory", "sqlite", "redis"]
DEFAULT_STORE_PATH: Final = "slack-questions.db"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["json", "text"]
Secret = Annotated[SecretStr, BeforeValidator(no_whitespace)]
"""A secret setting: never shown; whitespace inside it is refused (a copy-paste slip)."""
Seconds = Annotated[float, Field(allow_inf_nan=False), "seconds"]
"""A finite number of seconds (bounds go on the field)."""

_DERIVED: Final = frozenset({"mode", "notes"})  # fields that are not variables


class ConfigError(Exception):
    """The settings are incomplete or malformed; ``problems`` lists every one of them."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: list[str] = list(problems)
        super().__init__(self.problems)

    def __str__(self) -> str:
        count = len(self.problems)
        lines = [f"{count} problem{'' if count == 1 else 's'} in the settings:"]
        lines += [f"  - {problem}" for problem in self.problems]
        lines.append("Run `python -m bot --help` for the table of settings.")
        return "\n".join(lines)


class Settings(BaseSettings):
    """The bot's validated settings; each field but ``mode`` and ``notes`` is a variable."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    mode: Mode = Field("sandbox", description="Chosen by the Slack credentials.")
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
    slack_allowed_users: Annotated[
        tuple[str, ...], NoDecode, BeforeValidator(id_list(USER, "user ids (U…, W…)"))
    ] = Field(
        (),
        description="Comma-separated user ids (U…, W…) who may answer. With "
        "SLACK_ALLOWED_USERGROUPS: members of either. Unset: anyone who can see the question.",
    )
    slack_allowed_usergroups: Annotated[
        tuple[str, ...], NoDecode, BeforeValidator(id_list(USERGROUP, "user group ids (S…)"))
    ] = Field((), description="Comma-separated user group ids (S…) whose members may answer.")
    slack_mention: Annotated[str, AfterValidator(check_mention)] | None = Field(
        None,
        description="Mention added to the notification: <!here>, <!channel>, <@U…> or "
        "<!subteam^S…>.",
    )
    redis_url: Annotated[Secret, AfterValidator(check_redis_url)] | None = Field(
        None,
        description="redis://, rediss:// or unix:// URL of a shared pending store, for several "
        "processes. Unset: in memory, one process.",
    )
    redis_prefix: Annotated[str, AfterValidator(check_redis_prefix)] = Field(
        "uq", description="Prefix of every Redis key and channel."
    )
    slack_rate_scale: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Web API calls are paced within Slack's published rate limits run this "
        "many times faster; 1 for Slack itself, more only for a faster stand-in Slack.",
    )
    store: Annotated[StoreKind, BeforeValidator(one_of(*get_args(StoreKind)))] = Field(
        "memory",
        description="Where questions live: sqlite (one file, survives restarts and crashes; "
        "several processes on one host), redis (several hosts; needs REDIS_URL) or memory "
        "(lost on exit). Unset: redis with REDIS_URL, memory in the sandbox, else sqlite.",
    )
    store_path: str = Field(
        DEFAULT_STORE_PATH,
        min_length=1,
        description="The SQLite store's file (created if missing; relative to the working "
        "directory).",
    )
    retention_days: float = Field(
        90.0,
        gt=0,
        allow_inf_nan=False,
        description="Days finished questions and their audit trail are kept (SQLite, Redis).",
    )
    host: Annotated[str, AfterValidator(check_host)] = Field(
        "127.0.0.1",
        description="Address the HTTP server (API, /healthz, /slack/events) binds.",
    )
    port: int = Field(
        3000, ge=0, le=65535, description="Port of that server; 0 picks any free port."
    )
    bot_api_tokens: Annotated[
        tuple[tuple[str, SecretStr], ...], NoDecode, BeforeValidator(token_list)
    ] = Field(
        (),
        description="Several API tokens, each with a name: name:token,name:token. A question "
        "belongs to the token that asked it; other tokens get 404 for it.",
    )
    bot_api_tokens_file: Annotated[
        tuple[tuple[str, SecretStr], ...], NoDecode, BeforeValidator(token_file)
    ] = Field(
        (), description="A file of name:token lines (# comments), read beside BOT_API_TOKENS."
    )
    bot_api_token: Secret | None = Field(
        None,
        validate_default=True,
        description="Bearer token the HTTP API requires (named default). Unset, with no "
        "BOT_API_TOKENS: the API is open, so HOST must be a loopback address.",
    )
    max_open_questions: int = Field(
        10_000,
        ge=1,
        description="Open questions asked through the API of one process; more get 429 with "
        "Retry-After.",
    )
    max_open_per_token: int = Field(
        1_000,
        ge=1,
        description="Open questions one API token may have in one process; more get 429 with "
        "Retry-After.",
    )
    allowed_hosts: Annotated[tuple[str, ...], NoDecode, BeforeValidator(host_names)] = Field(
        (),
        description="Comma-separated host names the bot answers to besides loopback names "
        "and HOST (the public name a reverse proxy passes on). Any other Host header gets 421.",
    )
    max_body_bytes: int = Field(262_144, gt=0, description="Largest HTTP API request body.")
    header_timeout: Seconds = Field(
        10.0,
        gt=0,
        description="Seconds a client has to send a request's headers; also how long an idle "
        "keep-alive connection stays open. Slower clients are disconnected.",
    )
    body_timeout: Seconds = Field(
        30.0, gt=0, description="Seconds a client has to send a request's body; slower: 408."
    )
    max_connections: int = Field(
        1024,
        ge=1,
        description="Open connections at most; more are answered 503 and closed at once.",
    )
    question_timeout: Seconds | None = Field(
        None,
        gt=0,
        description="Seconds a question waits for an answer before it fails with ASK_TIMEOUT. "
        "Unset: no limit.",
    )
    shutdown_grace: Seconds = Field(
        5.0, ge=0, description="Seconds to finish pending Slack updates on shutdown."
    )
    dsh_host_url: Annotated[str, AfterValidator(url("http", "https"))] | None = Field(
        None, description="http(s) URL of a DeepSeek Harness web host to serve."
    )
    dsh_host_token: Secret | None = Field(None, description="Token for DSH_HOST_URL.")
    dsh_review_policy: ReviewPolicy | None = Field(
        None,
        description='Review policy (JSON) for the dsh host\'s plan reviews, e.g. {"approvals": 2, '
        '"required": [{"usergroups": ["S0123ABCD"]}]}. Unset: one approval decides.',
    )
    dsh_approvers: Annotated[
        tuple[str, ...], NoDecode, BeforeValidator(id_list(USER, "user ids (U…, W…)"))
    ] = Field(
        (),
        description="Comma-separated user ids (U…, W…) who may decide the harness's tool "
        "approvals. With DSH_APPROVER_USERGROUPS: members of either. Unset (both): the people "
        "who may answer questions.",
    )
    dsh_approver_usergroups: Annotated[
        tuple[str, ...], NoDecode, BeforeValidator(id_list(USERGROUP, "user group ids (S…)"))
    ] = Field(
        (), description="Comma-separated user group ids (S…) whose members may decide approvals."
    )
    sandbox_port: int = Field(
        3001,
        ge=0,
        le=65535,
        validate_default=True,
        description="Sandbox mode: port of the stand-in Slack (its Web API and its page); "
        "0 picks any free port.",
    )
    log_level: Annotated[
        LogLevel, BeforeValidator(one_of(*get_args(LogLevel), aliases={"WARN": "WARNING"}))
    ] = Field("INFO", description="DEBUG, INFO, WARNING or ERROR.")
    log_format: Annotated[LogFormat, BeforeValidator(one_of(*get_args(LogFormat)))] = Field(
        "text", description="text, or json (one object a line)."
    )
    notes: tuple[str, ...] = Field(
        (), description="Things worth a line in the startup log (e.g. a credential set but unused)."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """``Settings(...)`` holds what it is given; :func:`load_settings` adds the rest."""
        return (init_settings,)

    @model_validator(mode="wrap")
    @classmethod
    def _check_as_a_whole(cls, data: Any, handler: Any) -> Any:
        """Empty means unset; the credentials choose the mode; every problem is reported."""
        if not isinstance(data, dict):
            return handler(data)
        given = {k: v.strip() if isinstance(v, str) else v for k, v in data.items()}
        given = {k: v for k, v in given.items() if v != ""}  # None stays: it may be invalid
        problems: list[tuple[str, str]] = []
        notes = [*given.pop("notes", ())]
        mode = choose_mode(given, problems, notes)
        if mode is not None and given.setdefault("mode", mode) != mode:
            problems.append(("mode", f"{given['mode']!r}, but the credentials choose {mode}."))
        if given.get("store") is None:
            sandbox = given.get("mode", mode or "sandbox") == "sandbox"
            redis = given.get("redis_url") is not None
            given["store"] = "redis" if redis else "memory" if sandbox else "sqlite"
        elif str(given["store"]).lower() == "redis" and given.get("redis_url") is None:
            problems.append(("store", "redis needs REDIS_URL (e.g. redis://localhost:6379/0)."))
        if given.get("dsh_host_token") is not None:
            if given.get("dsh_host_url") is None:
                problems.append(
                    ("dsh_host_token", "set without DSH_HOST_URL; set both or neither.")
                )
            elif plain_http_elsewhere(str(given["dsh_host_url"])):
                notes.append(
                    "DSH_HOST_URL is plain http to another machine: DSH_HOST_TOKEN travels "
                    "unencrypted."
                )
        try:
            settings = handler({**given, "notes": tuple(dict.fromkeys(notes))})
        except ValidationError as exc:
            raise invalid(cls.__name__, exc.errors(include_url=False), problems) from None
        if problems:
            raise invalid(cls.__name__, [], problems)
        return settings

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

    @field_validator("bot_api_token")
    @classmethod
    def _token_needed_beyond_loopback(
        cls, value: SecretStr | None, info: ValidationInfo
    ) -> SecretStr | None:
        host = info.data.get("host")
        named = [*info.data.get("bot_api_tokens", ()), *info.data.get("bot_api_tokens_file", ())]
        if value is not None:
            distinct_tokens([("default", value), *named])
        else:
            distinct_tokens(named)
        if value is None and not named and host is not None and not is_loopback(host):
            raise ValueError(
                f"required because HOST={host!r} is not a loopback address; without it anyone "
                "who reaches the port could ask questions and read answers. Set BOT_API_TOKEN "
                "to a long random string, or set HOST=127.0.0.1."
            )
        return value

    @field_validator("sandbox_port")
    @classmethod
    def _sandbox_port_apart(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("mode") == "sandbox" and info.data.get("port") == value != 0:
            raise ValueError(f"{value} is also PORT; give them different ports.")
        return value

    @property
    def listen_address(self) -> str:
        """``host:port`` of the bot's HTTP server, an IPv6 host in brackets."""
        return f"{self._bracketed_host()}:{self.port}"

    def _bracketed_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def describe(self) -> list[tuple[str, str]]:
        """Facts for the startup log, as (label, value) pairs; never contains a secret."""
        facts: list[tuple[str, str]] = [("mode", self.mode)]
        facts.append(("channel", self.slack_channel or "the sandbox's channel"))
        if self.slack_api_url:
            facts.append(("slack api", redact_url(self.slack_api_url)))
        facts.append(("answerers", self._answerers()))
        if self.slack_mention:
            facts.append(("mention", self.slack_mention))
        facts.append(("store", self._store()))
        port = "any free port" if self.port == 0 else str(self.port)
        facts.append(("listen", f"{self._bracketed_host()}:{port}"))
        facts.append(("api auth", self._auth()))
        facts.append(
            (
                "open questions",
                f"at most {self.max_open_questions} per process, "
                f"{self.max_open_per_token} per API token",
            )
        )
        facts.append(("hosts served", self._hosts_served()))
        facts.append(
            (
                "client limits",
                f"headers {self.header_timeout:g} s, body {self.body_timeout:g} s, "
                f"{self.max_connections} connections",
            )
        )
        if self.mode == "sandbox":
            sandbox = "any free port" if self.sandbox_port == 0 else str(self.sandbox_port)
            facts.append(("sandbox port", sandbox))
        timeout = "none" if self.question_timeout is None else f"{self.question_timeout:g} s"
        facts.append(("question timeout", timeout))
        if self.dsh_host_url:
            token = "with token" if self.dsh_host_token else "no token"
            facts.append(("dsh host", f"{redact_url(self.dsh_host_url)} ({token})"))
        facts.append(("log", f"{self.log_level}, {self.log_format}"))
        facts += [("note", note) for note in self.notes]
        return facts

    @property
    def api_tokens(self) -> dict[str, str]:
        """The API's bearer tokens by name (``BOT_API_TOKEN`` is named ``default``)."""
        tokens = {"default": self.bot_api_token.get_secret_value()} if self.bot_api_token else {}
        for name, secret in (*self.bot_api_tokens, *self.bot_api_tokens_file):
            tokens[name] = secret.get_secret_value()
        return tokens

    def _auth(self) -> str:
        names = sorted(self.api_tokens)
        if not names:
            return "off (loopback only)"
        if names == ["default"]:
            return "on (BOT_API_TOKEN)"
        count = f"{len(names)} token{'' if len(names) == 1 else 's'}"
        return f"on ({count}: {', '.join(names)})"

    @property
    def served_hosts(self) -> frozenset[str] | None:
        """The ``Host`` names the bot's server answers to; ``None`` when any is served."""
        wildcard = is_wildcard(self.host)
        if wildcard and not self.allowed_hosts:
            return None
        names = {"localhost", "127.0.0.1", "::1", *self.allowed_hosts}
        if not wildcard:
            names.add(self.host.lower())
        return frozenset(names)

    def _hosts_served(self) -> str:
        if self.served_hosts is None:
            return "any Host header (HOST is a wildcard and ALLOWED_HOSTS is unset)"
        return ", ".join(sorted(self.served_hosts))

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

    def _store(self) -> str:
        kept = f"finished kept {self.retention_days:g} days"
        if self.store == "memory":
            return "memory (one process, lost on exit)"
        if self.store == "sqlite":
            return f"sqlite {self.store_path} ({kept})"
        assert self.redis_url is not None
        url = redact_url(self.redis_url.get_secret_value())
        return f"redis {url} (prefix {self.redis_prefix}, {kept})"


SETTING_NAMES: Final[frozenset[str]] = frozenset(
    name.upper() for name in Settings.model_fields if name not in _DERIVED
)
"""Every variable the bot reads."""

SETTINGS_HELP: Final[str] = render_help(
    {name.upper(): field for name, field in Settings.model_fields.items() if name not in _DERIVED}
)
"""The table of settings that ``python -m bot --help`` prints, generated from the fields."""


def load_settings(
    environ: Mapping[str, str] | None = None, env_file: Path | None = Path(".env")
) -> Settings:
    """Read the settings from ``environ`` (default ``os.environ``) over ``env_file``.

    A missing ``env_file`` is fine; pass ``None`` to read no file. Raises :class:`ConfigError`
    listing every problem found.
    """
    environment = Environment(Settings, os.environ if environ is None else environ, SETTING_NAMES)
    dotenv = DotEnvFile(Settings, env_file, SETTING_NAMES)
    init = {"notes": tuple(dotenv.notes)}
    sources = (InitSettingsSource(Settings, init_kwargs=init), environment, dotenv)
    problems = dotenv.problems
    try:
        settings = Settings(_build_sources=(sources, init))
    except ValidationError as exc:
        order = {name: index for index, name in enumerate(Settings.model_fields)}
        errors = sorted(
            exc.errors(include_url=False), key=lambda e: order.get(str(e["loc"][0]), -1)
        )
        problems += [problem(error, Settings.model_fields) for error in errors]
    if problems:
        raise ConfigError(problems)
    return settings
