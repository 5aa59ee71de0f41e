"""How a broken Block Kit limit is reported: a ``Problem`` (path, message, code, severity)
and the wording the checker shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["INVALID_BLOCKS", "Problem", "kind_of", "too_long"]

INVALID_BLOCKS: Final = "invalid_blocks"


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken limit: the JSON path, what is wrong, a machine code, and its severity."""

    path: str
    message: str
    code: str = INVALID_BLOCKS
    warning: bool = False

    def __str__(self) -> str:
        """``path: message``, the form ``check_message`` returns."""
        return f"{self.path}: {self.message}"


def kind_of(value: object) -> str:
    """How a value of the wrong type is named in a problem (``null``, ``list``, ...)."""
    return "null" if value is None else type(value).__name__


def too_long(n: int, limit: int, noun: str = "characters") -> str:
    """The message for ``n`` characters (or items) over ``limit``."""
    return f"{n} {noun}, Slack allows at most {limit}"
