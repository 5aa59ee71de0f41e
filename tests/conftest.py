"""Shared fixtures: pending stores (memory, SQLite, Redis), each test in its own file or prefix.

The Redis fixtures use ``TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``) and FAIL,
never skip, when Redis does not answer: CI starts Redis, so a silent skip would hide a
broken setup.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

if TYPE_CHECKING:  # imported lazily below, so a broken store cannot stop unrelated tests
    from adapters.slack.stores import MemoryPendingStore, PendingStore, SqlitePendingStore
    from adapters.slack.stores.redis import RedisPendingStore

TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
"""The Redis the tests use (its keys all start with a per-test ``test-<uuid>`` prefix)."""

RedisStoreFactory = Callable[..., Awaitable["RedisPendingStore"]]
SqliteStoreFactory = Callable[..., Awaitable["SqlitePendingStore"]]


@pytest.fixture
def redis_url() -> str:
    """The URL of the test Redis (``TEST_REDIS_URL``)."""
    return TEST_REDIS_URL


@pytest.fixture
def store_prefix() -> str:
    """A fresh key prefix for this test."""
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
async def redis_admin(store_prefix: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client on the test Redis; deletes this test's keys afterwards."""
    from adapters.urls import redact_url

    client = aioredis.from_url(TEST_REDIS_URL, decode_responses=True)
    problem: str | None = None
    try:
        async with asyncio.timeout(3):
            await client.ping()
    except (RedisError, OSError, TimeoutError) as exc:
        problem = str(exc) or type(exc).__name__
    if problem is not None:
        await client.aclose()
        pytest.fail(
            f"Redis is not answering at {redact_url(TEST_REDIS_URL)} ({problem}). Start it "
            '(redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" '
            "--appendonly no) or set TEST_REDIS_URL.",
            pytrace=False,
        )
    try:
        yield client
    finally:
        async with asyncio.timeout(10):
            keys = [key async for key in client.scan_iter(match=f"{store_prefix}:*", count=500)]
            if keys:
                await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def redis_store_factory(
    redis_admin: aioredis.Redis, store_prefix: str
) -> AsyncIterator[RedisStoreFactory]:
    """Make started ``RedisPendingStore``s (this test's prefix by default); all closed after."""
    from adapters.slack.stores.redis import RedisPendingStore

    stores: list[RedisPendingStore] = []

    async def make(**options: Any) -> RedisPendingStore:
        options.setdefault("prefix", store_prefix)
        options.setdefault("process_id", f"proc-{uuid.uuid4().hex[:8]}")
        store = RedisPendingStore(TEST_REDIS_URL, **options)
        stores.append(store)
        await store.start()
        return store

    try:
        yield make
    finally:
        for store in stores:
            async with asyncio.timeout(15):
                await store.close()


@pytest.fixture
async def memory_store() -> AsyncIterator[MemoryPendingStore]:
    """A started in-memory store."""
    from adapters.slack.stores import MemoryPendingStore

    store = MemoryPendingStore(process_id=f"memory-{uuid.uuid4().hex[:8]}")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def redis_store(redis_store_factory: RedisStoreFactory) -> RedisPendingStore:
    """A started Redis store in this test's own key prefix (closed, keys deleted, after)."""
    return await redis_store_factory()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    """This test's own SQLite store file (in pytest's temporary directory)."""
    return tmp_path / "store" / "questions.db"


@pytest.fixture
async def sqlite_store_factory(sqlite_path: Path) -> AsyncIterator[SqliteStoreFactory]:
    """Make started ``SqlitePendingStore``s (this test's file by default); all closed after."""
    from adapters.slack.stores import SqlitePendingStore

    stores: list[SqlitePendingStore] = []

    async def make(**options: Any) -> SqlitePendingStore:
        options.setdefault("path", sqlite_path)
        options.setdefault("process_id", f"sqlite-{uuid.uuid4().hex[:8]}")
        store = SqlitePendingStore(**options)
        stores.append(store)
        await store.start()
        return store

    try:
        yield make
    finally:
        for store in stores:
            async with asyncio.timeout(15):
                await store.close()


@pytest.fixture
async def sqlite_store(sqlite_store_factory: SqliteStoreFactory) -> SqlitePendingStore:
    """A started SQLite store on this test's own file."""
    return await sqlite_store_factory()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest) -> PendingStore:
    """Each store implementation in turn (for contract tests)."""
    chosen: PendingStore = request.getfixturevalue(f"{request.param}_store")
    return chosen


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests and everything under tests/e2e/ are slow: the fast tier leaves them out."""
    here = Path(__file__).parent
    for item in items:
        if item.get_closest_marker("browser") or item.path.is_relative_to(here / "e2e"):
            item.add_marker(pytest.mark.slow)
