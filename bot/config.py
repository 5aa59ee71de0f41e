"""Settings for ``python -m bot``, read from the environment and an optional ``.env`` file.

Every value is checked once, at start: all problems are collected and raised together as
one :class:`ConfigError`, each naming its variable. Secrets are kept as
:class:`pydantic.SecretStr` and never appear in a message, a ``repr`` or
:meth:`Settings.describe`; a password in ``REDIS_URL`` is shown as ``***``.

The Slack credentials choose the mode (see ``SETTINGS_HELP``)::

    SLACK_BOT_TOKEN + SLACK_APP_TOKEN       socket   (wins when all three are set)
    SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET  http
    none of the three                       sandbox
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from bot.logs import redact_url

__all__ = [
    "SETTINGS_HELP",
    "SETTING_NAMES",
    "ConfigError",
    "LogFormat",
    "LogLevel",
    "Mode",
    "Settings",
    "load_settings",
]

Mode = Literal["socket", "http", "sandbox"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["json", "text"]

DEFAULT_PORT: Final = 3000
DEFAULT_SANDBOX_PORT: Final = 3001
DEFAULT_MAX_BODY_BYTES: Final = 262_144
DEFAULT_SHUTDOWN_GRACE: Final = 5.0


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


class Settings(BaseModel):
    """The bot's validated settings; each field is its environment variable in lower case."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    mode: Mode = "sandbox"
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_channel: str | None = None
    slack_api_url: str | None = None
    slack_allowed_users: tuple[str, ...] = ()
    slack_allowed_usergroups: tuple[str, ...] = ()
    slack_mention: str | None = None
    redis_url: SecretStr | None = None
    redis_prefix: str = "uq"
    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    bot_api_token: SecretStr | None = None
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    question_timeout: float | None = Field(default=None, gt=0)
    shutdown_grace: float = Field(default=DEFAULT_SHUTDOWN_GRACE, ge=0)
    dsh_host_url: str | None = None
    dsh_host_token: SecretStr | None = None
    sandbox_port: int = Field(default=DEFAULT_SANDBOX_PORT, ge=0, le=65535)
    log_level: LogLevel = "INFO"
    log_format: LogFormat = "text"
    notes: tuple[str, ...] = ()
    """Things worth a line in the startup log (e.g. a credential that is set but unused)."""

    @property
    def listen_address(self) -> str:
        """``host:port`` of the bot's HTTP server, an IPv6 host in brackets."""
        return f"{self._bracketed_host()}:{self.port}"

    @property
    def store(self) -> Literal["memory", "redis"]:
        """Where pending questions live."""
        return "memory" if self.redis_url is None else "redis"

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
        auth = "on (BOT_API_TOKEN)" if self.bot_api_token else "off (loopback only)"
        facts.append(("api auth", auth))
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
        if self.redis_url is None:
            return "memory (one process)"
        return f"redis {redact_url(self.redis_url.get_secret_value())} (prefix {self.redis_prefix})"


# --- the table of settings: one row per variable, the source of SETTINGS_HELP ------------


@dataclass(frozen=True, slots=True)
class _Row:
    name: str
    default: str
    meaning: str


