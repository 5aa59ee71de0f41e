"""Checks for setting values that types alone cannot express, and how a value is shown.

Each check takes an already stripped, non-empty value and returns it (perhaps normalised) or
raises ``ValueError`` with one sentence that never contains a secret. ``bot.config`` attaches
them to the fields of ``Settings`` with ``AfterValidator``/``BeforeValidator``.

A value is quoted only through :func:`show`, which hides a value that holds a secret of any
setting being validated (:func:`hiding`, :func:`secret_values`: a secret pasted into the wrong
setting), a Slack token, or anything shaped like a credential (a long run of hex or base64).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final, Literal, get_args
from urllib.parse import unquote, urlsplit

from pydantic import BeforeValidator, SecretStr
from pydantic.fields import FieldInfo

from bot.logs import redact_url

__all__ = [
    "CHANNEL",
    "USER",
    "USERGROUP",
    "check_channel",
    "check_host",
    "check_mention",
    "check_redis_prefix",
    "check_redis_url",
    "check_signing_secret",
    "choose_mode",
    "distinct_tokens",
    "hiding",
    "holds_secret",
    "host_names",
    "id_list",
    "is_loopback",
    "is_wildcard",
    "json_object",
    "no_whitespace",
    "one_of",
    "plain_http_elsewhere",
    "secret_values",
    "show",
    "slack_token",
    "token_file",
    "token_list",
    "url",
]

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
CHANNEL: Final = re.compile(r"[CGDUW][A-Z0-9]+")
"""A conversation a question can go to: channel, private channel, DM or user id."""
USER: Final = re.compile(r"[UW][A-Z0-9]+")
"""A Slack user id."""
USERGROUP: Final = re.compile(r"S[A-Z0-9]+")
"""A Slack user group id."""
_MENTION: Final = re.compile(r"<!here>|<!channel>|<@[UW][A-Z0-9]+>|<!subteam\^S[A-Z0-9]+>")
_HOSTNAME: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\.?")
_REDIS_PREFIX: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_UNPARSABLE: Final = "not a valid URL (check the port, and [ ] around an IPv6 address)."


# A run of 20 or more hex/base64 characters, unbroken by - or _, with a letter and a digit in
# it: how most generated credentials look (a signing secret is 32 hex digits), and few names
# do (a name's words are joined by - or _: #release-coordination-2025 is shown).
_SECRET_LIKE: Final = re.compile(
    r"(?=[A-Za-z0-9+/=]*\d)(?=[A-Za-z0-9+/=]*[A-Za-z])[A-Za-z0-9+/=]{20,}"
)
_CONTAINED: Final = 6  # a secret this long or longer is hidden wherever it appears in a value
_FRAGMENT: Final = 8  # a value this long or longer is hidden when it is part of a secret
_SECRETS: ContextVar[frozenset[str]] = ContextVar("bot.config_checks.secrets", default=frozenset())


def show(value: object) -> str:
    """A value, quoted and shortened for a message; a value that is or may be a secret is not.

    Hidden: a :class:`SecretStr`, a value that holds the secret of a setting being validated
    (see :func:`hiding`), a Slack token, and a value shaped like a generated credential.
    """
    if isinstance(value, SecretStr):
        return "(a value that holds a secret, not shown)"
    text = str(value)
    if _TOKEN_LIKE.search(text):
        return "(a value that looks like a Slack token, not shown)"
    if holds_secret(text):
        return "(a value that holds the secret of a setting, not shown)"
    if _SECRET_LIKE.search(text):
        return "(a value that looks like a secret, not shown)"
    if len(text) > 60:
        text = text[:57] + "..."
    return repr(text)


def holds_secret(text: str, secrets: Iterable[str] | None = None) -> bool:
    """Whether ``text`` is, holds, or is a good part of one of ``secrets``.

    ``secrets`` defaults to those of the settings being validated (:func:`hiding`).
    """
    for secret in _SECRETS.get() if secrets is None else secrets:
        if text == secret or (len(secret) >= _CONTAINED and secret in text):
            return True
        if len(text) >= _FRAGMENT and text in secret:
            return True
    return False


@contextmanager
def hiding(secrets: frozenset[str]) -> Iterator[None]:
    """Within the block, :func:`show` hides any value holding one of ``secrets``."""
    token = _SECRETS.set(_SECRETS.get() | secrets)
    try:
        yield
    finally:
        _SECRETS.reset(token)


def secret_values(fields: Mapping[str, FieldInfo], data: Mapping[str, Any]) -> frozenset[str]:
    """The secrets in ``data`` (raw values by field name) of the fields that hold secrets.

    A secret field's value counts whole, item by item (``a,b``) and after a name
    (``name:token``); a URL only by its user and password; a file of tokens by its tokens.
    """
    found: set[str] = set()
    for name, field in fields.items():
        value = data.get(name)
        if value is None or not _holds_secret_type(field.annotation):
            continue
        if isinstance(value, str) and _reads_tokens_file(field):
            try:
                value = token_file(value.strip())
            except ValueError:
                continue  # unreadable: it holds nothing to hide
        for text in _texts(value):
            found.update(_secret_parts(text))
    return frozenset(part for part in found if part)


def _holds_secret_type(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    return any(_holds_secret_type(arg) for arg in get_args(annotation))


def _reads_tokens_file(field: FieldInfo) -> bool:
    """Whether the field's value is a path to tokens (the path itself is no secret)."""
    return any(
        isinstance(item, BeforeValidator) and item.func is token_file for item in field.metadata
    )


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, str):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _texts(item)


