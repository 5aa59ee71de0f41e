"""Slack's limits as budget buckets: which a call spends, and which a refusal closes."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from adapters.slack.pacing.budget import Bucket, Budget
from adapters.slack.pacing.lanes import MethodLanes
from adapters.slack.pacing.rate_limits import POST_MESSAGE, SlackLimits

__all__ = ["RATE_LIMITED", "Spending", "error_of"]

RATE_LIMITED: Final = "rate_limited"
"""chat.postMessage's own refusal (HTTP 200, "Application has posted too many messages"),
distinct from the 429 ``ratelimited``."""
_TRIGGERED: Final = frozenset({"views.open", "views.push"})
"""Methods whose trigger id expires three seconds after the click: not spread out."""


def error_of(response: Any) -> object:
    """The ``error`` of a Web API answer, if it has one."""
    data = getattr(response, "data", None)
    return data.get("error") if isinstance(data, dict) else None


class Spending:
    """The buckets of ``limits`` (stretched by ``margin``) that calls spend in ``budget``."""

    def __init__(self, limits: SlackLimits, budget: Budget, margin: float) -> None:
        self.limits = limits
        self._budget = budget
        self._margin = margin

    def buckets(self, method: str, lane: str) -> list[Bucket]:
        """The budget buckets one call of ``method`` in ``lane`` spends."""
        limits, stretch = self.limits, 1.0 + self._margin
        window = limits.real(limits.window) * stretch
        allowed = limits.workspace_posts if method == POST_MESSAGE else limits.per_window(method)
        allowed = allowed or 1
        found = [Bucket(method, allowed, window)]
        if method in _TRIGGERED:
            return found  # a trigger id expires in 3 s: the window's whole burst is used
        burst = max(1, allowed // 10)
        found.append(Bucket(f"{method}:pace", burst, window * burst / allowed))
        if method == POST_MESSAGE:
            # One post per interval per channel, evenly, barely slower than Slack refills
            # (2 %): Slack's burst allowance is kept in reserve for latency jitter.
            interval = limits.real(limits.post_interval) * 1.02
            found.append(Bucket(f"{POST_MESSAGE}:{lane}", 1, interval))
        return found

    async def _hold(
        self, state: MethodLanes, lane: str, refusal: BaseException, seconds: float
    ) -> None:
        """Close a budget for ``seconds`` after ``refusal`` of a call in ``lane``."""
        buckets = self.buckets(state.name, lane)
        posting_refused = error_of(getattr(refusal, "response", None)) == RATE_LIMITED
        if state.name != POST_MESSAGE or posting_refused:
            await self._budget.hold(buckets[0], seconds)
            return
        now = asyncio.get_running_loop().time()
        held = state.held
        for other in [k for k, until in held.items() if until <= now]:
            del held[other]
        if any(other != lane for other in held):
            await self._budget.hold(buckets[0], seconds)
        else:
            await self._budget.hold(buckets[-1], seconds)
        held[lane] = max(held.get(lane, now), now + seconds)
