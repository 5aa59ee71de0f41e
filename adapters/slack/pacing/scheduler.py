"""One scheduler for every Web API call: paced within Slack's limits, fair, coalescing; per
method its lanes (which calls wait, in which order, which lane goes next)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.slack.pacing.budget import Budget, LocalBudget
from adapters.slack.pacing.rate_limits import POST_MESSAGE, SlackLimits, holds_lane, retry_after_of

T = TypeVar("T")
UNPACED: Final = frozenset({"apps.connections.open"})
"""Methods sent at once whatever their tier, paced only by Slack's own 429 (Retry-After):
Socket Mode's reconnect, without which no click arrives."""
_TAG: ContextVar[str | None] = ContextVar("web_api_call_tag", default=None)
_SLOW_AFTER: Final = 10.0
"""Seconds of waiting after which a call is logged as slow."""
KNOWN_CONVERSATIONS: Final = 10_000
"""DMs whose conversation id is remembered (user id -> ``D…``), the latest learnt kept."""


@contextlib.contextmanager
def tagged(tag: str) -> Iterator[None]:
    """Tag the Web API calls made in this block with ``tag`` (``is_queued`` tells while they
    wait); a task started here copies the tag, so background work uses ``untagged_context()``."""
    token = _TAG.set(tag)
    try:
        yield
    finally:
        _TAG.reset(token)


