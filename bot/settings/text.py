"""How settings are shown: a value without any secret it may hold (``show``), the ``--help``
table and an error as a sentence (both read from the fields' declarations); the API's named
tokens."""

from __future__ import annotations

import re
import textwrap
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin
from urllib.parse import unquote, urlsplit

from annotated_types import Ge, Gt, Le
from pydantic import BeforeValidator, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, InitErrorDetails

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
    owners: dict[str, str] = {}  # token -> the name given it
    for name, secret in tokens:
        if name in owners.values():
            raise ValueError(f"the name {name!r} is given twice.")
        owner = owners.setdefault(secret.get_secret_value(), name)
        if owner != name:
            raise ValueError(f"one token is given twice ({owner}, {name}).")
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


_INTRO: Final = """\
Settings are read from the environment, then from KEY=VALUE lines in ./.env
(a variable set in the environment wins, even when empty; empty means unset).

The Slack credentials choose the mode:
  SLACK_BOT_TOKEN + SLACK_APP_TOKEN       socket   Socket Mode, no public URL
  SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET  http     Slack posts to /slack/events
  none of them                            sandbox  a local stand-in for Slack
"""
_WIDTH: Final = 100


def plural(count: int, noun: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _unwrap(field: FieldInfo) -> tuple[Any, list[Any]]:
    """The field's base type (``X`` out of ``Annotated[X, …] | None``) and all its metadata."""
    annotation, metadata = field.annotation, list(field.metadata)
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            annotation = rest[0]
    while get_origin(annotation) is Annotated:
        annotation, *more = get_args(annotation)
        for item in more:
            metadata += item.metadata if isinstance(item, FieldInfo) else [item]
    return annotation, metadata


def is_secret(field: FieldInfo) -> bool:
    """Whether the field holds a secret."""
    return _unwrap(field)[0] is SecretStr


def _default(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("shown_default"), str):
        return str(extra["shown_default"])  # a default chosen by the loader, not the field
    value = field.default
    if value is None or value == ():
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render_help(fields: Mapping[str, FieldInfo], intro: str = _INTRO) -> str:
    """The table of settings after ``intro``: variable, default and meaning (``description``)."""
    rows = [
        (
            name,
            _default(field),
            (field.description or "") + (" Secret." if is_secret(field) else ""),
        )
        for name, field in fields.items()
    ]
    name_width = max(len(name) for name, _, _ in rows) + 2
    default_width = max(len(default) for _, default, _ in rows) + 2
    indent = " " * (2 + name_width + default_width)
    lines = [
        *intro.splitlines(),
        "",
        f"  {'VARIABLE':<{name_width}}{'DEFAULT':<{default_width}}MEANING",
    ]
    for name, default, meaning in rows:
        lines += textwrap.wrap(
            meaning,
            width=_WIDTH,
            initial_indent=f"  {name:<{name_width}}{default:<{default_width}}",
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
    return "\n".join(lines)


def _number(field: FieldInfo, shown: str) -> str | None:
    """What a whole number or a number of seconds must be (every number setting has a lower
    bound), or ``None`` for other fields."""
    kind, metadata = _unwrap(field)
    limits = {
        key: float(getattr(item, key))
        for item in metadata
        if isinstance(item, Ge | Gt | Le)
        for key in ("ge", "gt", "le")
        if hasattr(item, key)
    }
    low, high, exclusive = limits.get("gt", limits.get("ge")), limits.get("le"), "gt" in limits
    if kind not in (int, float) or low is None:
        return None
    if kind is int:
        low += 1 if exclusive else 0
        span = f"of at least {low:g}" if high is None else f"from {low:g} to {high:g}"
        return f"{shown} is not a whole number {span}."
    noun = "a number of seconds" if "seconds" in metadata else "a number"
    bound = f"more than {low:g}" if exclusive else f"{low:g} or more"
    if high is not None:
        bound += f", at most {high:g}"
    if field.default is None:
        bound += "; leave it unset for no limit"
    return f"{shown} is not {noun} ({bound})."


def _path(loc: Sequence[int | str]) -> str:
    """Where inside a value an error is, as in ``required[0].count``."""
    return "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc
    ).removeprefix(".")


def problem(error: ErrorDetails, fields: Mapping[str, FieldInfo]) -> str:
    """``"NAME: sentence"`` for one validation error, never showing a secret's value; one inside
    a value (a key of a JSON setting) names where: ``NAME: a.b[0]: sentence``."""
    name = str(error["loc"][0]) if error["loc"] else "settings"
    field = fields.get(name)
    where = _path(error["loc"][1:])
    if error["type"] == "value_error":
        sentence = error.get("ctx", {}).get("error", error["msg"])
        return f"{name.upper()}: {f'{where}: ' if where else ''}{sentence}"
    if where:
        if error["type"] == "extra_forbidden":
            return f"{name.upper()}: {where}: unknown key."
        return f"{name.upper()}: {where}: {error['msg']}."
    if field is None:
        return f"{name.upper()}: {error['msg']}."
    shown = "the value (not shown)" if is_secret(field) else show(error["input"])
    kind = _unwrap(field)[0]
    sentence = _number(field, shown)
    if sentence is None and get_origin(kind) is Literal:
        sentence = f"{shown} is not one of {', '.join(map(str, get_args(kind)))}."
    return f"{name.upper()}: {sentence or error['msg'] + '.'}"


def invalid(
    title: str,
    reported: list[ErrorDetails],
    problems: list[tuple[str, str]],
    secrets: frozenset[str],
) -> ValidationError:
    """One ``ValidationError`` holding the errors fields reported (each input holding one of
    ``secrets`` wrapped in ``SecretStr``, which ``show`` never quotes) and the ``problems``."""
    errors = []
    for error in reported:
        given = error["input"]
        hide = isinstance(given, str) and holds_secret(given, secrets)
        errors.append(
            InitErrorDetails(
                type=error["type"],
                loc=error["loc"],
                input=SecretStr(given) if hide else given,
                ctx=error.get("ctx", {}),
            )
        )
    errors += [
        InitErrorDetails(
            type="value_error", loc=(name,), input=None, ctx={"error": ValueError(message)}
        )
        for name, message in problems
    ]
    return ValidationError.from_exception_data(title, errors, hide_input=True)
