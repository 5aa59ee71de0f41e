"""Fault injection for the Slack stand-in: rate limits, server errors, drops and delays.

::

    standin.faults.add(method="chat.postMessage", kind="ratelimit", retry_after=1)
    standin.faults.add(method="chat.update", kind="server_error", status=503, count=2)
    standin.faults.add(kind="drop", rate=0.1)          # any method, 10% of calls, seeded
    standin.faults.add(method="chat.postMessage", kind="slow_stored", delay=15)
    standin.faults.add(method="chat.postMessage", kind="rate_limited")

``ratelimit`` answers HTTP 429 ``ratelimited`` with ``Retry-After``; ``rate_limited`` answers
HTTP 200 ``{"ok": false, "error": "rate_limited"}``, chat.postMessage's own error code
("Application has posted too many messages"), with no ``Retry-After`` (Slack documents none).

``delay`` waits before the call is made (nothing is stored until then); ``slow_stored``
makes the call at once (the message is stored) and answers only after ``delay`` seconds,
as Slack sometimes does after a client has given up waiting.

A fault with neither ``count`` nor ``rate`` fires once. With ``rate`` it fires on that share
of matching calls (drawn from a seeded ``random.Random``), at most ``count`` times if given.
``method`` is a Web API method name, ``"response_url"``, ``"upload"``, or ``"*"`` for all.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal, get_args

__all__ = ["ANY_METHOD", "Fault", "FaultKind", "Faults"]

FaultKind = Literal["ratelimit", "rate_limited", "server_error", "drop", "delay", "slow_stored"]
ANY_METHOD: Final = "*"


@dataclass(slots=True)
class Fault:
    """One injected fault and how often it may still fire."""

    method: str
    kind: FaultKind
    count: int | None = None
    rate: float | None = None
    retry_after: int = 1
    status: int = 500
    delay: float = 0.0
    fired: int = 0

    def matches(self, method: str) -> bool:
        """Whether this fault applies to ``method`` and has fires left."""
        if self.count is not None and self.fired >= self.count:
            return False
        return self.method in (ANY_METHOD, method)


class Faults:
    """The faults armed on one stand-in."""

    def __init__(self, seed: int = 0) -> None:
        self._faults: list[Fault] = []
        self._random = random.Random(seed)

    def add(
        self,
        *,
        kind: FaultKind,
        method: str = ANY_METHOD,
        count: int | None = None,
        rate: float | None = None,
        retry_after: int = 1,
        status: int = 500,
        delay: float = 0.0,
    ) -> Fault:
        """Arm a fault; see the module docstring for ``count`` and ``rate``."""
        if kind not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {kind!r}")
        if rate is not None and not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        if count is not None and count < 1:
            raise ValueError("count must be at least 1")
        if not 500 <= status <= 599:
            raise ValueError("status must be a 5xx code")
        if count is None and rate is None:
            count = 1
        fault = Fault(method, kind, count, rate, retry_after, status, delay)
        self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        """Disarm one fault."""
        self._faults.remove(fault)

    def clear(self) -> None:
        """Disarm every fault."""
        self._faults.clear()

    def draw(self, method: str) -> Fault | None:
        """The fault to apply to this call of ``method``, if any (counts it as fired)."""
        for fault in self._faults:
            if not fault.matches(method):
                continue
            if fault.rate is not None and self._random.random() >= fault.rate:
                continue
            fault.fired += 1
            return fault
        return None

    def __iter__(self) -> Iterator[Fault]:
        """The armed faults, in the order they were added."""
        return iter(list(self._faults))
