"""The Redis store's connection: its keys, the pool, bounded operations and the health they show."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from logging import Logger
from typing import Final, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import AuthenticationError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores.contract import StoreUnavailable
from adapters.urls import redact_url
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

T = TypeVar("T")

FAILURES: Final = (RedisError, OSError, TimeoutError)
"""What a Redis call raises when Redis cannot answer (or refuses)."""
PAGE: Final = 500
"""Entries read per XRANGE (and per page of the audit stream's purge), records checked for
existence per pipeline."""
_CONNECTION_ERRORS: Final = (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError)


def px(seconds: float) -> int:
    """``seconds`` in whole milliseconds (at least one), as ``PX`` takes them."""
    return max(1, round(seconds * 1000))


class RedisKeys:
    """The names of every key and channel of one store (``prefix``) and process."""

    def __init__(self, prefix: str, process_id: str) -> None:
        self.prefix, self.process_id = prefix, process_id
        self.record_prefix = f"{prefix}:req:"  # + id: a record
        self.owner_prefix = f"{prefix}:owner:"  # + process id: the pending records it owns
        self.events_prefix = f"{prefix}:events:"  # + id: the stream of a question's events
        self.open = f"{prefix}:open"  # the ids of every pending record
        self.audiences = f"{prefix}:audiences"  # who may answer each open question
        self.owners = f"{prefix}:owners"  # the processes that own (or owned) pending records
        self.sweep = f"{prefix}:sweep"  # the lock held while one process sweeps
        self.done = f"{prefix}:done"  # the channel of the ids of records that just ended
        self.audit = f"{prefix}:audit"  # the stream of every audit event
        self.audit_head = f"{prefix}:audit:head"  # the chain's head: "seq hash"
        self.audit_purged = f"{prefix}:audit:purged"  # each purged event's "at hash" by seq
        self.my_alive = self.alive(process_id)  # this process's heartbeat

    def record(self, request_id: str) -> str:
        return self.record_prefix + request_id

    def owner(self, process_id: str) -> str:
        return self.owner_prefix + process_id

    def alive(self, process_id: str) -> str:
        return f"{self.prefix}:alive:{process_id}"

    def events(self, request_id: str) -> str:
        return self.events_prefix + request_id

    def of_record(self, record: PendingRecord) -> list[str]:
        """The keys a record's scripts touch (record, token, indexes, audit, audiences)."""
        return [
            self.record(record.id),
            f"{self.prefix}:tok:{record.id}",
            self.open,
            self.owner(record.owner or "-"),
            self.owners,
            self.audit,
            self.events(record.id),
            self.audiences,
            self.audit_head,
        ]


def reraise_cancellation(exc: BaseException) -> None:
    """Raise ``CancelledError`` if this task is being cancelled (a timeout's ``exc`` hides it)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc


def closed_error() -> UserQuestionError:
    """What an operation on a closed store raises, and what ends its waits."""
    return UserQuestionError("the pending store (Redis) is closed", STORE_UNAVAILABLE)


class RedisLink:
    """One store's client (a blocking pool), its keys and log, and what its operations tell
    of Redis's health."""

    def __init__(
        self, url: str, keys: RedisKeys, *, op_timeout: float, max_connections: int, log: Logger
    ) -> None:
        self.keys = keys
        self.log = log
        self.shown_url = redact_url(url)
        try:
            self._password = urlsplit(url).password or ""
        except ValueError:
            self._password = ""
        self.op_timeout = op_timeout
        self.closed = False
        self.healthy: bool | None = None  # whether Redis answered last time (None: never yet)
        self.ok_at = 0.0  # when (monotonic) Redis last answered
        self.healthy_since = 0.0  # when (monotonic) Redis answered again after an outage
        self.chain_lock = asyncio.Lock()
        """One audit append at a time of this store's (its writers would only lose races to
        each other for the chain's head)."""
        try:
            # A blocking pool: under a burst, an operation waits for a free connection
            # (within op_timeout) instead of failing with "Too many connections".
            pool = aioredis.BlockingConnectionPool.from_url(
                url,
                max_connections=max_connections,
                timeout=op_timeout,
                decode_responses=True,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3),
                retry_on_error=[RedisConnectionError, RedisTimeoutError],
                socket_timeout=op_timeout / 2,
                socket_connect_timeout=op_timeout / 2,
                client_name=re.sub(r"[^!-~]", "_", f"{keys.prefix}:{keys.process_id}"),
            )
        except ValueError as exc:
            # redis-py's reason may quote a piece of the URL (a password read as the port):
            # kept only when it quotes nothing before the URL's last @, and never chained.
            reason = str(exc)
            userinfo = url.partition("://")[2].rpartition("@")[0]
            quoted = re.findall(r"'([^']*)'", reason)
            plain = all(not piece or piece not in userinfo for piece in quoted)
            detail = f": {reason.rstrip('.')}" if plain else ""
            raise ValueError(
                f"REDIS_URL={self.shown_url} is not a usable Redis URL{detail}"
            ) from None
        self.client: aioredis.Redis = aioredis.Redis(connection_pool=pool)

    async def op(self, what: str, action: Callable[[], Awaitable[T]]) -> T:
        """Run one Redis operation within ``op_timeout``; failures are ``STORE_UNAVAILABLE``."""
        if self.closed:
            raise closed_error()
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.op_timeout):
                result = await action()
        except FAILURES as exc:
            reraise_cancellation(exc)
            if isinstance(exc, _CONNECTION_ERRORS):
                self.mark_lost(exc, started)
            detail = self.scrub(str(exc)) or f"no answer within {self.op_timeout:g}s"
            raise UserQuestionError(
                f"the pending store (Redis) could not {what}: {detail}",
                STORE_UNAVAILABLE,
                cause=exc,
            ) from exc
        self.mark_ok()
        return result

    def mark_ok(self) -> None:
        """Redis just answered."""
        self.ok_at = time.monotonic()
        if self.healthy is False:
            self.log.info("pending store reconnected to Redis at %s", self.shown_url)
        if self.healthy is not True:
            self.healthy_since = self.ok_at
        self.healthy = True

    def mark_lost(self, exc: BaseException, started: float) -> None:
        """An attempt begun at ``started`` (monotonic) found Redis gone."""
        if started < self.ok_at:
            return  # something succeeded since this attempt began: not an outage
        if self.healthy is not False:
            detail = self.scrub(str(exc)) or type(exc).__name__
            self.log.warning(
                "pending store lost Redis at %s (%s); retrying", self.shown_url, detail
            )
        self.healthy = False

    def scrub(self, text: str) -> str:
        """``text`` without the password."""
        return text.replace(self._password, "***") if self._password else text

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        """Why Redis could not be used at start: not reachable, a refused login, a bad db."""
        reason = self.scrub(str(exc)) or f"no answer within {self.op_timeout:g}s"
        shown = self.shown_url
        refused = f"Redis at REDIS_URL={shown} answers, but refused the"
        if isinstance(exc, ResponseError) and "DB index" in str(exc):
            problem = (
                f"{refused} database number in REDIS_URL ({reason}). Use one this server has:"
                " 0 to 15 unless `databases` in its redis.conf says otherwise."
            )
        elif isinstance(exc, AuthenticationError) or any(
            code in str(exc) for code in ("NOAUTH", "WRONGPASS", "invalid password")
        ):
            check = "Check the user name and password in it."
            problem = f"{refused} credentials in REDIS_URL ({reason}). {check}"
        else:
            problem = (
                f"cannot reach the Redis pending store at REDIS_URL={shown}: {reason.rstrip('.')}."
                " Check that Redis is running and that REDIS_URL points at it."
            )
        return StoreUnavailable(problem)
