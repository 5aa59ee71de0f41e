"""The types settings are made of, and checks for what types alone cannot express; each raises
``ValueError`` with one sentence quoting a value only through ``show``."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, SecretStr

from adapters.httpguard import is_loopback
from adapters.urls import redact_url
from bot.settings.text import TOKEN_LIKE, show

# What a Slack credential is, from its prefix (longest first); shown instead of the value.
_TOKEN_KINDS: Final = (
    ("xoxe.xoxb-", "an expiring bot token (token rotation is on)"),
    ("xoxe.xoxp-", "an expiring user token"),
    ("xoxe-", "a refresh token"),
    ("xoxb-", "a bot token (xoxb-…)"),
    ("xoxp-", "a user token (xoxp-…)"),
    ("xapp-", "an app-level token (xapp-…)"),
)
_CHANNEL: Final = re.compile(r"[CGDUW][A-Z0-9]+")  # a channel, private channel, DM or user
_MENTION: Final = re.compile(r"<!here>|<!channel>|<@[UW][A-Z0-9]+>|<!subteam\^S[A-Z0-9]+>")
_HOSTNAME: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\.?")
_REDIS_PREFIX: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_UNPARSABLE: Final = "not a valid URL (check the port, and [ ] around an IPv6 address)."


def host_names(value: Any) -> Any:
    """A comma-separated list of host names or addresses, lower case, without duplicates."""
    if not isinstance(value, str):
        return value
    items = [item.strip().lower().strip("[]").rstrip(".") for item in value.split(",")]
    names = [item for item in items if item]
    if wrong := [name for name in names if _host(name) is None]:
        raise ValueError(f"not host names: {', '.join(show(w) for w in wrong)}.")
    return tuple(dict.fromkeys(names))


def no_whitespace(value: Any) -> Any:
    """Before a secret is wrapped: refuse whitespace inside it, without quoting it."""
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    if isinstance(raw, str) and any(ch.isspace() for ch in raw):
        raise ValueError("contains whitespace (a copy-paste slip?); the value is not shown.")
    return value


def slack_token(prefix: str, kind: str, where: str) -> Callable[[SecretStr], SecretStr]:
    """A check that a Slack token starts with ``prefix``; names what was pasted instead."""

    def check(secret: SecretStr) -> SecretStr:
        value = secret.get_secret_value()
        if value.startswith(prefix) and len(value) > len(prefix):
            return secret
        looks = next((k for p, k in _TOKEN_KINDS if value.startswith(p)), None)
        found = f"; this value is {looks}" if looks else ""
        raise ValueError(f"must be {kind} starting with {prefix} (from {where}){found}.")

    return check


def check_signing_secret(secret: SecretStr) -> SecretStr:
    """The signing secret is not a token pasted in the wrong place."""
    if TOKEN_LIKE.match(secret.get_secret_value()):
        raise ValueError(
            "this value is a token; the signing secret is under Basic Information → "
            "App Credentials."
        )
    return secret


def check_channel(value: str) -> str:
    """A channel (C…, G…), DM (D…) or user (U…, W…) id."""
    if _CHANNEL.fullmatch(value):
        return value
    hint = " Use the channel's id, not its name." if value.startswith("#") else ""
    raise ValueError(f"{show(value)} is not a channel (C…, G…), DM (D…) or user (U…, W…) id.{hint}")


def _host(value: str) -> str | None:
    """An IP address (brackets removed, normalised) or a host name; ``None``: neither."""
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        return bare if _HOSTNAME.fullmatch(bare) and len(bare) <= 253 else None


def check_host(value: str) -> str:
    """An IP address (brackets removed, normalised) or a host name."""
    if (host := _host(value)) is None:
        raise ValueError(f"{show(value)} is not an IP address or a host name.")
    return host


def url(*schemes: str, trailing_slash: bool = False) -> Callable[[str], str]:
    """A check for an absolute URL with one of ``schemes`` and a host."""

    def check(value: str) -> str:
        try:
            parts = urlsplit(value)
            _ = parts.port
        except ValueError:
            raise ValueError(_UNPARSABLE) from None
        if parts.scheme.lower() not in schemes or not parts.hostname:
            want = " or ".join(f"{s}://" for s in schemes)
            raise ValueError(f"{show(redact_url(value))} is not an absolute {want} URL.")
        if trailing_slash and not value.endswith("/"):
            if parts.query or parts.fragment:
                raise ValueError("must be a base URL ending in /, with no query or fragment.")
            value += "/"
        return value

    return check


def id_list(pattern: str, what: str) -> Callable[[Any], Any]:
    """A before-check turning ``"A, B,,A"`` into ``("A", "B")`` (blank never comes: it is
    unset); a value naming no id (``","``) is refused: an allow-list must not fail open."""

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        items = [item.strip() for item in value.split(",") if item.strip()]
        if not items:
            raise ValueError(
                f"{show(value)} names no {what}. Give at least one id, or leave the setting "
                "empty (unset)."
            )
        wrong = [item for item in items if not re.fullmatch(pattern, item)]
        if wrong:
            shown = ", ".join(show(item) for item in wrong)
            raise ValueError(f"not {what}: {shown}. Use ids, not names or @handles.")
        return tuple(dict.fromkeys(items))

    return check


def json_object(example: str) -> Callable[[Any], Any]:
    """A before-check decoding a JSON object from a string; an object (or a model) passes on."""

    def check(value: Any) -> Any:
        decoded = value
        if isinstance(value, str):
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                    f"e.g. {example}"
                ) from None
        # (Settings(...) in code may be given the decoded value)
        if isinstance(decoded, str | int | float | list | tuple):
            raise ValueError(f"must be a JSON object, e.g. {example}")
        return decoded

    return check


def check_mention(value: str) -> str:
    """A Slack mention for the notification."""
    if _MENTION.fullmatch(value):
        return value
    plain = {"@here": "<!here>", "@channel": "<!channel>"}.get(value.lower())
    hint = f" Write {plain}." if plain else ""
    raise ValueError(
        f"{show(value)} is not one of <!here>, <!channel>, <@U…> or <!subteam^S…>.{hint}"
    )


def check_redis_url(secret: SecretStr) -> SecretStr:
    """A ``redis://``, ``rediss://`` or ``unix://`` URL; messages hide its password."""
    value = secret.get_secret_value()
    shown = show(redact_url(value))
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError(_UNPARSABLE) from None
    if "@" in value.partition("://")[2] and "@" not in parts.netloc:
        raise ValueError(
            f"{shown}: an @ after the host part; a / ? or # in the password ends the host "
            "part early. Percent-encode them in the password (%2F %3F %23)."
        )
    try:
        _ = parts.port
    except ValueError:
        raise ValueError(_UNPARSABLE) from None
    scheme = parts.scheme.lower()
    if scheme in ("redis", "rediss"):
        if not parts.hostname:
            raise ValueError(f"{shown} has no host; e.g. redis://localhost:6379/0.")
        if not re.fullmatch(r"/?\d*", parts.path):
            raise ValueError(f"{shown}: the path must be a database number, as in /0.")
    elif scheme == "unix":
        if not parts.path:
            raise ValueError(f"{shown} has no socket path; e.g. unix:///run/redis.sock.")
    else:
        raise ValueError(f"{shown} is not a redis://, rediss:// or unix:// URL.")
    return secret