def untagged_context() -> contextvars.Context:
    """A copy of the current context without a tag, for a task outliving the call starting it."""
    context = contextvars.copy_context()
    context.run(_TAG.set, None)
    return context


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

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        """Give the waiters ``result`` or ``error`` (once; retrieved when nobody waits)."""
        if self.future.done():
            return
        if error is None:
            self.future.set_result(result)
        else:
            self.future.set_exception(error)
            if self.waiters == 0:
                self.future.exception()


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
    """Lanes a 429 holds alone, until when (loop time): a 429 in another one holds the method."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    worker: asyncio.Task[None] | None = None
    waiting: int = 0
    slow: int = 0
    slow_logged_at: float = -math.inf

    def held_alone(self, lane: str, now: float, until: float) -> bool:
        """Note a 429 holding ``lane`` until ``until``; whether no other lane is held now."""
        self.held = {other: end for other, end in self.held.items() if end > now}
        alone = all(other == lane for other in self.held)
        self.held[lane] = max(self.held.get(lane, now), until)
        return alone

    def note_wait(self, waited: float, now: float, logger: logging.Logger) -> None:
        """Log a call that waited longer than ``_SLOW_AFTER``: at most one line per method
        each ``_SLOW_AFTER`` seconds, counting the slow calls since the last line."""
        if waited <= _SLOW_AFTER:
            return
        self.slow += 1
        if now - self.slow_logged_at < _SLOW_AFTER:
            return
        facts = {"slow": self.slow, "waited": round(waited, 3), "queued": self.waiting}
        logger.warning(
            f"{self.name}: {self.slow} call(s) waited over {_SLOW_AFTER:g} s for Slack's rate"
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

    def remove(self, entry: QueuedCall) -> bool:
        """Take a waiting call off its lane; whether it was still waiting."""
        queued = self.lanes.get(entry.lane)
        if queued is None or entry not in queued:
            return False
        queued.remove(entry)
        if not queued:
            del self.lanes[entry.lane]
        self.waiting -= 1
        if entry.tag is not None:
            self.tags[entry.tag] -= 1
            if self.tags[entry.tag] <= 0:
                del self.tags[entry.tag]
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
        merged = [*self.lanes.get(new, ()), *moving]
        self.lanes[new] = deque(sorted(merged, key=lambda entry: entry.queued_at))
        self.turns.setdefault(new)
        self.wake.set()


class WebApiScheduler:
    """Paces Web API calls within ``limits``: per method a worker serves its lanes (one per
    conversation, or per coalescing ``key``) in turn, each call spending its budget buckets."""

    def __init__(
        self,
        limits: SlackLimits | None = None,
        *,
        budget: Budget | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.limits = limits or SlackLimits()
        self._budget: Budget = budget or LocalBudget()
        self._logger = logger or logging.getLogger("adapters.slack")
        self._methods: dict[str, MethodLanes] = {}
        self._closed = False
        self._closing = asyncio.Event()  # wakes unpaced calls waiting out a Retry-After
        self._sending: set[asyncio.Task[None]] = set()
        self._tags: Counter[str] = Counter()
        self._conversations: dict[str, str] = {}
        self.ratelimited = 0
        """How many 429 answers came back (each was retried)."""
        self.sent = 0
        """How many calls were sent (retries included)."""

    async def call(
        self,
        method: str,
        send: Callable[[], Awaitable[T]],
        *,
        channel: str | None = None,
        key: str | None = None,
    ) -> T:
        """Run ``send()`` within ``method``'s limits; a ``key`` coalesces waiting calls."""
        if self._closed:
            raise SlackClientError("the Web API client is closed")
        if method in UNPACED or not self.limits.limited(method):
            return await self._unpaced(method, send)
        loop = asyncio.get_running_loop()
        state = self._methods.get(method)
        if state is None:
            state = self._methods[method] = MethodLanes(method, self._tags)
        lane = key if key is not None else self.conversation(channel or "")
        queued = state.lanes.get(lane)
        if key is not None and queued:
            entry = queued[-1]  # a newer version replaces the one still waiting
            entry.send = send
            entry.waiters += 1
        else:
            entry = QueuedCall(
                lane, send, loop.create_future(), loop.time(), _TAG.get(), key is not None
            )
            state.enqueue(entry)
            self._kick(state)
        try:
            result: T = await asyncio.shield(entry.future)
            return result
        except asyncio.CancelledError:
            entry.waiters -= 1
            if entry.waiters == 0 and state.remove(entry):
                entry.future.cancel()
            raise

    def conversation(self, channel: str) -> str:
        """The conversation ``channel`` names, as far as Slack's answers told (``learn``)."""
        return self._conversations.get(channel, channel)

    async def learn(self, channel: str, conversation: str) -> None:
        """A post to ``channel`` (a user id) landed in ``conversation`` (its DM): calls waiting
        under the name join the conversation's lane, and the post counts in its bucket."""
        if not conversation or channel == conversation or channel in self._conversations:
            return
        self._conversations[channel] = conversation
        if len(self._conversations) > KNOWN_CONVERSATIONS:  # the longest known goes first
            del self._conversations[next(iter(self._conversations))]
        for state in self._methods.values():
            state.merge(channel, conversation)
        bucket = self.limits.buckets(POST_MESSAGE, conversation)[-1]
        await self._budget.hold(bucket, bucket.window)

    def depths(self) -> dict[str, int]:
        """Calls waiting to be sent, per method (methods with none are left out)."""
        return {m: s.waiting for m, s in sorted(self._methods.items()) if s.waiting}

    def is_queued(self, tag: str) -> bool:
        """Whether a call tagged ``tag`` (see ``tagged``) is still waiting to be sent."""
        return self._tags.get(tag, 0) > 0

    def withdraw(self, method: str, tag: str, error: Exception) -> bool:
        """Fail the calls of ``method`` tagged ``tag`` still waiting with ``error``, unsent;
        whether any was waiting (one on its way is left to finish)."""
        state = self._methods.get(method)
        if state is None or not self._tags.get(tag):
            return False
        found = [entry for lane in state.lanes.values() for entry in lane if entry.tag == tag]
        for entry in found:
            state.remove(entry)
            entry.settle(error=error)
        return bool(found)

    async def close(self) -> None:
        """Stop serving; calls still waiting or in flight fail with ``SlackClientError``."""
        self._closed = True
        self._closing.set()
        tasks = [*(s.worker for s in self._methods.values() if s.worker), *self._sending]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        closed = SlackClientError("the Web API client closed")
        for entry in (e for s in self._methods.values() for q in s.lanes.values() for e in q):
            entry.settle(error=closed)
        self._methods.clear()
        await self._budget.close()

    def _kick(self, state: MethodLanes) -> None:
        if not self._closed and (state.worker is None or state.worker.done()):
            loop, serve = asyncio.get_running_loop(), self._serve(state)
            state.worker = loop.create_task(serve, name=state.name, context=untagged_context())

    async def _serve(self, state: MethodLanes) -> None:
        loop = asyncio.get_running_loop()
        while state.lanes:
            lane, soonest = await self._choose(state, loop.time())
            if lane is None:
                state.wake.clear()
                timeout = None if soonest is None else max(0.0, soonest - loop.time())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.wake.wait(), timeout)
                continue
            if lane not in state.lanes:
                continue  # its last call was taken off while the budget was asked
            entry = state.lanes[lane][0]
            state.remove(entry)
            if entry.serial:
                state.busy.add(lane)
            now = loop.time()
            state.note_wait(now - entry.queued_at, now, self._logger)
            task = loop.create_task(self._send(state, entry), name=f"{state.name} send")
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _choose(self, state: MethodLanes, now: float) -> tuple[str | None, float | None]:
        """A lane whose call may go now, or ``None`` and when to look again."""
        if state.closed_until > now:
            return None, state.closed_until
        soonest: float | None = None
        for _ in range(len(state.turns)):
            lane = state.next_turn()
            if lane is None:
                break
            if lane in state.busy:
                continue
            ready_at = state.not_before.get(lane, now)
            if ready_at <= now:
                wait, full = await self._budget.take(self.limits.buckets(state.name, lane))
                if wait <= 0:
                    state.not_before.pop(lane, None)
                    return lane, None
                ready_at = now + wait
                if full < 2:  # the method's own budget: no other lane may go either
                    state.turns.move_to_end(lane, last=False)  # and this lane keeps its turn
                    state.closed_until = ready_at
                    return None, ready_at
                state.not_before[lane] = ready_at
            soonest = ready_at if soonest is None else min(soonest, ready_at)
        return None, soonest

    async def _send(self, state: MethodLanes, entry: QueuedCall) -> None:
        try:
            self.sent += 1
            result = await entry.send()
        except Exception as exc:  # handed to the caller
            retry_after = retry_after_of(exc)
            if retry_after is None or entry.waiters == 0:
                entry.settle(error=exc)
                return
            self.ratelimited += 1
            if not entry.serial:  # its channel may be known by its conversation meanwhile
                entry.lane = self.conversation(entry.lane)
            seconds, now = self.limits.real(retry_after), asyncio.get_running_loop().time()
            buckets = self.limits.buckets(state.name, entry.lane)
            # A lane's refusal holds the lane alone, unless another one is held already.
            alone = holds_lane(state.name, exc) and state.held_alone(entry.lane, now, now + seconds)
            try:
                await self._budget.hold(buckets[-1] if alone else buckets[0], seconds)
            except BaseException as stopped:  # closed while the hold was written: told
                closed = SlackClientError("the Web API client closed")
                entry.settle(error=closed if self._closed else stopped)
                raise
            state.enqueue(entry, first=True)
        except BaseException as exc:  # (cancelled: by ``close``, whose callers read "closed")
            closed = SlackClientError("the Web API client closed")
            entry.settle(error=closed if self._closed else exc)
            raise
        else:
            entry.settle(result=result)
        finally:
            if entry.serial:
                state.busy.discard(entry.lane)
            state.wake.set()
            if state.lanes:
                self._kick(state)

    async def _unpaced(self, method: str, send: Callable[[], Awaitable[T]]) -> T:
        """An ``UNPACED`` or unlimited method: sent at once, retried after any 429 until closed."""
        while True:
            if self._closed:
                raise SlackClientError("the Web API client closed")
            try:
                self.sent += 1
                return await send()
            except SlackApiError as exc:
                retry_after = retry_after_of(exc)
                if retry_after is None:
                    raise
                self.ratelimited += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), self.limits.real(retry_after))
