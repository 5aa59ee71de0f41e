"""``RedisPendingStore``: the pending store shared by several bot processes through Redis.

Keys (``p`` is the prefix, ``uq`` by default; one Redis server or primary, not Redis Cluster,
because the scripts derive some key names from the stored record)::

    p:req:{id}      the record as JSON (``PendingRecord.dump()``); no TTL while pending
                    (nothing expires silently), ``finished_ttl`` (the retention) once ended
    p:tok:{id}      the token of the last write (same TTL): a write that redis-py retries
                    after a lost reply is recognised as already done instead of refused
    p:open          set of the ids of every pending record
    p:owner:{pid}   set of the ids of the pending records a process owns (a record owned by
                    no process, ``owner`` unset, is in no owner set)
    p:owners        set of the process ids that own (or owned) pending records: the sweep
                    reads this small set and the heartbeats, never every record
    p:alive:{pid}   a process's heartbeat, TTL ``heartbeat_ttl``
    p:sweep         short lock (redis-py ``Lock``: SET NX PX) held while one process sweeps
    p:done          pub/sub channel: the id of every record that just became terminal
    p:audit         stream: every audit event (``e``: its JSON), trimmed to the retention
    p:events:{id}   stream: one question's events; expires the retention after the last

``create`` and ``compare_and_set`` are Lua scripts (``register_script``), so the record, the
index sets and the notification change together and the first writer wins across processes.
A watch is local: every process subscribes to ``p:done`` and, when an id it watches is
published, re-reads the record and resolves its watches. A watch also re-reads when it starts
waiting, and the subscriber re-reads every watched record after any (re)subscription, so a
notification lost while the connection was down costs latency, not the ending.

Outages: every operation is bounded by ``op_timeout`` and raises ``UserQuestionError`` with
code ``STORE_UNAVAILABLE`` when Redis cannot answer in time (redis-py's own retry with
exponential backoff runs inside that bound). ``Watch.wait()`` does not raise on an outage: it
keeps waiting through reconnects (each of its re-reads is bounded), so the ask's own timeout
and abort signal decide how long anyone waits; ``close()`` ends every wait still pending with
``STORE_UNAVAILABLE``. A process whose heartbeat lapses (crashed, or cut off from Redis for
longer than ``heartbeat_ttl``) is presumed dead: ``sweep_orphans`` fails its pending records
with ``OWNER_LOST``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Final, TypeVar, cast
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import AuthenticationError, LockError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from adapters.slack.audit import AuditEvent
from adapters.slack.record import TERMINAL_STATES, PendingRecord
from adapters.slack.stores.lost import fail_lost, waiting_ids
from adapters.slack.stores.protocol import (
    OWNER_LOST_NOTE,
    RETENTION,
    OrphanHandler,
    PendingStore,
    StoreConflict,
    StoreUnavailable,
    Watch,
    mutate,
)
from bot.logs import redact_url
from bot.questions.errors import OWNER_LOST, STORE_UNAVAILABLE, UserQuestionError

__all__ = ["OWNER_LOST_NOTE", "OrphanHandler", "RedisPendingStore", "StoreUnavailable"]


T = TypeVar("T")

_CONNECTION_ERRORS: Final = (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError)

# KEYS: record, token, open set, owner set, owners set
# ARGV: json, id, state, finished ttl ms, token, owner ('' for none)
# A pending record has no TTL: it stays until it ends (then it is kept ``finished_ttl``).
_CREATE: Final = """
if redis.call('GET', KEYS[2]) == ARGV[5] then return 1 end
if ARGV[3] == 'pending' then
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
  redis.call('SET', KEYS[2], ARGV[5])
  redis.call('SADD', KEYS[3], ARGV[2])
  if ARGV[6] ~= '' then
    redis.call('SADD', KEYS[4], ARGV[2])
    redis.call('SADD', KEYS[5], ARGV[6])
  end
else
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[4]) then return 0 end
  redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[4])
