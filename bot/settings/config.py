"""Settings for ``python -m bot`` from the environment, then ``.env`` (read literally; its own
names only; set but empty in the environment wins): ``load_settings`` raises one ``ConfigError``
naming every problem's variable, never a secret; the credentials choose the mode."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from dotenv.parser import parse_stream
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from adapters.httpguard import is_loopback
from adapters.urls import redact_url, split_token
from bot.settings.checks import Mode, one_of, plain_http_elsewhere
from bot.settings.http_server import ServerSettings
from bot.settings.parts import DeadlineSettings, DshSettings, SlackSettings, StoreSettings
from bot.settings.text import hiding, invalid, plural, problem, render_help, secret_values

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["json", "text"]


class ConfigError(Exception):
    """The settings are incomplete or malformed; ``problems`` lists every one of them."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: list[str] = list(problems)
        super().__init__(self.problems)

    def __str__(self) -> str:
        lines = [f"{plural(len(self.problems), 'problem')} in the settings:"]
        lines += [f"  - {problem}" for problem in self.problems]
        lines.append("Run `python -m bot --help` for the table of settings.")
        return "\n".join(lines)


# The parts' fields come first from the last base: Slack's, the store's, the server's, the
# deadlines', the dsh host's, then these below (the order of the table and of the problems).
class Settings(DshSettings, DeadlineSettings, ServerSettings, StoreSettings, SlackSettings):
    """The bot's validated settings; each field but ``mode`` and ``notes`` is a variable."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, hide_input_in_errors=True
    )

    sandbox_port: int = Field(
        3001,
        ge=0,
        le=65535,
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

    @model_validator(mode="wrap")
    @classmethod
    def _check_as_a_whole(cls, data: Any, handler: Any) -> Any:
        """Empty means unset; the credentials choose the mode; every problem is reported, and
        no message quotes a secret of any setting."""
        if not isinstance(data, dict):
            return handler(data)
        given = {k: v.strip() if isinstance(v, str) else v for k, v in data.items()}
        given = {k: v for k, v in given.items() if v != ""}  # None stays: it may be invalid
        problems: list[tuple[str, str]] = []
        notes = [*given.pop("notes", ())]
        serves = given.pop("serves", True) is not False
        try:
            mode: Mode | None = _choose_mode(given, notes, serves=serves)
        except ValueError as exc:
            mode = None
            problems.append(("slack_bot_token", str(exc)))
        if mode is not None and given.setdefault("mode", mode) != mode:
            problems.append(("mode", f"{given['mode']!r}, but the credentials choose {mode}."))
        if str(given.get("store")).lower() == "auto":  # the default --help shows
            given["store"] = None
        if given.get("store") is None:
            sandbox = given.get("mode", mode or "sandbox") == "sandbox"
            redis = given.get("redis_url") is not None
            given["store"] = "redis" if redis else "memory" if sandbox else "sqlite"
        elif str(given["store"]).lower() == "redis" and given.get("redis_url") is None:
            problems.append(("store", "redis needs REDIS_URL (e.g. redis://localhost:6379/0)."))
        if isinstance(url := given.get("dsh_host_url"), str):
            given["dsh_host_url"], token = split_token(url)
            if token is not None and given.setdefault("dsh_host_token", token) != token:
                problems.append(
                    ("dsh_host_token", "differs from the token in DSH_HOST_URL; give it once.")
                )
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
        given["notes"] = tuple(dict.fromkeys(notes))
        secrets = secret_values(cls.model_fields, given)
        try:
            with hiding(secrets):
                settings = handler(given)
        except ValidationError as exc:
            raise invalid(cls.__name__, exc.errors(include_url=False), problems, secrets) from None
        if problems:
            raise invalid(cls.__name__, [], problems, secrets)
        return settings

    @field_validator("sandbox_port")
    @classmethod
    def _sandbox_port_apart(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("mode") == "sandbox" and info.data.get("port") == value != 0:
            raise ValueError(f"{value} is also PORT; give them different ports.")
        return value

    def describe(self) -> list[tuple[str, str]]:
        """Facts for the startup log, as (label, value) pairs; never contains a secret."""

        def port(number: int) -> str:
            return "any free port" if number == 0 else str(number)

        dsh = self.dsh_host_url and (
            f"{redact_url(self.dsh_host_url)} ({'with' if self.dsh_host_token else 'no'} token)"
        )
        timeout = self.question_timeout
        facts = [
            ("mode", self.mode),
            ("channel", self.slack_channel or "the sandbox's channel"),
            ("slack api", self.slack_api_url and redact_url(self.slack_api_url)),
            ("answerers", self._answerers()),
            ("mention", self.slack_mention),
            ("store", self._store()),
            ("listen", f"{self.bracketed_host}:{port(self.port)}"),
            ("api auth", self._auth()),
            (
                "open questions",
                f"at most {self.max_open_questions} per process, "
                f"{self.max_open_per_token} per API token",
            ),
            ("hosts served", self._hosts_served()),
            (
                "client limits",
                f"headers {self.header_timeout:g} s, body {self.body_timeout:g} s, "
                f"{self.max_connections} connections",
            ),
            ("sandbox port", port(self.sandbox_port) if self.mode == "sandbox" else None),
            ("question timeout", "none" if timeout is None else f"{timeout:g} s"),
            ("dsh host", dsh),
            ("log", f"{self.log_level}, {self.log_format}"),
            *(("note", note) for note in self.notes),
        ]
        return [(label, value) for label, value in facts if value]


_PRODUCTION: Final = (
    "redis_url",
    "dsh_host_url",
    "dsh_host_token",
    "slack_allowed_users",
    "slack_allowed_usergroups",
    "dsh_approvers",
    "dsh_approver_usergroups",
)
"""Settings only a production setup has: with any of them, no credentials is a mistake."""


def _choose_mode(given: Mapping[str, Any], notes: list[str], *, serves: bool = True) -> Mode:
    """The mode the credentials present in ``given`` choose (``ValueError``: why
    SLACK_BOT_TOKEN is wrong); ``notes`` gets what is worth a line in the log."""
    bot, app, secret = (
        given.get(name) is not None
        for name in ("slack_bot_token", "slack_app_token", "slack_signing_secret")
    )
    if bot and app:
        if secret:
            notes.append(
                "SLACK_APP_TOKEN and SLACK_SIGNING_SECRET are both set: running in Socket Mode "
                "and ignoring the signing secret (unset SLACK_APP_TOKEN for HTTP mode)."
            )
        return "socket"
    if bot and secret:
        host = str(given.get("host") or "127.0.0.1").strip("[]")
        if is_loopback(host):
            notes.append(
                f"HTTP mode listening on {host}: Slack reaches /slack/events only through a "
                "reverse proxy or tunnel on this machine."
            )
        return "http"
    if not (bot or app or secret):
        production = [n.upper() for n in _PRODUCTION if given.get(n) not in (None, "", ())]
        if str(given.get("mode", "")).lower() == "sandbox" or not production or not serves:
            return "sandbox"
        raise ValueError(
            f"missing, while {', '.join(production)} {'is' if len(production) == 1 else 'are'}"
            " set: that is a production setup, so the local sandbox (whose page anyone on "
            "this machine may answer) does not start. Set SLACK_BOT_TOKEN with "
            "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET, or set MODE=sandbox to run the "
            "sandbox on purpose."
        )
    if bot:
        raise ValueError(
            "set alone, so Slack has no way to deliver clicks. Either set SLACK_APP_TOKEN "
            "(xapp-…, scope connections:write) for Socket Mode, no public URL needed; or set "
            "SLACK_SIGNING_SECRET for HTTP mode, where Slack posts to "
            "https://YOUR-HOST/slack/events. Unset it to run the local sandbox."
        )
    named = [n for n, ok in (("SLACK_APP_TOKEN", app), ("SLACK_SIGNING_SECRET", secret)) if ok]
    raise ValueError(
        f"missing, but {' and '.join(named)} {'is' if len(named) == 1 else 'are'} set; the "
        "bot posts with a bot token (xoxb-…, from OAuth & Permissions). Set it, or unset "
        f"{' and '.join(named)} to run the local sandbox."
    )


_VARIABLES: Final = {
    name.upper(): field for name, field in Settings.model_fields.items() if name != "notes"
}
SETTING_NAMES: Final[frozenset[str]] = frozenset(_VARIABLES)
"""Every variable the bot reads."""
SETTINGS_HELP: Final[str] = render_help(_VARIABLES)
"""The table of settings that ``python -m bot --help`` prints, generated from the fields."""


_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OUR_PREFIXES: Final = ("SLACK_", "REDIS_", "BOT_", "DSH_", "SANDBOX_", "LOG_", "QUESTION_")


def _read_env_file(path: Path | None, problems: list[str], notes: list[str]) -> dict[str, str]:
    """The bot's variables a ``KEY=VALUE`` file sets, later lines winning (missing: none);
    ``problems`` gets each line that cannot be read, ``notes`` each unknown name of ours."""
    try:
        text = path.read_text(encoding="utf-8-sig") if path is not None else ""
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot be read ({type(exc).__name__}).")
        return {}
    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(text)):
        # The parser counts from where the binding's text starts, blank lines included.
        text_of = binding.original.string
        blank = text_of[: len(text_of) - len(text_of.lstrip())]
        line = binding.original.line + blank.count("\n")
        where = f"{path} line {line}"
        if binding.error:
            problems.append(
                f"{where}: cannot be read as KEY=VALUE (a quote left open, or text after "
                "the closing quote?)."
            )
        elif binding.key is None:
            continue  # a comment or a blank line
        elif binding.value is None or not _KEY.fullmatch(binding.key):
            problems.append(f"{where}: expected KEY=VALUE.")
        else:
            values[binding.key] = binding.value
    notes += [
        f"{path} sets {key}, which is not a setting of the bot (a typo?)"
        for key in sorted(values)
        if key not in SETTING_NAMES and key.startswith(_OUR_PREFIXES)
    ]
    return {key.lower(): value for key, value in values.items() if key in SETTING_NAMES}


def load_settings(
    environ: Mapping[str, str] | None = None,
    env_file: Path | None = Path(".env"),
    *,
    serves: bool = True,
) -> Settings:
    """Read the settings from ``environ`` (default ``os.environ``) over ``env_file`` (missing is
    fine; ``None`` reads none); a ``ConfigError`` lists every problem found."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    notes: list[str] = []
    given: dict[str, Any] = _read_env_file(env_file, problems, notes)
    given |= {name.lower(): environ[name] for name in SETTING_NAMES if name in environ}
    given |= {"notes": tuple(notes), **({} if serves else {"serves": False})}
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        order = {name: index for index, name in enumerate(Settings.model_fields)}
        errors = sorted(
            exc.errors(include_url=False), key=lambda e: order.get(str(e["loc"][0]), -1)
        )
        problems += [problem(error, Settings.model_fields) for error in errors]
    if problems:
        raise ConfigError(problems)
    return settings