def check_redis_prefix(value: str) -> str:
    """A Redis key prefix."""
    if _REDIS_PREFIX.fullmatch(value):
        return value
    raise ValueError(f"{show(value)}: use 1-64 letters, digits or _ . : -")


def one_of(*choices: str, aliases: dict[str, str] | None = None) -> Callable[[Any], Any]:
    """A before-check matching ``choices`` without regard to case (unknown values pass on)."""
    by_key = {c.upper(): c for c in choices} | dict(aliases or {})

    def check(value: Any) -> Any:
        return by_key.get(value.upper(), value) if isinstance(value, str) else value

    return check


def plain_http_elsewhere(address: str) -> bool:
    """Whether ``address`` is an ``http://`` URL to a host that is not this machine."""
    try:
        parts = urlsplit(address)
    except ValueError:
        return False
    return parts.scheme.lower() == "http" and not is_loopback(parts.hostname or "")


Mode = Literal["socket", "http", "sandbox"]
Secret = Annotated[SecretStr, BeforeValidator(no_whitespace)]
"""A secret setting: never shown; whitespace inside it is refused (a copy-paste slip)."""
Seconds = Annotated[float, Field(allow_inf_nan=False), "seconds"]
"""A finite number of seconds (bounds go on the field)."""
Ids = tuple[str, ...]
UserIds = Annotated[Ids, BeforeValidator(id_list("[UW][A-Z0-9]+", "user ids (U…, W…)"))]
UsergroupIds = Annotated[Ids, BeforeValidator(id_list("S[A-Z0-9]+", "user group ids (S…)"))]
PersonIds = Annotated[
    Ids, BeforeValidator(id_list("[UWS][A-Z0-9]+", "user or user group ids (U…, S…)"))
]
"""Comma-separated Slack ids: of users, of user groups, of either."""
