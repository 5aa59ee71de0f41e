"""Slack's published Web API rate limits, in one table the stand-in and the scheduler share;
the budget buckets a call spends within them; and how Slack says a call went over them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from slack_sdk.errors import SlackApiError

POST_MESSAGE: Final = "chat.postMessage"
RATE_LIMITED: Final = "rate_limited"
"""chat.postMessage's own refusal (HTTP 200), distinct from the 429 ``ratelimited``."""
_DEFAULT_RETRY_AFTER: Final = 1.0
RATE_LIMITED_RETRY_AFTER: Final = 60.0
"""Slack seconds a ``rate_limited`` refusal without ``Retry-After`` closes the method: Slack
names no wait, and its limits count per minute."""

_MARGIN: Final = 0.1
"""How much longer than Slack's the budget's windows are (latency jitter)."""
_TRIGGERED: Final = frozenset({"views.open", "views.push"})
"""Methods whose trigger id expires three seconds after the click: not spread out."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """At most ``limit`` calls in any ``window`` seconds under ``key``."""

    key: str
    limit: int
    window: float


@dataclass(frozen=True, slots=True)
class SlackLimits:
    """The numbers of Slack's limits and the time scale they run at."""

    tiers: Mapping[int, int] = field(default_factory=lambda: {1: 1, 2: 20, 3: 50, 4: 100})
    """Calls per ``window`` for each tier (the published minimums)."""
    methods: Mapping[str, int] = field(
        default_factory=lambda: {
            "chat.update": 3,
            "chat.delete": 3,
            "chat.postEphemeral": 4,
            "conversations.open": 3,
            "conversations.history": 3,
            "conversations.info": 3,
            "conversations.replies": 3,
            "views.open": 4,
            "views.update": 4,
            "views.push": 4,
            "views.publish": 4,
            "usergroups.users.list": 2,
            "users.info": 4,
            "files.getUploadURLExternal": 4,
            "files.completeUploadExternal": 4,
            "apps.connections.open": 1,
        }
    )
    """Each limited method's tier; ``chat.postMessage`` has its own rule (the ``post_*``
    fields), ``auth.test`` and ``blocks.validate`` are special and not limited here."""
    window: float = 60.0
    """The tiers' window, in Slack seconds."""
    post_interval: float = 1.0
    """``chat.postMessage``: one message per this many Slack seconds per channel."""
    post_burst: int = 3
    """``chat.postMessage``: how many posts to one channel Slack takes at once."""
    workspace_posts: int = 300
    """``chat.postMessage``: the workspace-wide ceiling per ``window``."""
    time_scale: float = 1.0
    """How many times faster than real Slack time runs (tests: 20–60)."""

    def __post_init__(self) -> None:
        if self.time_scale <= 0 or self.window <= 0 or self.post_interval <= 0:
            raise ValueError("time_scale, window and post_interval must be positive")
        if self.post_burst < 1 or self.workspace_posts < 1:
            raise ValueError("post_burst and workspace_posts must be at least 1")
        for method, tier in self.methods.items():
            if self.tiers.get(tier, 0) < 1:
                raise ValueError(f"{method}: tier {tier} has no calls per window")

    def per_window(self, method: str) -> int | None:
        """Calls of ``method`` allowed per window (``None``: not limited by a tier)."""
        tier = self.methods.get(method)
        return None if tier is None else self.tiers[tier]

    def limited(self, method: str) -> bool:
        """Whether any rule here limits ``method``."""
        return method == POST_MESSAGE or method in self.methods

    def real(self, slack_seconds: float) -> float:
        """Slack seconds as real seconds at this time scale."""
        return slack_seconds / self.time_scale

    def buckets(self, method: str, lane: str) -> list[Bucket]:
        """The buckets one call of ``method`` in ``lane`` spends, windows stretched by
        ``_MARGIN``: the method's, its pace's (a tenth of the window's calls at most at once)
        and, for a post, its conversation's."""
        window = self.real(self.window) * (1.0 + _MARGIN)
        allowed = self.workspace_posts if method == POST_MESSAGE else self.per_window(method)
        allowed = allowed or 1
        found = [Bucket(method, allowed, window)]
        if method in _TRIGGERED:
            return found  # a trigger id expires in 3 s: the window's whole burst is used
        burst = max(1, allowed // 10)
        found.append(Bucket(f"{method}:pace", burst, window * burst / allowed))
        if method == POST_MESSAGE:
            # One post per interval per channel, evenly, barely slower than Slack refills
            # (2 %): Slack's burst allowance is kept in reserve for latency jitter.
            interval = self.real(self.post_interval) * 1.02
            found.append(Bucket(f"{POST_MESSAGE}:{lane}", 1, interval))
        return found


def error_of(response: Any) -> object:
    """The ``error`` of a Web API answer, if it has one."""
    data = getattr(response, "data", None)
    return data.get("error") if isinstance(data, dict) else None


def retry_after_of(exc: BaseException) -> float | None:
    """``Retry-After`` (Slack seconds) of a 429 or of chat.postMessage's ``rate_limited``
    (without the header: 1 s, ``RATE_LIMITED_RETRY_AFTER``); ``None`` for anything else."""
    response = exc.response if isinstance(exc, SlackApiError) else None
    if getattr(response, "status_code", None) == 429:
        default = _DEFAULT_RETRY_AFTER
    elif error_of(response) == RATE_LIMITED:
        default = RATE_LIMITED_RETRY_AFTER
    else:
        return None
    headers = dict(getattr(response, "headers", None) or {})
    raw: Any = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), default)
    try:
        return max(0.0, float(raw[0] if isinstance(raw, list | tuple) and raw else raw))
    except (TypeError, ValueError):
        return default


def holds_lane(method: str, exc: BaseException) -> bool:
    """Whether Slack's refusal of ``method`` holds its conversation alone: a post's 429 does,
    chat.postMessage's ``rate_limited`` (the workspace's limit) does not."""
    return method == POST_MESSAGE and error_of(getattr(exc, "response", None)) != RATE_LIMITED
