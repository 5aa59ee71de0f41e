"""The rules a field of a Block Kit type can have: the vocabulary of ``table.py``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "Elements",
    "Flag",
    "Integer",
    "Items",
    "Object",
    "OneOf",
    "Options",
    "Row",
    "Rule",
    "Special",
    "String",
    "Text",
    "kind_of",
]


@dataclass(frozen=True, slots=True)
class Text:
    """A text object of at most ``limit`` characters (``plain``: plain_text only)."""

    limit: int
    plain: bool = False
    required: bool = False


@dataclass(frozen=True, slots=True)
class String:
    """A string of ``minimum`` to ``limit`` characters (``None``: no upper limit)."""

    limit: int | None
    required: bool = False
    minimum: int = 0


@dataclass(frozen=True, slots=True)
class Flag:
    """``true`` or ``false``."""


@dataclass(frozen=True, slots=True)
class Integer:
    """An integer from ``low`` to ``high`` (``None``: no upper bound)."""

    low: int
    high: int | None


@dataclass(frozen=True, slots=True)
class OneOf:
    """One of ``values`` (in the order messages name them)."""

    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Items:
    """A list of ``minimum`` to ``limit`` items, each following ``each`` (``None``: any)."""

    limit: int | None
    minimum: int = 1
    required: bool = False
    each: Rule | None = None


@dataclass(frozen=True, slots=True)
class Object:
    """A nested object (``what`` names it) whose fields follow ``row``."""

    row: Row
    what: str


@dataclass(frozen=True, slots=True)
class Elements:
    """One element (``many`` is ``None``) or a list of up to ``many``, of ``allowed`` types."""

    allowed: frozenset[str]
    where: str
    many: int | None = None
    required: bool = False
    texts: bool = False


@dataclass(frozen=True, slots=True)
class Options:
    """A list of up to ``limit`` option objects shaped by ``row`` (values unique)."""

    limit: int
    row: Row
    required: bool = True


@dataclass(frozen=True, slots=True)
class Special:
    """A field whose rule spans several fields; ``checker.py`` checks it by ``name``."""

    name: str


Rule = Text | String | Flag | Integer | OneOf | Items | Object | Elements | Options | Special
"""What one field must be."""
Row = Mapping[str, Rule]
"""Every field of one type, with its rule (``type``, ``block_id``, ``action_id`` aside)."""


def kind_of(value: object) -> str:
    """How a value of the wrong type is named in a problem (``null``, ``list``, ...)."""
    return "null" if value is None else type(value).__name__