def _secret_parts(text: str) -> Iterator[str]:
    text = text.strip()
    if "://" in text:
        try:
            parts = urlsplit(text)
            user, password = parts.username, parts.password
        except ValueError:
            return
        yield from (unquote(part) for part in (user, password) if part)
        return
    yield text
    for item in text.split(","):
        yield item.strip()
        yield item.partition(":")[2].strip()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` is ``0.0.0.0`` or ``::`` (every address of the machine)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def host_names(value: Any) -> Any:
    """A comma-separated list of host names or addresses, lower case, without duplicates."""
    if not isinstance(value, str):
        return value
    items = [item.strip().lower().strip("[]").rstrip(".") for item in value.split(",")]
    names = [item for item in items if item]
    wrong = []
    for name in names:
        try:
            check_host(name)
        except ValueError:
            wrong.append(name)
    if wrong:
        raise ValueError(f"not host names: {', '.join(show(w) for w in wrong)}.")
    return tuple(dict.fromkeys(names))


_TOKEN_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
NamedTokens = tuple[tuple[str, SecretStr], ...]


def _named_tokens(entries: list[tuple[str, str]]) -> NamedTokens:
    """``(where, "name:token")`` entries as (name, token); the first bad one raises."""
    found: list[tuple[str, SecretStr]] = []
    for where, entry in entries:
        name, colon, token = (part.strip() for part in entry.partition(":"))
        if not colon or not token:
            raise ValueError(f"{where} is not name:token; the value is not shown.")
        if not _TOKEN_NAME.fullmatch(name):
            raise ValueError(f"{where}: the name must be 1-64 letters, digits, _ . or -.")
        if any(ch.isspace() for ch in token):
            raise ValueError(f"{where}: the token contains whitespace; it is not shown.")
        found.append((name, SecretStr(token)))
    return distinct_tokens(found)


def distinct_tokens(tokens: Sequence[tuple[str, SecretStr]]) -> NamedTokens:
    """``tokens`` if no name and no token is given twice; else a ``ValueError`` naming it."""
    names: set[str] = set()
    owners: dict[str, str] = {}
    for name, secret in tokens:
        if name in names:
            raise ValueError(f"the name {name!r} is given twice.")
        owner = owners.setdefault(secret.get_secret_value(), name)
        if owner != name:
            raise ValueError(f"one token is given twice ({owner}, {name}).")
        names.add(name)
    return tuple(tokens)


def token_list(value: Any) -> Any:
    """``name:token,name:token`` as (name, token) pairs."""
    if not isinstance(value, str):
        return value
    items = [item.strip() for item in value.split(",")]
    return _named_tokens([(f"entry {n}", item) for n, item in enumerate(items, 1) if item])


def token_file(value: Any) -> Any:
    """The ``name:token`` lines of the file at path ``value`` (``#`` starts a comment line)."""
    if not isinstance(value, str):
        return value
    try:
        lines = Path(value).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{show(value)} cannot be read ({type(exc).__name__}).") from None
    entries = [
        (f"line {n}", line.strip())
        for n, line in enumerate(lines, 1)
        if line.strip() and not line.strip().startswith("#")
    ]
    return _named_tokens(entries)


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
    if _TOKEN_LIKE.match(secret.get_secret_value()):
        raise ValueError(
            "this value is a token; the signing secret is under Basic Information → "
            "App Credentials."
        )
    return secret


def check_channel(value: str) -> str:
    """A channel (C…, G…), DM (D…) or user (U…, W…) id."""
    if CHANNEL.fullmatch(value):
        return value
    hint = " Use the channel's id, not its name." if value.startswith("#") else ""
    raise ValueError(f"{show(value)} is not a channel (C…, G…), DM (D…) or user (U…, W…) id.{hint}")


def check_host(value: str) -> str:
    """An IP address (brackets removed, normalised) or a host name."""
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if _HOSTNAME.fullmatch(bare) and len(bare) <= 253:
        return bare
    raise ValueError(f"{show(value)} is not an IP address or a host name.")


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


def id_list(pattern: re.Pattern[str], what: str) -> Callable[[Any], Any]:
    """A before-check turning ``"A, B,,A"`` into ``("A", "B")``: ids only, order kept.

    A blank value is no list (unset); a value that is not blank but names no id (``","``,
    or ``"${A},${B}"`` with both unset) is refused: an allow-list must not fail open.
    """

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return ()
        items = [item.strip() for item in value.split(",") if item.strip()]
        if not items:
            raise ValueError(
                f"{show(value)} names no {what}. Give at least one id, or leave the setting "
                "empty (unset)."
            )
        wrong = [item for item in items if not pattern.fullmatch(item)]
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
        # (the settings' sources decode JSON themselves, so a list may arrive decoded)
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
        netloc = parts.netloc
    except ValueError:
        raise ValueError(_UNPARSABLE) from None
    if "@" in value.partition("://")[2] and "@" not in netloc:
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


def choose_mode(
    given: Mapping[str, Any],
    problems: list[tuple[str, str]],
    notes: list[str],
    *,
    serves: bool = True,
) -> Literal["socket", "http", "sandbox"] | None:
    """The mode the credentials present in ``given`` choose, or ``None`` (with a problem).

    ``problems`` gets (field, sentence) pairs; ``notes`` what is worth a line in the log.
    """
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
        problems.append(
            (
                "slack_bot_token",
                f"missing, while {', '.join(production)} {'is' if len(production) == 1 else 'are'}"
                " set: that is a production setup, so the local sandbox (whose page anyone on "
                "this machine may answer) does not start. Set SLACK_BOT_TOKEN with "
                "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET, or set MODE=sandbox to run the "
                "sandbox on purpose.",
            )
        )
        return None
    if bot:
        problems.append(
            (
                "slack_bot_token",
                "set alone, so Slack has no way to deliver clicks. Either set SLACK_APP_TOKEN "
                "(xapp-…, scope connections:write) for Socket Mode, no public URL needed; or set "
                "SLACK_SIGNING_SECRET for HTTP mode, where Slack posts to "
                "https://YOUR-HOST/slack/events. Unset it to run the local sandbox.",
            )
        )
        return None
    named = [n for n, ok in (("SLACK_APP_TOKEN", app), ("SLACK_SIGNING_SECRET", secret)) if ok]
    problems.append(
        (
            "slack_bot_token",
            f"missing, but {' and '.join(named)} {'is' if len(named) == 1 else 'are'} set; the "
            "bot posts with a bot token (xoxb-…, from OAuth & Permissions). Set it, or unset "
            f"{' and '.join(named)} to run the local sandbox.",
        )
    )
    return None


def plain_http_elsewhere(address: str) -> bool:
    """Whether ``address`` is an ``http://`` URL to a host that is not this machine."""
    try:
        parts = urlsplit(address)
    except ValueError:
        return False
    return parts.scheme.lower() == "http" and not is_loopback(parts.hostname or "")
