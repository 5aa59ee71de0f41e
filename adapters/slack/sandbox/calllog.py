"""Every call the Slack stand-in received, with what it answered.

``standin.calls("chat.update")`` lists the ``chat.update`` calls in order;
``standin.calls.last("chat.postMessage").params["channel"]`` reads the latest one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Call", "CallLog"]


@dataclass(frozen=True, slots=True)
class Call:
    """One request: the method, its parsed params, the HTTP status and the JSON answer.

    ``response`` is ``None`` when the connection was dropped; ``fault`` names the injected
    fault kind, if one fired.
    """

    method: str
    params: dict[str, Any]
    status: int
    response: dict[str, Any] | None
    fault: str | None = None
    at: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether Slack would have said ``"ok": true``."""
        return self.status == 200 and bool(self.response and self.response.get("ok"))

    @property
    def error(self) -> str | None:
        """The ``error`` code of the answer, if any."""
        return None if self.response is None else self.response.get("error")


class CallLog:
    """Calls in arrival order; call the log with a method name to filter it."""

    def __init__(self) -> None:
        self._calls: list[Call] = []

    def record(self, call: Call) -> None:
        """Append one call."""
        self._calls.append(call)

    def __call__(self, method: str | None = None) -> list[Call]:
        """Calls of ``method`` (all calls when ``None``), oldest first."""
        return [c for c in self._calls if method is None or c.method == method]

    def last(self, method: str | None = None) -> Call:
        """The latest call of ``method``; ``LookupError`` when there is none."""
        calls = self(method)
        if not calls:
            raise LookupError(f"no {method or 'calls'} recorded")
        return calls[-1]

    def count(self, method: str | None = None) -> int:
        """How many calls of ``method`` arrived."""
        return len(self(method))

    def clear(self) -> None:
        """Forget every call."""
        self._calls.clear()

    def __iter__(self) -> Iterator[Call]:
        """All calls, oldest first."""
        return iter(list(self._calls))

    def __len__(self) -> int:
        """How many calls arrived."""
        return len(self._calls)
