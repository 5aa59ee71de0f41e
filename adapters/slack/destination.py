"""Where a request is asked and what it gets by default: ``Destination``, ``AskDefaults``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.questions import AskOptions, AskUserQuestionRequest

__all__ = ["AskDefaults", "Destination", "DestinationHook"]


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request is posted: a channel id or user id (a DM), optionally in a thread."""

    channel: str
    thread_ts: str | None = None


DestinationHook = Callable[[AskUserQuestionRequest], Destination | None]
"""Chooses a destination per request (``None``: the provider's default)."""


@dataclass(slots=True)
class AskDefaults:
    """What every request gets unless its ``AskOptions`` say otherwise."""

    destination: Destination
    allowed_users: list[str] | None = None
    allowed_usergroups: list[str] | None = None
    mention: str | None = None
    choose: DestinationHook | None = None
    timeout: float | None = None
    reminders: tuple[float, ...] = ()
    escalate_after: float | None = None
    escalate_to: str | None = None

    def where(self, request: AskUserQuestionRequest, options: AskOptions) -> Destination:
        """The request's destination: its options, else the hook, else the default."""
        if options.channel:
            return Destination(options.channel, options.thread_ts)
        if self.choose is not None:
            chosen = self.choose(request)
            if chosen is not None:
                return chosen
        return self.destination
