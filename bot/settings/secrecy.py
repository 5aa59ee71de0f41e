"""What a secret is, and how a setting's value is shown without one (``show``); the API's
named tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final, get_args
from urllib.parse import unquote, urlsplit

from pydantic import BeforeValidator, SecretStr
from pydantic.fields import FieldInfo

TOKEN_LIKE: Final = re.compile(r"xox[a-z]?[-.]|xapp-", re.IGNORECASE)
"""The start of a Slack token (any kind)."""
# A run of 20 or more hex/base64 characters, unbroken by - or _, with a letter and a digit in
# it: how most generated credentials look (a signing secret is 32 hex digits), and few names
# do (a name's words are joined by - or _: #release-coordination-2025 is shown).
_SECRET_LIKE: Final = re.compile(
    r"(?=[A-Za-z0-9+/=]*\d)(?=[A-Za-z0-9+/=]*[A-Za-z])[A-Za-z0-9+/=]{20,}"
)
_CONTAINED: Final = 6  # a secret this long or longer is hidden wherever it appears in a value
_FRAGMENT: Final = 8  # a value this long or longer is hidden when it is part of a secret
_SECRETS: ContextVar[frozenset[str]] = ContextVar("bot.settings.secrets", default=frozenset())


def show(value: object) -> str:
    """A value, quoted and shortened for a message; one that is or may be a secret (a
    ``SecretStr``, a setting's secret, a Slack token, a credential's shape) is hidden."""
    if isinstance(value, SecretStr):
        return "(a value that holds a secret, not shown)"
    text = str(value)
    if TOKEN_LIKE.search(text):
        return "(a value that looks like a Slack token, not shown)"
    if holds_secret(text):
        return "(a value that holds the secret of a setting, not shown)"
    if _SECRET_LIKE.search(text):
        return "(a value that looks like a secret, not shown)"
    if len(text) > 60:
        text = text[:57] + "..."
    return repr(text)


def holds_secret(text: str, secrets: Iterable[str] | None = None) -> bool:
    """Whether ``text`` is, holds, or is a good part of one of ``secrets`` (default: those of
    the settings being validated)."""
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
    """The secrets in ``data`` of the fields that hold them: whole, item by item, after a
    ``name:``, a URL's user and password, a file's tokens."""
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
