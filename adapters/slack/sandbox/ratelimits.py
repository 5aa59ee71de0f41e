"""The stand-in's enforcement of Slack's rate limits (a switch: ``SlackStandIn.rate_limits``).

::

    standin.rate_limits = RateLimiter(SlackLimits(time_scale=60))   # a Slack minute = 1 s

Rules, per workspace and app (this stand-in has one of each):

- a tiered method: at most ``tiers[tier]`` calls in any ``window`` (a sliding window);
- ``chat.postMessage``: per conversation a token bucket of ``post_burst`` posts refilled
  one per ``post_interval``, and at most ``workspace_posts`` posts in any ``window``. Slack
  counts the conversation, not how the call named it: ``check``'s ``conversation`` maps the
  ``channel`` argument (``#name``, ``C…``, a user id for its DM) to the conversation id.

A call over a limit is refused and not counted; ``check`` returns the ``Retry-After`` to
answer with, in whole Slack seconds (at least 1), as Slack sends it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from adapters.slack.pacing.rate_limits import POST_MESSAGE, SlackLimits

__all__ = ["RateLimiter"]


class RateLimiter:
    """Counts calls per method and channel; says when one is over Slack's limits."""

    def __init__(self, limits: SlackLimits, *, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self._calls: dict[str, deque[float]] = {}
        self._channels: dict[str, float] = {}
        self.refused = 0
        """How many calls were refused with 429."""

    def check(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        conversation: Callable[[str], str] = str,
    ) -> int | None:
        """``None`` (and count the call) when within the limits, else ``Retry-After``.

        ``conversation`` names the conversation a ``channel`` argument means (the identity
        by default), so one channel named two ways still has one bucket.
        """
        limits, now = self.limits, self._clock()
        window = limits.real(limits.window)
        if method == POST_MESSAGE:
            channel = conversation(str(params.get("channel") or ""))
            interval = limits.real(limits.post_interval)
            # Token bucket as a theoretical arrival time: full when ``tat <= now``.
            tat = max(self._channels.get(channel, now), now)
            early = tat - (limits.post_burst - 1) * interval - now
            waits = [early, self._window_wait("*posts", limits.workspace_posts, window, now)]
            if max(waits) > 0:
                return self._refuse(max(waits))
            self._channels[channel] = tat + interval
            self._calls.setdefault("*posts", deque()).append(now)
            return None
        allowed = limits.per_window(method)
        if allowed is None:
            return None
        wait = self._window_wait(method, allowed, window, now)
        if wait > 0:
            return self._refuse(wait)
        self._calls.setdefault(method, deque()).append(now)
        return None

    def _window_wait(self, key: str, allowed: int, window: float, now: float) -> float:
        """Seconds until the sliding window of ``key`` has room (0: it has now)."""
        calls = self._calls.get(key)
        if calls is None:
            return 0.0
        while calls and calls[0] <= now - window:
            calls.popleft()
        if len(calls) < allowed:
            return 0.0
        return calls[len(calls) - allowed] + window - now

    def _refuse(self, wait: float) -> int:
        self.refused += 1
        return max(1, math.ceil(wait * self.limits.time_scale))