_ROWS: Final[tuple[_Row, ...]] = (
    _Row("SLACK_BOT_TOKEN", "-", "Bot token, xoxb-… (OAuth & Permissions). Secret."),
    _Row(
        "SLACK_APP_TOKEN",
        "-",
        "App-level token, xapp-…, scope connections:write (Basic Information). "
        "With the bot token: Socket Mode. Secret.",
    ),
    _Row(
        "SLACK_SIGNING_SECRET",
        "-",
        "Signing secret (Basic Information). With the bot token and no app token: HTTP mode, "
        "Slack posts to https://YOUR-HOST/slack/events. Secret.",
    ),
    _Row(
        "SLACK_CHANNEL",
        "sandbox's",
        "Default destination: a channel id (C…, G…), a DM id (D…) or a user id (U…, W…; "
        "the question goes to their DM with the bot). Required in socket and http mode.",
    ),
    _Row(
        "SLACK_API_URL",
        "Slack's",
        "Web API base URL, for a stand-in Slack; http(s), a trailing / is added.",
    ),
    _Row(
        "SLACK_ALLOWED_USERS",
        "anyone",
        "Comma-separated user ids (U…, W…) who may answer. With SLACK_ALLOWED_USERGROUPS: "
        "members of either. Unset: anyone who can see the question.",
    ),
    _Row(
        "SLACK_ALLOWED_USERGROUPS",
        "-",
        "Comma-separated user group ids (S…) whose members may answer.",
    ),
    _Row(
        "SLACK_MENTION",
        "-",
        "Mention added to the notification: <!here>, <!channel>, <@U…> or <!subteam^S…>.",
    ),
    _Row(
        "REDIS_URL",
        "-",
        "redis://, rediss:// or unix:// URL of a shared pending store, for several "
        "processes. Unset: in memory, one process. A password in it is never shown.",
    ),
    _Row("REDIS_PREFIX", "uq", "Prefix of every Redis key and channel."),
    _Row("HOST", "127.0.0.1", "Address the HTTP server (API, /healthz, /slack/events) binds."),
    _Row("PORT", str(DEFAULT_PORT), "Port of that server, 0-65535; 0 picks any free port."),
    _Row(
        "BOT_API_TOKEN",
        "-",
        "Bearer token the HTTP API requires. Unset: the API is open, so HOST must be a "
        "loopback address. Secret.",
    ),
    _Row("MAX_BODY_BYTES", str(DEFAULT_MAX_BODY_BYTES), "Largest HTTP API request body."),
    _Row(
        "QUESTION_TIMEOUT",
        "none",
        "Seconds a question waits for an answer before it fails with ASK_TIMEOUT; > 0.",
    ),
    _Row(
        "SHUTDOWN_GRACE",
        f"{DEFAULT_SHUTDOWN_GRACE:g}",
        "Seconds to finish pending Slack updates on shutdown.",
    ),
    _Row("DSH_HOST_URL", "-", "http(s) URL of a DeepSeek Harness web host to serve."),
    _Row("DSH_HOST_TOKEN", "-", "Token for DSH_HOST_URL. Secret."),
    _Row(
        "SANDBOX_PORT",
        str(DEFAULT_SANDBOX_PORT),
        "Sandbox mode: port of the stand-in Slack (its Web API and its page); 0 picks any "
        "free port.",
    ),
    _Row("LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR."),
    _Row("LOG_FORMAT", "text", "text, or json (one object a line)."),
)

SETTING_NAMES: Final[frozenset[str]] = frozenset(row.name for row in _ROWS)