end
return 1
"""

# KEYS: record, token, open set, owner set of the new record's owner, owners set
# ARGV: json, id, version, state, finished ttl ms, owner-set prefix, done channel, token,
#       owner ('' for none)
_COMPARE_AND_SET: Final = """
if redis.call('GET', KEYS[2]) == ARGV[8] then return 1 end
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local stored = cjson.decode(raw)
if tonumber(stored['version']) ~= tonumber(ARGV[3]) - 1 then return 0 end
local was_open = stored['state'] == 'pending'
local now_open = ARGV[4] == 'pending'
if not was_open and not now_open and stored['state'] ~= ARGV[4] then return 0 end
local old_owner = stored['owner']
if type(old_owner) ~= 'string' then old_owner = '' end
local old_owner_set = ARGV[6] .. old_owner
if now_open then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[8])
  if old_owner ~= '' and old_owner ~= ARGV[9] then redis.call('SREM', old_owner_set, ARGV[2]) end
  redis.call('SADD', KEYS[3], ARGV[2])
  if ARGV[9] ~= '' then
    redis.call('SADD', KEYS[4], ARGV[2])
    redis.call('SADD', KEYS[5], ARGV[9])
  end
elseif was_open then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[5])
  redis.call('SET', KEYS[2], ARGV[8], 'PX', ARGV[5])
  redis.call('SREM', KEYS[3], ARGV[2])
  if old_owner ~= '' then redis.call('SREM', old_owner_set, ARGV[2]) end
  if ARGV[9] ~= '' then redis.call('SREM', KEYS[4], ARGV[2]) end
  redis.call('PUBLISH', ARGV[7], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
  redis.call('SET', KEYS[2], ARGV[8], 'KEEPTTL')
end
return 1
"""

# KEYS: an index set; ARGV: record key prefix. Returns the JSON of every member still
# stored and drops the ids whose record has expired.
_INDEXED: Final = """
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local raw = redis.call('GET', ARGV[1] .. id)
  if raw then out[#out + 1] = raw else redis.call('SREM', KEYS[1], id) end
end
return out
"""

# KEYS: owners set, owner set; ARGV: owner. Forget an owner with nothing left to sweep.
_FORGET_OWNER: Final = """
if redis.call('SCARD', KEYS[2]) == 0 then redis.call('SREM', KEYS[1], ARGV[1]) end
return 1
"""


def _px(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _default_process_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _stream_lines(entries: object) -> list[tuple[str, str]]:
    """``(entry id, event JSON)`` of each entry XRANGE returned (field ``e``)."""
    lines: list[tuple[str, str]] = []
    for entry_id, fields in cast(list[tuple[str, dict[str, str]]], entries or []):
        lines.append((_text(entry_id), _text(fields["e"])))
    return lines


def _reraise_cancellation(exc: BaseException) -> None:
    """Raise ``CancelledError`` if this task is being cancelled.

    A cancellation that lands inside redis-py's own timeouts can come out as a timeout or a
    connection error; it must still cancel, not be reported (or retried) as an outage.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc


def _closed_error() -> UserQuestionError:
    return UserQuestionError("the pending store (Redis) is closed", STORE_UNAVAILABLE)


class _RedisWatch:
    """A local waiter for one request's ending; resolved by the store's subscriber."""

    def __init__(self, store: RedisPendingStore, request_id: str) -> None:
        self._store = store
        self.request_id = request_id
        self.future: asyncio.Future[PendingRecord] = asyncio.get_running_loop().create_future()
        self.waiting = False  # set once waited on: the record existed (checked for loss)

    async def wait(self) -> PendingRecord:
        """Return the record once it is terminal (re-reading it first: it may be already)."""
        self.waiting = True
        if not self.future.done():
            await self._store._check(self.request_id)
        return await asyncio.shield(self.future)

    def close(self) -> None:
        """Stop watching (idempotent)."""
        self._store._forget(self)


def _start_problem(exc: BaseException, shown_url: str, reason: str) -> str:
    """Why Redis could not be used at start: not reachable, a refused login, a bad database."""
    if isinstance(exc, ResponseError) and "DB index" in str(exc):
        return (
            f"Redis at REDIS_URL={shown_url} answers, but refused the database number in "
            f"REDIS_URL ({reason}). Use one this server has: 0 to 15 unless `databases` in "
            "its redis.conf says otherwise."
        )
    if isinstance(exc, AuthenticationError) or any(
        code in str(exc) for code in ("NOAUTH", "WRONGPASS", "invalid password")
    ):
        return (
            f"Redis at REDIS_URL={shown_url} answers, but refused the credentials in "
            f"REDIS_URL ({reason}). Check the user name and password in it."
        )
    return (
        f"cannot reach the Redis pending store at REDIS_URL={shown_url}: {reason}."
        " Check that Redis is running and that REDIS_URL points at it."
    )


class RedisPendingStore:
    """A ``PendingStore`` in Redis, shared by every bot process that can receive a click.

    Call ``start()`` before use and ``close()`` at shutdown. ``on_orphans`` (settable) is
    called with the records each periodic ``sweep_orphans`` failed.
    """

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
        if heartbeat_interval <= 0 or heartbeat_ttl <= heartbeat_interval:
            raise ValueError("heartbeat_ttl must be longer than a positive heartbeat_interval")
        if op_timeout <= 0:
            raise ValueError("op_timeout must be positive")
        self._shown_url = redact_url(url)
        try:
            self._password = urlsplit(url).password or ""
        except ValueError:
            self._password = ""
        self._prefix = prefix
        self._process_id = process_id or _default_process_id()
        self._finished_ttl = finished_ttl
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat_ttl = heartbeat_ttl
        self._op_timeout = op_timeout
        self._outage_limit = outage_limit
        self._tick = min(1.0, heartbeat_interval)
        self._log = logger or logging.getLogger("adapters.slack.stores.redis")
        self.on_orphans: OrphanHandler | None = None
        """Called with the records a periodic sweep failed (set by the provider)."""

        client_name = re.sub(r"[^!-~]", "_", f"{prefix}:{self._process_id}")
        try:
            # A blocking pool: under a burst, an operation waits for a free connection
            # (within op_timeout) instead of failing with "Too many connections".
            self._pool = aioredis.BlockingConnectionPool.from_url(
                url,
                max_connections=max_connections,
                timeout=op_timeout,
                decode_responses=True,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3),
                retry_on_error=[RedisConnectionError, RedisTimeoutError],
                socket_timeout=op_timeout / 2,
                socket_connect_timeout=op_timeout / 2,
                client_name=client_name,
            )
        except ValueError as exc:
            raise ValueError(f"REDIS_URL={self._shown_url} is not a usable Redis URL") from exc
        self._client: aioredis.Redis = aioredis.Redis(connection_pool=self._pool)
        self._create_script = self._client.register_script(_CREATE)
        self._cas_script = self._client.register_script(_COMPARE_AND_SET)
        self._indexed_script = self._client.register_script(_INDEXED)
        self._forget_owner_script = self._client.register_script(_FORGET_OWNER)
        self._pubsub: PubSub | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._watches: dict[str, set[_RedisWatch]] = {}
        self._retry: set[str] = set()
        self._started = False
        self._closed = False
        self._healthy: bool | None = None
        self._ok_at = 0.0
        self._healthy_since = 0.0

    # -- keys -----------------------------------------------------------------------------

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}:{kind}:{name}"

    @property
    def _open_key(self) -> str:
        return f"{self._prefix}:open"

    @property
    def _audit_key(self) -> str:
        return f"{self._prefix}:audit"

    @property
    def _owners_key(self) -> str:
        return f"{self._prefix}:owners"

    @property
    def _done_channel(self) -> str:
        return f"{self._prefix}:done"

    @property
    def _alive_key(self) -> str:
        return self._key("alive", self._process_id)

    # -- PendingStore ---------------------------------------------------------------------

    @property
    def process_id(self) -> str:
        """This process's id; records it creates name it as their owner."""
        return self._process_id

    @property
    def prefix(self) -> str:
        """The prefix of every key and channel this store uses."""
        return self._prefix

    @property
    def watch_count(self) -> int:
        """How many watches are registered in this process."""
        return sum(len(watches) for watches in self._watches.values())

    async def start(self) -> None:
        """Connect, beat once, subscribe; raise ``StoreUnavailable`` if Redis is unreachable."""
        if self._closed:
            raise RuntimeError("a closed RedisPendingStore cannot be started again")
        if self._started:
            return
        try:
            async with asyncio.timeout(self._op_timeout):
                await self._client.ping()
                await self._beat()
                pubsub = self._client.pubsub()
                self._pubsub = pubsub
                await pubsub.subscribe(self._done_channel)
                while True:  # the confirmation: publishes from now on reach us
                    message = await pubsub.get_message(timeout=self._op_timeout)
                    if message is not None and message["type"] == "subscribe":
                        break
        except (RedisError, OSError, TimeoutError) as exc:
            await self._release()
            _reraise_cancellation(exc)
            reason = self._scrub(str(exc)) or f"no answer within {self._op_timeout:g}s"
            problem = _start_problem(exc, self._shown_url, reason)
            raise StoreUnavailable(problem, self._shown_url) from exc
        self._started = True
        self._mark_ok()
        self._log.info(
            "pending store connected to Redis at %s (prefix %s, process %s)",
            self._shown_url,
            self._prefix,
            self._process_id,
        )
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._listen(), name="redis-store-subscriber"),
            loop.create_task(self._heartbeats(), name="redis-store-heartbeat"),
        ]

    async def close(self) -> None:
        """Stop the subscriber and heartbeat, delete this process's heartbeat, disconnect."""
        if self._closed:
            return
        self._closed = True  # the loops also check this, should a cancellation get lost
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            _, stuck = await asyncio.wait(self._tasks, timeout=self._op_timeout)
            if stuck:
                self._log.warning("pending store background tasks did not stop in time")
        self._tasks = []
        for watches in self._watches.values():
            for watch in watches:
                if not watch.future.done():
                    watch.future.set_exception(_closed_error())
                    watch.future.exception()  # retrieved: no "never retrieved" log
        self._watches.clear()
        self._retry.clear()
        if self._started:
            try:
                async with asyncio.timeout(self._op_timeout):
                    await self._client.delete(self._alive_key)
            except (RedisError, OSError, TimeoutError) as exc:
                self._log.warning(
                    "pending store could not delete its heartbeat: %s", self._scrub(str(exc))
                )
        await self._release()
        self._log.info("pending store closed (process %s)", self._process_id)

    def _record_keys(self, record: PendingRecord) -> list[str]:
        """The keys a record's scripts touch: itself, its write token, the index sets."""
        return [
            self._key("req", record.id),
            self._key("tok", record.id),
            self._open_key,
            self._key("owner", record.owner or "-"),
            self._owners_key,
        ]

    async def create(self, record: PendingRecord) -> bool:
        """Store a new record; ``False`` if one with its id exists already."""
        keys = self._record_keys(record)
        args: list[str | int] = [
            record.dump(),
            record.id,
            record.state,
            _px(self._finished_ttl),
            self._new_token(),
            record.owner or "",
        ]
        result = await self._op("create", lambda: self._create_script(keys=keys, args=args))
        return bool(result)

    async def get(self, request_id: str) -> PendingRecord | None:
        """The record with this id, or ``None``."""
        raw = await self._op("get", lambda: self._client.get(self._key("req", request_id)))
        return None if raw is None else PendingRecord.load(raw)

    async def compare_and_set(self, record: PendingRecord) -> bool:
        """Write ``record`` if the stored version is ``record.version - 1``.

        An ending is final: a finished record takes no other ending (only bookkeeping in its
        own state, or a deliberate reopen to ``pending``, as the memory store). The write that
        ends a record publishes its id, waking watches in every process.
        """
        keys = self._record_keys(record)
        args: list[str | int] = [
            record.dump(),
            record.id,
            record.version,
            record.state,
            _px(self._finished_ttl),
            f"{self._prefix}:owner:",
            self._done_channel,
            self._new_token(),
            record.owner or "",
        ]
        result = await self._op("compare-and-set", lambda: self._cas_script(keys=keys, args=args))
        return bool(result)

    def watch(self, request_id: str) -> Watch:
        """Register interest in this request's ending (before posting, so no click is missed)."""
        watch = _RedisWatch(self, request_id)
        if self._closed:
            watch.future.set_exception(_closed_error())
            watch.future.exception()
            return watch
        self._watches.setdefault(request_id, set()).add(watch)
        return watch

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        """Every pending record (of ``owner``, when given)."""
        index = self._open_key if owner is None else self._key("owner", owner)
        prefix = f"{self._prefix}:req:"
        raws = await self._op(
            "list open records",
            lambda: self._indexed_script(keys=[index], args=[prefix]),
        )
        records: list[PendingRecord] = []
        for raw in cast(list[str], raws):
            record = self._parse(raw, "in the open index")
            if record is not None and record.is_open and (owner is None or record.owner == owner):
                records.append(record)
        return records

    # -- the audit trail ------------------------------------------------------------------

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to the audit stream and to its question's own stream."""
        line = event.dump()
        trail = self._key("events", event.request_id)
        cutoff = int((time.time() - self._finished_ttl) * 1000)

        async def write() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.xadd(self._audit_key, {"e": line}, minid=cutoff, approximate=True)
            pipe.xadd(trail, {"e": line})
            pipe.pexpire(trail, _px(self._finished_ttl))
            await pipe.execute()

        await self._op("append an audit event", write)

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        trail = self._key("events", request_id)
        entries = await self._op("read a trail", lambda: self._client.xrange(trail))
        return [AuditEvent.load(line) for _, line in _stream_lines(entries)]

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages).

        Stream ids are Redis's clock; a minute's margin on each side covers a skew with
        this host's, and each event's own ``at`` decides.
        """
        low = f"{max(0, int((since - 60) * 1000))}"
        high = "+" if until is None else f"{int((until + 60) * 1000)}"
        while True:
            read = functools.partial(self._client.xrange, self._audit_key, low, high, count=500)
            entries = _stream_lines(await self._op("read the audit stream", read))
            for _, line in entries:
                event = AuditEvent.load(line)
                if event.at >= since and (until is None or event.at < until):
                    yield event
            if len(entries) < 500:
                return
            low = f"({entries[-1][0]}"

    # -- owner liveness -------------------------------------------------------------------

    async def sweep_orphans(self) -> list[PendingRecord]:
        """Fail the pending records of processes whose heartbeat is gone (``OWNER_LOST``).

        Returns the records this call failed; ``[]`` when another process is sweeping.
        """
        lock = self._client.lock(
            f"{self._prefix}:sweep",
            timeout=max(self._heartbeat_ttl, 2 * self._op_timeout),
            blocking=False,
            thread_local=False,
        )
        if not await self._op("take the sweep lock", lambda: lock.acquire(blocking=False)):
            return []
        try:
            return await self._sweep()
        finally:
            with contextlib.suppress(LockError, UserQuestionError):  # else it expires
                await self._op("release the sweep lock", lock.release)

    async def _sweep(self) -> list[PendingRecord]:
        owners = await self._op("list owners", lambda: self._client.smembers(self._owners_key))
        others = sorted(name for name in map(_text, owners) if name and name != self._process_id)
        if not others:
            return []
        beats = await self._op(
            "read heartbeats",
            lambda: self._client.mget([self._key("alive", owner) for owner in others]),
        )
        dead = [owner for owner, beat in zip(others, beats, strict=True) if beat is None]
        failed: list[PendingRecord] = []
        for owner in dead:
            for record in await self.open_records(owner=owner):
                written = await self._fail_orphan(record.id, owner)
                if written is not None:
                    failed.append(written)
            forget = functools.partial(
                self._forget_owner_script,
                keys=[self._owners_key, self._key("owner", owner)],
                args=[owner],
            )
            await self._op("forget a lost owner", forget)
        if failed:
            lost = sorted({str(record.owner) for record in failed})
            self._log.warning(
                "pending store failed %d question(s) of lost process(es) %s",
                len(failed),
                ", ".join(lost),
            )
        return failed

    async def _fail_orphan(self, request_id: str, owner: str) -> PendingRecord | None:
        now = time.time()

        def lost(current: PendingRecord) -> PendingRecord | None:
            if not current.is_open or current.owner != owner:
                return None
            return current.next(
                state="failed", error_code=OWNER_LOST, note=OWNER_LOST_NOTE, finished_at=now
            )

        try:
            _, written = await mutate(self, request_id, lost)
        except StoreConflict:
            return None
        return written

    # -- watches --------------------------------------------------------------------------

    def _forget(self, watch: _RedisWatch) -> None:
        watches = self._watches.get(watch.request_id)
        if watches is None:
            return
        watches.discard(watch)
        if not watches:
            del self._watches[watch.request_id]
            self._retry.discard(watch.request_id)

    def _resolve(self, record: PendingRecord) -> None:
        for watch in self._watches.get(record.id, ()):
            if not watch.future.done():
                watch.future.set_result(record.model_copy(deep=True))

    async def _check(self, request_id: str) -> None:
        """Re-read one watched record (bounded); on failure the subscriber retries it."""
        await self._reread([request_id])

    async def _reread(self, ids: Iterable[str]) -> None:
        wanted = sorted({i for i in ids if i in self._watches})
        if not wanted:
            return
        try:
            raws = await self._op(
                "re-read watched records",
                lambda: self._client.mget([self._key("req", i) for i in wanted]),
            )
        except UserQuestionError:
            self._retry.update(wanted)
            return
        for request_id, raw in zip(wanted, raws, strict=True):
            self._retry.discard(request_id)
            record = self._parse(raw, request_id)
            if record is not None and record.state in TERMINAL_STATES:
                self._resolve(record)

    def _parse(self, raw: str | bytes | None, request_id: str) -> PendingRecord | None:
        """A stored record, or ``None`` (logged) when it is missing or unreadable."""
        if raw is None:
            return None
        try:
            return PendingRecord.load(raw)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            self._log.error("pending store cannot read record %s: %s", request_id, exc)
            return None

    # -- background duties ----------------------------------------------------------------

    async def _listen(self) -> None:
        """Resolve local watches from ``p:done``; reconnect with backoff and re-read after."""
        pubsub = self._pubsub
        assert pubsub is not None
        backoff = ExponentialBackoff(cap=2.0, base=0.1)
        failures = 0
        last_ping = last_heard = last_retry = time.monotonic()
        while not self._closed:
            started = time.monotonic()
            try:
                if started - last_heard > self._heartbeat_ttl and pubsub.connection is not None:
                    # Nothing (not even our pings' pongs) for too long: the connection is
                    # half-open. Drop it; the next read reconnects and resubscribes.
                    last_heard = started
                    await pubsub.connection.disconnect()
                    raise RedisConnectionError("no answer to pub/sub pings")
                if started - last_ping >= self._heartbeat_interval:
                    last_ping = started
                    await pubsub.ping()
                message = await pubsub.get_message(timeout=self._tick)
            except (RedisError, OSError, TimeoutError) as exc:
                _reraise_cancellation(exc)
                self._mark_lost(exc, started)
                failures += 1
                await asyncio.sleep(backoff.compute(failures))
                last_heard = time.monotonic()  # judge silence on the next connection afresh
                continue
            now = time.monotonic()
            if message is not None:
                last_heard = now
                failures = 0
                self._mark_ok()
            try:
                if message is not None and message["type"] == "subscribe":
                    # a resubscription after a reconnect: anything may have ended meanwhile
                    self._log.info("pending store resubscribed to %s", self._done_channel)
                    await self._reread(list(self._watches))
                elif message is not None and message["type"] == "message":
                    await self._reread([str(message["data"])])
                if self._retry and now - last_retry >= self._tick:
                    last_retry = now
                    await self._reread(list(self._retry))
            except Exception:  # never let one bad message stop the notifications
                self._log.exception("pending store subscriber failed on %r", message)

    async def _heartbeats(self) -> None:
        """Refresh this process's heartbeat and sweep for orphans, every interval."""
        while not self._closed:
            await asyncio.sleep(self._heartbeat_interval)
            self._give_up_if_lost()
            try:
                await self._op("heartbeat", self._beat)
                await self._check_lost()
                if time.monotonic() - self._healthy_since < self._heartbeat_ttl:
                    # Just (re)connected: other processes may not have refreshed their
                    # heartbeats yet. Judge nobody dead until they all had the chance.
                    continue
                orphans = await self.sweep_orphans()
            except UserQuestionError:
                continue  # logged once by the health tracking
            except Exception:
                self._log.exception("pending store sweep failed")
                continue
            if orphans and self.on_orphans is not None:
                try:
                    await self.on_orphans(orphans)
                except Exception:
                    self._log.exception("on_orphans failed")

    async def _check_lost(self) -> None:
        """Fail the waits on records that vanished (Redis flushed): ``RECORD_LOST``."""
        ids = waiting_ids(self._watches)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]

            async def exists(chunk: list[str] = chunk) -> list[int]:
                pipe = self._client.pipeline(transaction=False)
                for request_id in chunk:
                    pipe.exists(self._key("req", request_id))
                return cast(list[int], await pipe.execute())

            found = await self._op("check the watched records", exists)
            for request_id, present in zip(chunk, found, strict=True):
                if not present:
                    self._log.error("pending store lost record %s (was Redis flushed?)", request_id)
                    fail_lost(self._watches.get(request_id, ()), request_id)

    def _give_up_if_lost(self) -> None:
        """Fail every local wait once Redis has been gone for ``outage_limit`` seconds.

        A waiting ``ask()`` then raises ``STORE_UNAVAILABLE`` instead of hanging; the
        provider records the failure once Redis is back.
        """
        if self._healthy is not False or time.monotonic() - self._ok_at < self._outage_limit:
            return
        error = UserQuestionError(
            f"the pending store (Redis at {self._shown_url}) has been unreachable for more "
            f"than {self._outage_limit:g} seconds",
            STORE_UNAVAILABLE,
        )
        for watches in self._watches.values():
            for watch in watches:
                if not watch.future.done():
                    watch.future.set_exception(error)
                    watch.future.exception()  # the waiter re-raises it; never "unretrieved"

    async def _beat(self) -> None:
        await self._client.set(self._alive_key, f"{time.time():.3f}", px=_px(self._heartbeat_ttl))

    # -- plumbing -------------------------------------------------------------------------

    @staticmethod
    def _new_token() -> str:
        """A fresh token per write (the same across redis-py's retries of that write)."""
        return secrets.token_hex(8)

    async def _op(self, what: str, action: Callable[[], Awaitable[T]]) -> T:
        """Run one Redis operation within ``op_timeout``; failures are ``STORE_UNAVAILABLE``."""
        if self._closed:
            raise _closed_error()
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._op_timeout):
                result = await action()
        except (RedisError, OSError, TimeoutError) as exc:
            _reraise_cancellation(exc)
            if isinstance(exc, _CONNECTION_ERRORS):
                self._mark_lost(exc, started)
            detail = self._scrub(str(exc)) or f"no answer within {self._op_timeout:g}s"
            raise UserQuestionError(
                f"the pending store (Redis) could not {what}: {detail}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc
        self._mark_ok()
        return result

    def _mark_ok(self) -> None:
        self._ok_at = time.monotonic()
        if self._healthy is False:
            self._log.info("pending store reconnected to Redis at %s", self._shown_url)
        if self._healthy is not True:
            self._healthy_since = self._ok_at
        self._healthy = True

    def _mark_lost(self, exc: BaseException, started: float) -> None:
        if started < self._ok_at:
            return  # something succeeded since this attempt began: not an outage
        if self._healthy is not False:
            detail = self._scrub(str(exc)) or type(exc).__name__
            self._log.warning(
                "pending store lost Redis at %s (%s); retrying", self._shown_url, detail
            )
        self._healthy = False

    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    async def _release(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            except (RedisError, OSError) as exc:
                self._log.debug("closing pub/sub: %s", exc)
        await self._client.aclose(close_connection_pool=True)

    def __repr__(self) -> str:
        return (
            f"RedisPendingStore({self._shown_url!r}, prefix={self._prefix!r},"
            f" process_id={self._process_id!r})"
        )


if TYPE_CHECKING:

    def _conforms(store: RedisPendingStore) -> PendingStore:
        return store
