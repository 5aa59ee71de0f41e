"""``RedisPendingStore``: the pending store shared by several bot processes through Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from adapters.slack.stores.contract import (
    OWNER_LOST_NOTE,
    RETENTION,
    DurableStore,
    OrphanHandler,
    StoreUnavailable,
    TrailReader,
)
from adapters.slack.stores.duties import default_process_id, stop_tasks
from adapters.slack.stores.redis_audit import RedisAudit
from adapters.slack.stores.redis_link import (
    FAILURES,
    RedisKeys,
    RedisLink,
    closed_error,
    reraise_cancellation,
)
from adapters.slack.stores.redis_records import RedisRecords
from adapters.slack.stores.redis_upkeep import RedisNotices, RedisUpkeep
from bot.questions.errors import UserQuestionError

__all__ = ["OWNER_LOST_NOTE", "OrphanHandler", "RedisPendingStore", "StoreUnavailable"]


class RedisPendingStore(RedisRecords, DurableStore):
    """A ``PendingStore`` in Redis, shared by every bot process that can receive a click."""

    _upkeep: RedisUpkeep

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "uq",
        process_id: str | None = None,
        finished_ttl: float = RETENTION,
        heartbeat_interval: float = 2.0,
        heartbeat_ttl: float = 6.0,
        op_timeout: float = 5.0,
        outage_limit: float = 30.0,
        max_connections: int = 64,
        logger: logging.Logger | None = None,
    ) -> None:
        if not prefix:
            raise ValueError("prefix must not be empty")
        if finished_ttl <= 0:
            raise ValueError("finished_ttl must be positive")
        if op_timeout <= 0:
            raise ValueError("op_timeout must be positive")
        keys = RedisKeys(prefix, process_id or default_process_id())
        log = logger or logging.getLogger("adapters.slack.stores.redis")
        link = RedisLink(
            url,
            client_name=f"{prefix}:{keys.process_id}",
            op_timeout=op_timeout,
            max_connections=max_connections,
            log=log,
        )
        super().__init__(link, keys, finished_ttl=finished_ttl, log=log)
        self._process_id = keys.process_id
        self._notices = RedisNotices(
            self._link,
            self._keys,
            heartbeat_interval=heartbeat_interval,
            heartbeat_ttl=heartbeat_ttl,
            outage_limit=outage_limit,
            log=self._log,
        )
        self._watches = self._notices.watches
        self._trail = RedisAudit(self._link, self._keys, retention=finished_ttl)
        self._upkeep = RedisUpkeep(
            self._link,
            self._keys,
            self,
            self._notices,
            self._trail,
            heartbeat_interval=heartbeat_interval,
            heartbeat_ttl=heartbeat_ttl,
            log=self._log,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    @property
    def prefix(self) -> str:
        """The prefix of every key and channel this store uses."""
        return self._keys.prefix

    @property
    def link(self) -> RedisLink:
        """This store's connection, for state kept beside it (App Home's viewers)."""
        return self._link

    async def start(self) -> None:
        """``StoreUnavailable`` when Redis cannot be reached."""
        if self._link.closed:
            raise RuntimeError("a closed RedisPendingStore cannot be started again")
        if self._started:
            return
        await self._reach(self._upkeep.beat, self._notices.subscribe)
        self._started = True
        self._log.info(
            "pending store connected to Redis at %s (prefix %s, process %s)",
            self._link.shown_url,
            self.prefix,
            self.process_id,
        )
        try:
            await self._upkeep.first_purge()
        except UserQuestionError as exc:  # tried again in an hour (upkeep_tasks)
            self._log.warning("pending store could not purge the audit stream: %s", exc)
        self._tasks = [
            asyncio.get_running_loop().create_task(
                self._notices.listen(), name="redis-store-subscriber"
            ),
            *self._upkeep.loops("redis", lambda: self._link.closed, self),
        ]

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[TrailReader]:
        """The audit trail, connected for reading only (instead of ``start()``)."""
        if self._started or self._link.closed:
            raise RuntimeError("reading() is instead of start(): this store is started or closed")
        await self._reach()
        try:
            yield self._trail
        finally:
            self._link.closed = True
            await self._release()

    async def _reach(self, *then: Callable[[], Awaitable[None]]) -> None:
        """Ping Redis, then run ``then``, within ``op_timeout``; when it cannot be reached,
        release the connections and raise ``StoreUnavailable``."""
        try:
            async with asyncio.timeout(self._link.op_timeout):
                await self._link.client.ping()
                for step in then:
                    await step()
        except FAILURES as exc:
            await self._release()
            reraise_cancellation(exc)
            raise self._link.unavailable(exc) from exc
        self._link.mark_ok()

    async def close(self) -> None:
        if self._link.closed:
            return
        self._link.closed = True  # the loops also check this, should a cancellation get lost
        await stop_tasks(self._tasks, self._log, patience=self._link.op_timeout)
        self._tasks = []
        self._notices.close(closed_error())
        if self._started:
            try:
                async with asyncio.timeout(self._link.op_timeout):
                    await self._link.client.delete(self._keys.my_alive)
            except FAILURES as exc:
                self._log.warning(
                    "pending store could not delete its heartbeat: %s", self._link.scrub(str(exc))
                )
        await self._release()
        self._log.info("pending store closed (process %s)", self.process_id)

    async def _release(self) -> None:
        await self._notices.unsubscribe()
        await self._link.aclose()

    def __repr__(self) -> str:
        return (
            f"RedisPendingStore({self._link.shown_url!r}, prefix={self.prefix!r},"
            f" process_id={self.process_id!r})"
        )
