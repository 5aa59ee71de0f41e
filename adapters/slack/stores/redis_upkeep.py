"""The Redis store's upkeep: this process's heartbeat, the sweep of lost processes, and the
audit stream's purge (at start, then hourly beside the heartbeat: ``duties.run_purges``;
records expire by TTL).

``p:alive:{pid}`` expires ``heartbeat_ttl`` after the last beat. A process whose heartbeat
lapsed (crashed, or cut off from Redis for longer than ``heartbeat_ttl``) is presumed dead:
the sweep fails its pending records with ``OWNER_LOST``. One process sweeps at a time
(``p:sweep``, a short redis-py ``Lock``), reading the small ``p:owners`` set and the
heartbeats, never every record; an owner with nothing left is forgotten.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time

from redis.exceptions import LockError

from adapters.slack.record import PendingRecord
from adapters.slack.stores.duties import fail_orphans, log_orphans
from adapters.slack.stores.protocol import PendingStore
from adapters.slack.stores.redis_audit import RedisAudit
from adapters.slack.stores.redis_layout import FORGET_OWNER, RedisKeys, px
from adapters.slack.stores.redis_link import RedisLink, as_text
from adapters.slack.stores.redis_notices import RedisNotices
from bot.questions.errors import UserQuestionError

__all__ = ["RedisUpkeep"]



class RedisUpkeep:
    """Beats for this process and sweeps for the others (one heartbeat at a time)."""

    def __init__(
        self,
        link: RedisLink,
        keys: RedisKeys,
        store: PendingStore,
        notices: RedisNotices,
        audit: RedisAudit,
        *,
        heartbeat_ttl: float,
        log: logging.Logger,
    ) -> None:
        self._link = link
        self._keys = keys
        self._store = store
        self._notices = notices
        self._audit = audit
        self._heartbeat_ttl = heartbeat_ttl
        self._log = log
        self._forget_owner = link.client.register_script(FORGET_OWNER)

    async def beat(self) -> None:
        """Say this process is alive for ``heartbeat_ttl`` (unbounded: the caller bounds it)."""
        await self._link.client.set(
            self._keys.my_alive, f"{time.time():.3f}", px=px(self._heartbeat_ttl)
        )

    async def duty(self) -> list[PendingRecord]:
        """One heartbeat: give up on a long outage, beat, check for lost records, sweep (the
        purge runs beside it: ``duties.run_purges``)."""
        self._notices.give_up_if_lost()
        try:
            await self._link.op("heartbeat", self.beat)
            await self._notices.check_lost()
            if time.monotonic() - self._link.healthy_since < self._heartbeat_ttl:
                # Just (re)connected: other processes may not have refreshed their
                # heartbeats yet. Judge nobody dead until they all had the chance.
                return []
            failed = await self.sweep_orphans()
        except UserQuestionError:
            return []  # logged once by the health tracking
        return failed

    async def purge(self, now: float | None = None) -> int:
        """Purge the audit stream (``RedisAudit.purge``); how many entries went."""
        return await self._audit.purge(now)

    async def first_purge(self) -> int:
        """At start: lift the TTL an older bot put on pending questions' streams (once:
        ``RedisAudit.keep_open_trails``), then purge."""
        await self._audit.keep_open_trails()
        return await self._audit.purge()

    async def sweep_orphans(self) -> list[PendingRecord]:
        """Fail the pending records of processes whose heartbeat is gone (``OWNER_LOST``).

        Returns the records this call failed; ``[]`` when another process is sweeping.
        """
        lock = self._link.client.lock(
            self._keys.sweep,
            timeout=max(self._heartbeat_ttl, 2 * self._link.op_timeout),
            blocking=False,
            thread_local=False,
        )
        if not await self._link.op("take the sweep lock", lambda: lock.acquire(blocking=False)):
            return []
        try:
            return await self._sweep()
        finally:
            with contextlib.suppress(LockError, UserQuestionError):  # else it expires
                await self._link.op("release the sweep lock", lock.release)

    async def _sweep(self) -> list[PendingRecord]:
        client = self._link.client
        owners = await self._link.op("list owners", lambda: client.smembers(self._keys.owners))
        me = self._keys.process_id
        others = sorted(name for name in map(as_text, owners) if name and name != me)
        if not others:
            return []
        beats = await self._link.op(
            "read heartbeats", lambda: client.mget([self._keys.alive(o) for o in others])
        )
        dead = [owner for owner, beat in zip(others, beats, strict=True) if beat is None]
        failed: list[PendingRecord] = []
        for owner in dead:
            failed += await fail_orphans(self._store, owner)
            forget = functools.partial(
                self._forget_owner, keys=[self._keys.owners, self._keys.owner(owner)], args=[owner]
            )
            await self._link.op("forget a lost owner", forget)
        log_orphans(self._log, failed)
        return failed
