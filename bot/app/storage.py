"""The pending store (read alone for the audit trail), the webhook outbox and the rate-limit
budget the settings choose."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from adapters.slack.pacing.budget import Budget, RedisBudget
from adapters.slack.stores import MemoryPendingStore, PendingStore, SqlitePendingStore
from adapters.urls import redact_url
from bot.settings.config import Settings
from bot.webhook_outbox import MemoryOutbox, Outbox, RedisOutbox, SqliteOutbox

if TYPE_CHECKING:
    from adapters.slack.stores.redis import RedisPendingStore


async def open_store(settings: Settings) -> PendingStore:
    """The store ``settings`` choose (memory, SQLite or Redis), started."""
    store: PendingStore
    if settings.store == "memory":  # kept RETENTION_DAYS as the others (not silently 90)
        store = MemoryPendingStore(finished_ttl=settings.retention_days * 86400)
    else:
        store = durable_store(settings)
    await store.start()
    return store


def durable_store(settings: Settings) -> SqlitePendingStore | RedisPendingStore:
    """The SQLite or Redis store ``settings`` choose, not started (``python -m bot audit``
    reads its trail without starting it)."""
    retention = settings.retention_days * 86400
    if settings.store == "sqlite":
        return SqlitePendingStore(settings.store_path, retention=retention)
    assert settings.redis_url is not None  # STORE=redis needs it; memory never comes here
    from adapters.slack.stores.redis import RedisPendingStore

    return RedisPendingStore(
        settings.redis_url.get_secret_value(),
        prefix=settings.redis_prefix,
        finished_ttl=retention,
    )


def budget(settings: Settings) -> Budget | None:
    """The app's rate-limit budget, shared by the processes on one Redis; a ``REDIS_URL``
    redis-py cannot use is a startup error naming the setting, the password masked."""
    if settings.redis_url is None:
        return None
    url = settings.redis_url.get_secret_value()
    try:
        return RedisBudget(url, prefix=settings.redis_prefix)
    except (ValueError, TypeError) as exc:
        reason = str(exc)
        if password := urlsplit(url).password:  # REDIS_URL's check parsed it
            reason = reason.replace(password, "***")
        raise RuntimeError(
            f"REDIS_URL={redact_url(url)} is not a usable Redis URL: {reason}"
        ) from None


async def outbox(settings: Settings) -> Outbox:
    """The webhook outbox, in the backend of the store ``settings`` choose."""
    if settings.store == "sqlite":
        return await SqliteOutbox.open(settings.store_path)
    if settings.store == "redis" and settings.redis_url is not None:
        from redis.asyncio import Redis

        client = Redis.from_url(settings.redis_url.get_secret_value())
        return RedisOutbox(client, settings.redis_prefix)
    return MemoryOutbox()