def _render_help() -> str:
    name_width = max(len(row.name) for row in _ROWS) + 2
    default_width = max(len(row.default) for row in _ROWS) + 2
    indent = " " * (2 + name_width + default_width)
    lines = [
        "Settings are read from the environment, then from KEY=VALUE lines in ./.env",
        "(a variable set in the environment wins, even when empty; empty means unset).",
        "",
        "The Slack credentials choose the mode:",
        "  SLACK_BOT_TOKEN + SLACK_APP_TOKEN       socket   Socket Mode, no public URL",
        "  SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET  http     Slack posts to /slack/events",
        "  none of them                            sandbox  a local stand-in for Slack",
        "",
        f"  {'VARIABLE':<{name_width}}{'DEFAULT':<{default_width}}MEANING",
    ]
    for row in _ROWS:
        first = f"  {row.name:<{name_width}}{row.default:<{default_width}}"
        lines += textwrap.wrap(
            row.meaning,
            width=100,
            initial_indent=first,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
    return "\n".join(lines)


SETTINGS_HELP: Final[str] = _render_help()


# --- reading ------------------------------------------------------------------------------

# What a Slack credential is, from its prefix (longest first); shown instead of the value.
_TOKEN_KINDS: Final = (
    ("xoxe.xoxb-", "an expiring bot token (token rotation is on)"),
    ("xoxe.xoxp-", "an expiring user token"),
    ("xoxe-", "a refresh token"),
    ("xoxb-", "a bot token (xoxb-…)"),
    ("xoxp-", "a user token (xoxp-…)"),
    ("xapp-", "an app-level token (xapp-…)"),
)
_TOKEN_LIKE: Final = re.compile(r"xox[a-z]?[-.]|xapp-", re.IGNORECASE)
_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CHANNEL: Final = re.compile(r"[CGDUW][A-Z0-9]+")
_USER: Final = re.compile(r"[UW][A-Z0-9]+")
_USERGROUP: Final = re.compile(r"S[A-Z0-9]+")
_MENTION: Final = re.compile(r"<!here>|<!channel>|<@[UW][A-Z0-9]+>|<!subteam\^S[A-Z0-9]+>")
_HOSTNAME: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\.?")
_REDIS_PREFIX: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_UNPARSABLE: Final = "not a valid URL (check the port, and [ ] around an IPv6 address)."
_OUR_PREFIXES: Final = ("SLACK_", "REDIS_", "BOT_", "DSH_", "SANDBOX_", "LOG_", "QUESTION_")


def load_settings(
    environ: Mapping[str, str] | None = None, env_file: Path | None = Path(".env")
) -> Settings:
    """Read the settings from ``environ`` (default ``os.environ``) over ``env_file``.

    A missing ``env_file`` is fine; pass ``None`` to read no file. Raises :class:`ConfigError`
    listing every problem found.
    """
    problems: list[str] = []
    notes: list[str] = []
    values: dict[str, str] = {}
    if env_file is not None:
        from_file = _read_env_file(env_file, problems)
        values.update({k: v for k, v in from_file.items() if k in SETTING_NAMES})
        notes += [
            f"{env_file} sets {key}, which is not a setting of the bot (a typo?)"
            for key in sorted(from_file)
            if key not in SETTING_NAMES and key.startswith(_OUR_PREFIXES)
        ]
    env = os.environ if environ is None else environ
    values.update({name: env[name] for name in SETTING_NAMES if name in env})

    read = _Reader(values, problems)
    bot_token = read.token("SLACK_BOT_TOKEN", "xoxb-", "a bot token", "OAuth & Permissions")
    app_token = read.token("SLACK_APP_TOKEN", "xapp-", "an app-level token", "Basic Information")
    signing_secret = read.signing_secret()
    mode = _mode(read, notes)
    channel = read.channel(required=mode != "sandbox")
    host = read.host()
    port = read.integer("PORT", DEFAULT_PORT, 0, 65535, "0 picks any free port")
    bot_api_token = read.secret("BOT_API_TOKEN")
    if host is not None and bot_api_token is None and not _is_loopback(host):
        problems.append(
            f"BOT_API_TOKEN: required because HOST={host!r} is not a loopback address; "
            "without it anyone who reaches the port could ask questions and read answers. "
            "Set BOT_API_TOKEN to a long random string, or set HOST=127.0.0.1."
        )
    if mode == "http" and host is not None and _is_loopback(host):
        notes.append(
            f"HTTP mode listening on {host}: Slack reaches /slack/events only through a "
            "reverse proxy or tunnel on this machine."
        )
    sandbox_port = read.integer(
        "SANDBOX_PORT", DEFAULT_SANDBOX_PORT, 0, 65535, "0 picks any free port"
    )
    if mode == "sandbox" and port == sandbox_port != 0:
        problems.append(f"SANDBOX_PORT: {sandbox_port} is also PORT; give them different ports.")
    dsh_host_url = read.url("DSH_HOST_URL", ("http", "https"))
    dsh_host_token = read.secret("DSH_HOST_TOKEN")
    if dsh_host_token is not None and dsh_host_url is None and "DSH_HOST_URL" not in read.bad:
        problems.append("DSH_HOST_TOKEN: set without DSH_HOST_URL; set both or neither.")
    if dsh_host_token is not None and dsh_host_url is not None:
        dsh_host = urlsplit(dsh_host_url)
        if dsh_host.scheme.lower() == "http" and not _is_loopback(dsh_host.hostname or ""):
            notes.append(
                "DSH_HOST_URL is plain http to another machine: DSH_HOST_TOKEN travels unencrypted."
            )

    fields = {
        "mode": mode,
        "slack_bot_token": bot_token,
        "slack_app_token": app_token,
        "slack_signing_secret": signing_secret,
        "slack_channel": channel,
        "slack_api_url": read.url("SLACK_API_URL", ("http", "https"), trailing_slash=True),
        "slack_allowed_users": read.ids("SLACK_ALLOWED_USERS", _USER, "user ids (U…, W…)"),
        "slack_allowed_usergroups": read.ids(
            "SLACK_ALLOWED_USERGROUPS", _USERGROUP, "user group ids (S…)"
        ),
        "slack_mention": read.mention(),
        "redis_url": read.redis_url(),
        "redis_prefix": read.redis_prefix(),
        "host": host,
        "port": port,
        "bot_api_token": bot_api_token,
        "max_body_bytes": read.integer(
            "MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, 1, None, "a byte count"
        ),
        "question_timeout": read.seconds("QUESTION_TIMEOUT", None, zero_ok=False),
        "shutdown_grace": read.seconds("SHUTDOWN_GRACE", DEFAULT_SHUTDOWN_GRACE, zero_ok=True),
        "dsh_host_url": dsh_host_url,
        "dsh_host_token": dsh_host_token,
        "sandbox_port": sandbox_port,
        "log_level": read.choice(
            "LOG_LEVEL", get_args(LogLevel), "INFO", aliases={"WARN": "WARNING"}
        ),
        "log_format": read.choice("LOG_FORMAT", get_args(LogFormat), "text"),
        "notes": tuple(notes),
    }
    if problems:
        order = {row.name: index for index, row in enumerate(_ROWS)}
        raise ConfigError(sorted(problems, key=lambda p: order.get(p.partition(":")[0], -1)))
    return Settings.model_validate(fields)


def _mode(read: _Reader, notes: list[str]) -> Mode | None:
    """The mode the credentials choose, or ``None`` (with a problem) when they choose none."""
    bot = read.present("SLACK_BOT_TOKEN")
    app = read.present("SLACK_APP_TOKEN")
    secret = read.present("SLACK_SIGNING_SECRET")
    if bot and app:
        if secret:
            notes.append(
                "SLACK_APP_TOKEN and SLACK_SIGNING_SECRET are both set: running in Socket Mode "
                "and ignoring the signing secret (unset SLACK_APP_TOKEN for HTTP mode)."
            )
        return "socket"
    if bot and secret:
        return "http"
    if not (bot or app or secret):
        return "sandbox"
    if bot:
        read.problems.append(
            "SLACK_BOT_TOKEN: set alone, so Slack has no way to deliver clicks. Either set "
            "SLACK_APP_TOKEN (xapp-…, scope connections:write) for Socket Mode, no public URL "
            "needed; or set SLACK_SIGNING_SECRET for HTTP mode, where Slack posts to "
            "https://YOUR-HOST/slack/events. Unset it to run the local sandbox."
        )
    else:
        given = [n for n, ok in (("SLACK_APP_TOKEN", app), ("SLACK_SIGNING_SECRET", secret)) if ok]
        read.problems.append(
            f"SLACK_BOT_TOKEN: missing, but {' and '.join(given)} "
            f"{'is' if len(given) == 1 else 'are'} set; the bot posts with a bot token "
            "(xoxb-…, from OAuth & Permissions). Set it, or unset "
            f"{' and '.join(given)} to run the local sandbox."
        )
    return None


class _Reader:
    """Parses one variable at a time, appending a problem for each bad value."""

    def __init__(self, values: Mapping[str, str], problems: list[str]) -> None:
        self._values = values
        self.problems = problems
        self.bad: set[str] = set()  # variables that are set but malformed

    def _fail(self, name: str, message: str) -> None:
        self.bad.add(name)
        self.problems.append(f"{name}: {message}")

    def text(self, name: str) -> str | None:
        """The stripped value, or ``None`` when unset or empty."""
        raw = self._values.get(name)
        if raw is None:
            return None
        return raw.strip() or None

    def present(self, name: str) -> bool:
        """Whether ``name`` has a non-empty value, well-formed or not."""
        return self.text(name) is not None

    def secret(self, name: str) -> SecretStr | None:
        """A secret; only its shape is checked, and the value is never quoted."""
        value = self.text(name)
        if value is None:
            return None
        if any(ch.isspace() for ch in value):
            self._fail(name, "contains whitespace (a copy-paste slip?); the value is not shown.")
            return None
        return SecretStr(value)

    def token(self, name: str, prefix: str, kind: str, where: str) -> SecretStr | None:
        """A Slack token that must start with ``prefix``."""
        secret = self.secret(name)
        if secret is None:
            return None
        value = secret.get_secret_value()
        if value.startswith(prefix) and len(value) > len(prefix):
            return secret
        looks = next((k for p, k in _TOKEN_KINDS if value.startswith(p)), None)
        found = f"; this value is {looks}" if looks else ""
        self._fail(name, f"must be {kind} starting with {prefix} (from {where}){found}.")
        return None

    def signing_secret(self) -> SecretStr | None:
        """The signing secret; a token pasted here is caught."""
        name = "SLACK_SIGNING_SECRET"
        secret = self.secret(name)
        if secret is not None and _TOKEN_LIKE.match(secret.get_secret_value()):
            self._fail(
                name,
                "this value is a token; the signing secret is under Basic Information → "
                "App Credentials.",
            )
            return None
        return secret

    def channel(self, *, required: bool) -> str | None:
        """The default destination id."""
        name = "SLACK_CHANNEL"
        value = self.text(name)
        if value is None:
            if required:
                self._fail(
                    name,
                    "required with Slack credentials: the id of the channel (C…, G…), DM (D…) "
                    "or user (U…, W…) that questions go to by default. A channel's id is at the "
                    "bottom of its About tab.",
                )
            return None
        if _CHANNEL.fullmatch(value):
            return value
        hint = " Use the channel's id, not its name." if value.startswith("#") else ""
        self._fail(
            name,
            f"{_show(value)} is not a channel (C…, G…), DM (D…) or user (U…, W…) id.{hint}",
        )
        return None

    def host(self) -> str | None:
        """The bind address (an IP address or a host name), brackets removed."""
        name = "HOST"
        value = self.text(name) or "127.0.0.1"
        bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
        try:
            return str(ipaddress.ip_address(bare))
        except ValueError:
            pass
        if _HOSTNAME.fullmatch(bare) and len(bare) <= 253:
            return bare
        self._fail(name, f"{_show(value)} is not an IP address or a host name.")
        return None

    def integer(self, name: str, default: int, low: int, high: int | None, hint: str) -> int:
        """A whole number in ``[low, high]``."""
        value = self.text(name)
        if value is None:
            return default
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        try:
            number = int(value, 10)
        except ValueError:
            number = None
        if number is None or number < low or (high is not None and number > high):
            self._fail(name, f"{_show(value)} is not a whole number {span} ({hint}).")
            return default
        return number

    def seconds(self, name: str, default: float | None, *, zero_ok: bool) -> float | None:
        """A finite number of seconds, ``>= 0`` or ``> 0``."""
        value = self.text(name)
        if value is None:
            return default
        try:
            number: float | None = float(value)
        except ValueError:
            number = None
        too_small = number is not None and (number < 0 or (number == 0 and not zero_ok))
        if number is None or not math.isfinite(number) or too_small:
            bound = "0 or more" if zero_ok else "more than 0; leave it unset for no limit"
            self._fail(name, f"{_show(value)} is not a number of seconds ({bound}).")
            return default
        return number

    def choice(
        self,
        name: str,
        choices: tuple[str, ...],
        default: str,
        aliases: Mapping[str, str] | None = None,
    ) -> str:
        """One of ``choices``, matched without regard to case."""
        value = self.text(name)
        if value is None:
            return default
        by_key = {c.upper(): c for c in choices} | dict(aliases or {})
        chosen = by_key.get(value.upper())
        if chosen is None:
            self._fail(name, f"{_show(value)} is not one of {', '.join(choices)}.")
            return default
        return chosen

    def url(
        self, name: str, schemes: tuple[str, ...], *, trailing_slash: bool = False
    ) -> str | None:
        """An absolute URL with one of ``schemes`` and a host."""
        value = self.text(name)
        if value is None:
            return None
        try:
            parts = urlsplit(value)
            _ = parts.port
        except ValueError:
            self._fail(name, _UNPARSABLE)
            return None
        if parts.scheme.lower() not in schemes or not parts.hostname:
            want = " or ".join(f"{s}://" for s in schemes)
            self._fail(name, f"{_show(redact_url(value))} is not an absolute {want} URL.")
            return None
        if trailing_slash and not value.endswith("/"):
            if parts.query or parts.fragment:
                self._fail(name, "must be a base URL ending in /, with no query or fragment.")
                return None
            value += "/"
        return value

    def ids(self, name: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
        """A comma-separated list of Slack ids, duplicates dropped, order kept."""
        value = self.text(name)
        if value is None:
            return ()
        items = [item.strip() for item in value.split(",") if item.strip()]
        wrong = [item for item in items if not pattern.fullmatch(item)]
        if wrong:
            shown = ", ".join(_show(item) for item in wrong)
            self._fail(name, f"not {what}: {shown}. Use ids, not names or @handles.")
            return ()
        return tuple(dict.fromkeys(items))

    def mention(self) -> str | None:
        """A Slack mention for the notification."""
        name = "SLACK_MENTION"
        value = self.text(name)
        if value is None or _MENTION.fullmatch(value):
            return value
        plain = {"@here": "<!here>", "@channel": "<!channel>"}.get(value.lower())
        hint = f" Write {plain}." if plain else ""
        self._fail(
            name,
            f"{_show(value)} is not one of <!here>, <!channel>, <@U…> or <!subteam^S…>.{hint}",
        )
        return None

    def redis_url(self) -> SecretStr | None:
        """A ``redis://``, ``rediss://`` or ``unix://`` URL; kept secret for its password."""
        name = "REDIS_URL"
        value = self.text(name)
        if value is None:
            return None
        shown = _show(redact_url(value))
        try:
            parts = urlsplit(value)
            _ = parts.port
        except ValueError:
            self._fail(name, _UNPARSABLE)
            return None
        scheme = parts.scheme.lower()
        if scheme in ("redis", "rediss"):
            if not parts.hostname:
                self._fail(name, f"{shown} has no host; e.g. redis://localhost:6379/0.")
                return None
            if not re.fullmatch(r"/?\d*", parts.path):
                self._fail(name, f"{shown}: the path must be a database number, as in /0.")
                return None
        elif scheme == "unix":
            if not parts.path:
                self._fail(name, f"{shown} has no socket path; e.g. unix:///run/redis.sock.")
                return None
        else:
            self._fail(name, f"{shown} is not a redis://, rediss:// or unix:// URL.")
            return None
        return SecretStr(value)

    def redis_prefix(self) -> str:
        """The Redis key prefix."""
        name = "REDIS_PREFIX"
        value = self.text(name)
        if value is None:
            return "uq"
        if _REDIS_PREFIX.fullmatch(value):
            return value
        self._fail(name, f"{_show(value)}: use 1-64 letters, digits or _ . : -")
        return "uq"


def _show(value: str) -> str:
    """A non-secret value, quoted and shortened for a message; token-like values are hidden."""
    if _TOKEN_LIKE.search(value):
        return "(a value that looks like a Slack token, not shown)"
    if len(value) > 60:
        value = value[:57] + "..."
    return repr(value)


def _is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_env_file(path: Path, problems: list[str]) -> dict[str, str]:
    """The KEY=VALUE pairs of ``path``; a missing file gives none."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot be read ({type(exc).__name__}).")
        return {}
    return _parse_env(text, str(path), problems)


def _parse_env(text: str, source: str, problems: list[str]) -> dict[str, str]:
    """Parse ``.env`` text: ``KEY=VALUE`` lines, ``#`` comments, optional quotes.

    ``export`` before a key is allowed. Single quotes are literal; double quotes understand
    ``\\"``, ``\\\\`` and ``\\n``. An unquoted value ends at `` #``. Later lines win.
    Problems name the line, never its value.
    """
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[len("export ") :].lstrip()
        key, equals, rest = stripped.partition("=")
        key = key.strip()
        if not equals or not _KEY.fullmatch(key):
            problems.append(f"{source} line {number}: expected KEY=VALUE.")
            continue
        value = _parse_value(rest.strip())
        if value is None:
            problems.append(
                f"{source} line {number} ({key}): a quoted value must close its quote on the "
                "same line, followed by nothing but a # comment."
            )
            continue
        values[key] = value
    return values


def _parse_value(rest: str) -> str | None:
    """One value after ``=``; ``None`` when a quote is left open or followed by text."""
    if not rest or rest[0] not in "\"'":
        comment = re.search(r"\s#", rest)
        return (rest[: comment.start()] if comment else rest).strip()
    quote, i = rest[0], 1
    chars: list[str] = []
    while i < len(rest):
        ch = rest[i]
        if ch == quote:
            after = rest[i + 1 :].strip()
            return "".join(chars) if not after or after.startswith("#") else None
        if ch == "\\" and quote == '"' and i + 1 < len(rest):
            nxt = rest[i + 1]
            chars.append({"n": "\n", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
            continue
        chars.append(ch)
        i += 1
    return None
