"""The Redis store's upkeep: the heartbeat, the sweep of lost processes, the audit purge."""

from __future__ import annotations

import contextlib
import functools
import logging
import time

from redis.asyncio.lock import Lock
from redis.exceptions import LockError

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import PendingStore
from adapters.slack.stores.duties import OrphanSweep, sweep_pass
from adapters.slack.stores.redis_audit import RedisAudit
from adapters.slack.stores.redis_link import RedisKeys, RedisLink, as_text, px
from adapters.slack.stores.redis_lua import FORGET_OWNER
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
        self._beaten_at = 0.0
        """When (monotonic) this process last beat."""
        self._unsure: list[PendingRecord] = []
        """Writes of a sweep whose answer never came: reported next time if they were made."""

    async def beat(self) -> None:
        """Say this process is alive for ``heartbeat_ttl`` (unbounded: the caller bounds it)."""
        await self._link.client.set(
            self._keys.my_alive, f"{time.time():.3f}", px=px(self._heartbeat_ttl)
        )
        self._beaten_at = time.monotonic()

    async def duty(self) -> list[PendingRecord]:
        """One heartbeat: give up on a long outage, beat, check for lost records, one pass
        of the sweep (the purge runs beside it: ``duties.run_purges``)."""
        self._notices.give_up_if_lost()
        try:
            await self._link.op("heartbeat", self.beat)
            await self._notices.check_lost()
            if time.monotonic() - self._link.healthy_since < self._heartbeat_ttl:
                # Just (re)connected: other processes may not have refreshed their
                # heartbeats yet. Judge nobody dead until they all had the chance.
                return []
            return await self.sweep_orphans()
        except UserQuestionError:  # an outage is logged once by the health tracking
            return []

    async def purge(self, now: float | None = None) -> int:
        """Purge the audit stream (``RedisAudit.purge``); how many entries went."""
        return await self._audit.purge(now)

    async def first_purge(self) -> int:
        """At start: lift the TTL an older bot put on pending trails (once), then purge."""
        await self._audit.keep_open_trails()
        return await self._audit.purge()

    async def sweep_orphans(self) -> list[PendingRecord]:
        """One pass of the sweep under ``p:sweep`` (skipped while another process holds it):
        fail the pending records of processes whose heartbeat is gone (``OWNER_LOST``),
        writing for ``heartbeat_ttl / 3`` at most, counted from its first record."""
        sweep = OrphanSweep(self._store, budget=self._heartbeat_ttl / 3, log=self._log)
        lock = self._link.client.lock(
            self._keys.sweep,
            timeout=max(self._heartbeat_ttl, 2 * self._link.op_timeout),
            blocking=False,
            thread_local=False,
        )

        async def locked() -> None:
            if not await self._link.op("take the sweep lock", lambda: lock.acquire(blocking=False)):
                return
            try:
                sweep.between = functools.partial(self._keep_up, lock)
                await self._sweep(sweep)
            finally:
                with contextlib.suppress(LockError, UserQuestionError):  # else it expires
                    await self._link.op("release the sweep lock", lock.release)

        return await sweep_pass(sweep, self._unsure, locked)

    async def _keep_up(self, lock: Lock) -> None:
        """Between two records of a sweep: beat, and keep the lock, every third of the
        heartbeat's TTL (a lost lock stops the pass: another process sweeps)."""
        if time.monotonic() - self._beaten_at < self._heartbeat_ttl / 3:
            return
        await self._link.op("heartbeat", self.beat)
        await self._link.op("keep the sweep lock", lock.reacquire)

    async def _sweep(self, sweep: OrphanSweep) -> None:
        client = self._link.client
        owners = await self._link.op("list owners", lambda: client.smembers(self._keys.owners))
        me = self._keys.process_id
        others = sorted(name for name in map(as_text, owners) if name and name != me)
        if not others:
            return
        beats = await self._link.op(
            "read heartbeats", lambda: client.mget([self._keys.alive(o) for o in others])
        )
        dead = [owner for owner, beat in zip(others, beats, strict=True) if beat is None]
        for owner in dead:
            if sweep.out_of_time():
                return
            await sweep.owner(owner)
            if sweep.cut:
                return
            forget = functools.partial(
                self._forget_owner, keys=[self._keys.owners, self._keys.owner(owner)], args=[owner]
            )
            await self._link.op("forget a lost owner", forget)
