"""The Redis store's background work: watches woken from ``p:done``, heartbeat, sweep, purge."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import cast

from redis.asyncio.client import PubSub
from redis.asyncio.lock import Lock
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, RedisError

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import DurableStore
from adapters.slack.stores.duties import OrphanSweep, Upkeep
from adapters.slack.stores.redis_link import FAILURES, PAGE, RedisLink, px, reraise_cancellation
from adapters.slack.stores.redis_lua import FORGET_OWNER, KEEP_OPEN_TRAILS, PURGE_AUDIT
from adapters.slack.stores.watches import WatchRegistry
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError


class RedisUpkeep(Upkeep):
    """This process's watches, woken from ``p:done`` by the subscriber; its heartbeat, the
    sweep for other processes' orphans (one process at a time), the audit stream's purge."""

    def __init__(
        self,
        link: RedisLink,
        store: DurableStore,
        *,
        retention: float,
        heartbeat_interval: float,
        heartbeat_ttl: float,
        outage_limit: float,
    ) -> None:
        super().__init__(store, interval=heartbeat_interval, ttl=heartbeat_ttl, log=link.log)
        self._link = link
        self._keys = link.keys
        self._retention = retention
        self._outage_limit = outage_limit
        self._tick = min(1.0, heartbeat_interval)
        self._retry: set[str] = set()
        self._pubsub: PubSub | None = None
        self.watches = WatchRegistry(self.reread, shielded=True)
        self._forget_owner = link.client.register_script(FORGET_OWNER)
        self._purge_script = link.client.register_script(PURGE_AUDIT)
        self._keep_open_script = link.client.register_script(KEEP_OPEN_TRAILS)

    async def subscribe(self) -> None:
        """Subscribe to ``p:done`` and wait for the confirmation: publishes reach us from now."""
        pubsub = self._link.client.pubsub()
        self._pubsub = pubsub
        await pubsub.subscribe(self._keys.done)
        while True:
            message = await pubsub.get_message(timeout=self._link.op_timeout)
            if message is not None and message["type"] == "subscribe":
                return

    async def unsubscribe(self) -> None:
        """Close the subscription (a failure is only logged)."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
            except (RedisError, OSError) as exc:
                self._log.debug("closing pub/sub: %s", exc)

    async def reread(self, *ids: str) -> None:
        """Re-read these watched records (bounded); on failure the subscriber retries them
        (an id no longer watched leaves the retries; a cancelled read leaves them as they were)."""
        owed = self._retry.intersection(ids)
        self._retry.difference_update(ids)
        wanted = sorted({i for i in ids if i in self.watches})
        if not wanted:
            return
        try:
            raws = await self._link.op(
                "re-read watched records",
                lambda: self._link.client.mget([self._keys.record(i) for i in wanted]),
            )
        except UserQuestionError:
            self._retry.update(wanted)
            return
        except BaseException:  # cancelled (a waiter's look): what it owed is still owed
            self._retry.update(i for i in owed if i in self.watches)
            raise
        for request_id, raw in zip(wanted, cast(list[str | None], raws), strict=True):
            if raw is not None:  # (gone: ``check_lost`` fails its waits)
                self.watches.ended(request_id, raw, self._log)

    async def listen(self) -> None:
        """Resolve local watches from ``p:done``; reconnect with backoff and re-read after."""
        pubsub = self._pubsub
        assert pubsub is not None
        backoff = ExponentialBackoff(cap=2.0, base=0.1)
        failures = 0
        last_ping = last_heard = last_retry = time.monotonic()
        while not self._link.closed:
            started = time.monotonic()
            try:
                if started - last_heard > self._ttl and pubsub.connection is not None:
                    # Nothing (not even our pings' pongs) for too long: the connection is
                    # half-open. Drop it; the next read reconnects and resubscribes.
                    last_heard = started
                    await pubsub.connection.disconnect()
                    raise RedisConnectionError("no answer to pub/sub pings")
                if started - last_ping >= self._interval:
                    last_ping = started
                    await pubsub.ping()
                message = await pubsub.get_message(timeout=self._tick)
            except FAILURES as exc:
                reraise_cancellation(exc)
                self._link.mark_lost(exc, started)
                failures += 1
                await asyncio.sleep(backoff.compute(failures))
                last_heard = time.monotonic()  # judge silence on the next connection afresh
                continue
            now = time.monotonic()
            if message is not None:
                last_heard = now
                failures = 0
                self._link.mark_ok()
            try:
                if message is not None and message["type"] == "subscribe":
                    # a resubscription after a reconnect: anything may have ended meanwhile
                    self._log.info("pending store resubscribed to %s", self._keys.done)
                    await self.reread(*self.watches)
                elif message is not None and message["type"] == "message":
                    await self.reread(str(message["data"]))
                if self._retry and now - last_retry >= self._tick:
                    last_retry = now
                    await self.reread(*self._retry)
            except Exception:  # never let one bad message stop the notifications
                self._log.exception("pending store subscriber failed on %r", message)

    async def check_lost(self) -> None:
        """Fail the waits on records that vanished (Redis flushed): ``RECORD_LOST``."""
        ids = self.watches.waiting_ids()
        for start in range(0, len(ids), PAGE):
            chunk = ids[start : start + PAGE]
            pipe = self._link.client.pipeline(transaction=False)
            for request_id in chunk:
                pipe.exists(self._keys.record(request_id))
            found = await self._link.op("check the watched records", pipe.execute)
            gone = [i for i, present in zip(chunk, found, strict=True) if not present]
            self.watches.lost(gone, self._log, "was Redis flushed?")

    async def beat(self) -> None:
        """Say this process is alive for ``heartbeat_ttl`` (unbounded: the caller bounds it)."""
        await self._link.client.set(self._keys.my_alive, f"{time.time():.3f}", px=px(self._ttl))
        self._beaten_at = time.monotonic()

    async def duty(self) -> list[PendingRecord]:
        """One heartbeat: fail every local wait once Redis has been gone for ``outage_limit``
        seconds; beat, check for lost records, one pass of the sweep (the purge runs beside it)."""
        link = self._link
        if link.healthy is False and time.monotonic() - link.ok_at >= self._outage_limit:
            self.watches.fail_all(
                UserQuestionError(
                    f"the pending store (Redis at {link.shown_url}) has been unreachable for more "
                    f"than {self._outage_limit:g} seconds",
                    STORE_UNAVAILABLE,
                )
            )
        try:
            await self._link.op("heartbeat", self.beat)
            await self.check_lost()
            if time.monotonic() - self._link.healthy_since < self._ttl:
                # Just (re)connected: other processes may not have refreshed their
                # heartbeats yet. Judge nobody dead until they all had the chance.
                return []
            return await self.sweep_orphans()
        except UserQuestionError:  # an outage is logged once by the health tracking
            return []

    async def purge(self, now: float | None = None) -> int:
        """Delete the audit stream's entries older than the retention whose question has no
        record left, a page per script; how many went."""
        cutoff = int(((time.time() if now is None else now) - self._retention) * 1000)
        if cutoff <= 0:
            return 0
        deleted, first = 0, "-"
        while True:
            args: list[str | int] = [self._keys.record_prefix, first, cutoff - 1, PAGE]
            keys = [self._keys.audit, self._keys.audit_purged]
            page = functools.partial(self._purge_script, keys=keys, args=args)
            read, gone, last = await self._link.op("purge the audit stream", page)
            deleted += int(gone)
            if int(read) < PAGE:
                return deleted
            first = f"({last}"

    async def first_purge(self) -> int:
        """At start: lift the TTL an older bot put on pending trails (once), then purge."""
        keys, args = [self._keys.open], [self._keys.record_prefix, self._keys.events_prefix]
        keep = functools.partial(self._keep_open_script, keys=keys, args=args)
        await self._link.op("keep the open trails", keep)
        return await self.purge()

    async def _sweep(self, sweep: OrphanSweep) -> None:
        """Under ``p:sweep`` (skipped while another process holds it): each lost owner, forgotten
        once it has nothing left to sweep."""
        lock = self._link.client.lock(
            self._keys.sweep,
            timeout=max(self._ttl, 2 * self._link.op_timeout),
            blocking=False,
            thread_local=False,
        )
        if not await self._link.op("take the sweep lock", lambda: lock.acquire(blocking=False)):
            return
        try:
            sweep.between = functools.partial(self._keep_up, lock)
            client = self._link.client
            owners = await self._link.op("list owners", lambda: client.smembers(self._keys.owners))
            me = self._keys.process_id
            others = sorted(name for name in cast(set[str], owners) if name and name != me)
            if not others:
                return
            alive = [self._keys.alive(owner) for owner in others]
            beats = await self._link.op("read heartbeats", lambda: client.mget(alive))
            dead = [owner for owner, beat in zip(others, beats, strict=True) if beat is None]
            for owner in dead:
                if not await sweep.owner(owner):
                    return
                keys = [self._keys.owners, self._keys.owner(owner)]
                forget = functools.partial(self._forget_owner, keys=keys, args=[owner])
                await self._link.op("forget a lost owner", forget)
        finally:
            with contextlib.suppress(LockError, UserQuestionError):  # else it expires
                await self._link.op("release the sweep lock", lock.release)

    async def _keep_up(self, lock: Lock) -> None:
        """Between two records of a sweep: beat, and keep the lock, every third of the
        heartbeat's TTL (a lost lock stops the pass: another process sweeps)."""
        if time.monotonic() - self._beaten_at < self._ttl / 3:
            return
        await self._link.op("heartbeat", self.beat)
        await self._link.op("keep the sweep lock", lock.reacquire)
