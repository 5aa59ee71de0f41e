"""What every dsh wire model shares: lenient parsing, bounded nesting, one-line errors."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from pydantic import ConfigDict, ValidationError

from bot.questions.models import WireModel

MAX_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted in a frame (the real host's is about 10)."""

REPLACEMENT: Final = "\ufffd"
"""What a lone UTF-16 surrogate in host text becomes."""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def scrub_text(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (JSON may escape half a pair) replaced by
    U+FFFD, since no UTF-8 encoder takes one."""
    if text.isascii():
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def scrub(value: Any) -> Any:
    """Decoded JSON (nested at most ``MAX_DEPTH`` deep) with every lone surrogate in its
    strings, keys too, replaced by U+FFFD."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, list):
        return [scrub(item) for item in value]
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    return value


class Lenient(WireModel):
    """A wire model that drops unknown keys (zod's default); its input comes from ``load_json``
    (no lone surrogates)."""

    model_config = ConfigDict(extra="ignore")


def depth_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Why ``value`` nests too deeply (checked without recursion), or ``None``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return f"nested more than {limit} levels deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def load_json(text: str | bytes, what: str) -> Any:
    """Decode ``text``; ``ValueError`` names ``what`` and the problem (never RecursionError)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to decode") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from exc
    problem = depth_problem(data)
    if problem is not None:
        raise ValueError(f"{what} is {problem}")
    return scrub(data)


def describe_validation_error(error: ValidationError) -> str:
    """Pydantic's errors as one line: ``loc.path: message; …`` (wire names)."""
    parts = []
    for item in error.errors(include_url=False):
        path = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {message}" if path else message)
    return "; ".join(parts)
