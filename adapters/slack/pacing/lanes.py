"""The lanes of one Web API method: which calls wait, in which order, which lane goes next."""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MethodLanes", "QueuedCall"]


@dataclass(eq=False, slots=True)
class QueuedCall:
    """One Web API call waiting in a lane (coalesced calls share it: ``waiters``)."""

    lane: str
    send: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    queued_at: float
    tag: str | None = None
    serial: bool = False
    waiters: int = 1


@dataclass(eq=False, slots=True)
class MethodLanes:
    """The lanes of one method and the task that serves them."""

    name: str
    tags: Counter[str]
    lanes: dict[str, deque[QueuedCall]] = field(default_factory=dict)
    turns: OrderedDict[str, None] = field(default_factory=OrderedDict)
    """The lanes in the order they take turns (one left empty is dropped when its turn comes)."""
    busy: set[str] = field(default_factory=set)
    not_before: dict[str, float] = field(default_factory=dict)
    closed_until: float = 0.0
    held: dict[str, float] = field(default_factory=dict)
    """Lanes whose own bucket a 429 holds, until when (loop time): a 429 in another lane
    meanwhile holds the whole method."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    worker: asyncio.Task[None] | None = None
    waiting: int = 0
    slow: int = 0
    slow_logged_at: float = -math.inf

    def held_alone(self, lane: str, now: float, until: float) -> bool:
        """Note a 429 holding ``lane`` until ``until``; whether no other lane is held now."""
        for other in [k for k, end in self.held.items() if end <= now]:
            del self.held[other]
        alone = all(other == lane for other in self.held)
        self.held[lane] = max(self.held.get(lane, now), until)
        return alone

    def note_wait(
        self, waited: float, now: float, slow_after: float, logger: logging.Logger
    ) -> None:
        """Log a call that waited longer than ``slow_after``: at most one line per method
        each ``slow_after`` seconds, counting the slow calls since the last line."""
        if waited <= slow_after:
            return
        self.slow += 1
        if now - self.slow_logged_at < slow_after:
            return
        facts = {"slow": self.slow, "waited": round(waited, 3), "queued": self.waiting}
        logger.warning(
            f"{self.name}: {self.slow} call(s) waited over {slow_after:g} s for Slack's rate"
            f" limit (latest {waited:.1f} s), {self.waiting} waiting",
            extra={"method": self.name, **facts},
        )
        self.slow, self.slow_logged_at = 0, now

    def enqueue(self, entry: QueuedCall, *, first: bool = False) -> None:
        """Add a call to its lane (at the head when ``first``) and give the lane a turn."""
        queued = self.lanes.setdefault(entry.lane, deque())
        if first:
            queued.appendleft(entry)
        else:
            queued.append(entry)
        self.waiting += 1
        if entry.tag is not None:
            self.tags[entry.tag] += 1
        if entry.lane not in self.turns:
            self.turns[entry.lane] = None
            self.turns.move_to_end(entry.lane, last=not first)
        self.wake.set()

    def next_turn(self) -> str | None:
        """The next lane with a waiting call, rotated to the back; ``None`` when none is left."""
        while self.turns:
            lane = next(iter(self.turns))
            if lane in self.lanes:
                self.turns.move_to_end(lane)
                return lane
            del self.turns[lane]
            self.not_before.pop(lane, None)
        return None

    def pop(self, lane: str) -> QueuedCall:
        """The lane's next call, now on its way."""
        entry = self.lanes[lane].popleft()
        self._taken(entry)
        if entry.serial:
            self.busy.add(lane)
        return entry

    def remove(self, entry: QueuedCall) -> bool:
        """Take a waiting call off its lane; whether it was still waiting."""
        queued = self.lanes.get(entry.lane)
        if queued is None or entry not in queued:
            return False
        queued.remove(entry)
        self._taken(entry)
        return True

    def merge(self, old: str, new: str) -> None:
        """Move the calls waiting in lane ``old`` into lane ``new``, oldest first: one
        conversation was known by two names (a user id and its DM's id), and Slack paces
        the conversation, so its calls share one lane and one turn."""
        moving = self.lanes.pop(old, None)
        self.not_before.pop(old, None)
        if not moving:
            return
        for entry in moving:
            entry.lane = new
        into = self.lanes.get(new)
        merged = moving if into is None else [*into, *moving]
        self.lanes[new] = deque(sorted(merged, key=lambda entry: entry.queued_at))
        self.turns.setdefault(new)
        self.wake.set()

    def _taken(self, entry: QueuedCall) -> None:
        """Count ``entry`` off its lane (forgotten once empty) and off its tag."""
        if not self.lanes[entry.lane]:
            del self.lanes[entry.lane]
        self.waiting -= 1
        if entry.tag is not None:
            self.tags[entry.tag] -= 1
            if self.tags[entry.tag] <= 0:
                del self.tags[entry.tag]
