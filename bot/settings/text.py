"""How settings are explained: the ``--help`` table and an error as a sentence, both read
from the fields' declarations."""

from __future__ import annotations

import textwrap
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le
from pydantic import SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, InitErrorDetails

from bot.settings.secrecy import holds_secret, show

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
    """What a whole number or a number of seconds must be, or ``None`` for other fields."""
    kind, metadata = _unwrap(field)
    limits = {
        key: float(getattr(item, key))
        for item in metadata
        if isinstance(item, Ge | Gt | Le)
        for key in ("ge", "gt", "le")
        if hasattr(item, key)
    }
    low, high, exclusive = limits.get("gt", limits.get("ge")), limits.get("le"), "gt" in limits
    if kind is int:
        if exclusive and low is not None:
            low += 1
        if low is not None and high is not None:
            return f"{shown} is not a whole number from {low:g} to {high:g}."
        if low is not None:
            return f"{shown} is not a whole number of at least {low:g}."
        return f"{shown} is not a whole number."
    if kind is float:
        noun = "a number of seconds" if "seconds" in metadata else "a number"
        if low is None:
            return f"{shown} is not {noun}."
        bound = f"more than {low:g}" if exclusive else f"{low:g} or more"
        if high is not None:
            bound += f", at most {high:g}"
        if field.default is None:
            bound += "; leave it unset for no limit"
        return f"{shown} is not {noun} ({bound})."
    return None


def _path(loc: Sequence[int | str]) -> str:
    """Where inside a value an error is, as in ``required[0].count``."""
    return "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc
    ).removeprefix(".")


def problem(error: ErrorDetails, fields: Mapping[str, FieldInfo]) -> str:
    """``"NAME: sentence"`` for one validation error; a secret's value is never shown.

    An error inside a value (a key of a JSON setting) names where: ``NAME: a.b[0]: sentence``.
    """
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
