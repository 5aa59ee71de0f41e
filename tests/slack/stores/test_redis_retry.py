"""A Redis write whose reply is lost, retried by redis-py after another process wrote.

The write is applied; only its reply never arrives. redis-py retries the same script with
the same token, and by then another process may have written the record once more: the
retry must be recognised as done (its token is among the last ones kept under
``p:tok:{id}``), not refused as stale. Otherwise ``mutate`` decides again on the record it
wrote itself, and an approver whose click was applied is told the request is no longer open.

The lost reply is real: a TCP proxy between the store and Redis closes the connection on
the reply to one script call, and holds new connections until the other process has written.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis

from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import mutate, redis_lua
from adapters.slack.stores.redis import RedisPendingStore
from adapters.slack.stores.redis_lua import WRITE
from bot.questions.models import AskUserQuestionItem
from tests.conftest import TEST_REDIS_URL

RedisStoreFactory = Callable[..., Awaitable[RedisPendingStore]]


def make_record(owner: str | None) -> PendingRecord:
    return PendingRecord(
        id=f"r-{uuid.uuid4().hex[:12]}",
        owner=owner,
        questions=[AskUserQuestionItem(id="q1", question="Ship it?")],
        channel="C0123456",
    )


def answer(by: str) -> Callable[[PendingRecord], PendingRecord | None]:
    """A click's change: answer the request if it is still open."""
    return lambda r: (
        r.next(state="answered", answered_by=by, finished_at=time.time()) if r.is_open else None
    )


class ReplyDropper:
    """A TCP proxy to Redis that loses the reply to one call of one script.

    ``arm(sha)``: the next ``EVALSHA`` of that script goes through to Redis (it runs), and
    the connection is closed as its reply comes back (the reply is kept in ``lost_reply``);
    from then on new connections wait until ``release()``.
    """

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._armed: bytes | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.admit = asyncio.Event()
        self.admit.set()
        self.dropped = asyncio.Event()
        self.lost_reply: bytes | None = None
        self.url = ""

    @classmethod
    @contextlib.asynccontextmanager
    async def serving(cls, redis_url: str) -> AsyncIterator[ReplyDropper]:
        parts = urlsplit(redis_url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 6379)
        proxy._server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
        port = proxy._server.sockets[0].getsockname()[1]
        proxy.url = parts._replace(netloc=f"127.0.0.1:{port}").geturl()
        try:
            yield proxy
        finally:
            proxy.admit.set()
            proxy._server.close()
            for writer in list(proxy._writers):
                writer.close()

    def arm(self, sha: str) -> None:
        self._armed = sha.encode()

    def release(self) -> None:
        self.admit.set()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._writers.add(client_w)
        await self.admit.wait()
        try:
            upstream_r, upstream_w = await asyncio.open_connection(self._host, self._port)
        except OSError:
            client_w.close()
            return
        self._writers.add(upstream_w)
        doomed = asyncio.Event()
        await asyncio.gather(
            self._to_redis(client_r, upstream_w, doomed),
            self._to_client(upstream_r, client_w, upstream_w, doomed),
        )

    async def _to_redis(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, doomed: asyncio.Event
    ) -> None:
        try:
            while data := await reader.read(65536):
                if self._armed is not None and b"EVALSHA" in data.upper() and self._armed in data:
                    self._armed = None
                    doomed.set()  # (before Redis can answer it)
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _to_client(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: asyncio.StreamWriter,
        doomed: asyncio.Event,
    ) -> None:
        try:
            while data := await reader.read(65536):
                if doomed.is_set():
                    self.lost_reply = data
                    self.admit.clear()  # the retry's new connection waits for release()
                    upstream.close()
                    self.dropped.set()
                    return
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_a_write_applied_whose_reply_was_lost_is_done_though_another_came_between(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    async with asyncio.timeout(30):
        other = await redis_store_factory(process_id="B")
        sha = await redis_admin.script_load(WRITE)
        record = make_record(None)
        assert await other.create(record)
        async with ReplyDropper.serving(TEST_REDIS_URL) as proxy:
            clicker = RedisPendingStore(proxy.url, prefix=store_prefix, process_id="A")
            await clicker.start()
            try:
                proxy.arm(sha)
                click = asyncio.ensure_future(mutate(clicker, record.id, answer("U_A"), by="U_A"))
                await proxy.dropped.wait()
                assert proxy.lost_reply == b":1\r\n"  # it ran: only its reply is lost
                _, between = await mutate(other, record.id, lambda r: r.next(note="by B"))
                assert between is not None and between.version == 2
                proxy.release()  # now redis-py's retry of the click's write gets through
                seen, written = await click
            finally:
                await clicker.close()
        assert written is not None and written.answered_by == "U_A"
        assert seen is not None and seen.is_open  # decided once, on the open record
        stored = await other.get(record.id)
        assert stored is not None
        assert (stored.state, stored.answered_by, stored.version) == ("answered", "U_A", 2)
        by_a = [e for e in await other.events(record.id) if e.by == "U_A"]
        assert len(by_a) == 1  # the retry appended no second event


async def test_a_create_applied_whose_reply_was_lost_is_done_though_another_came_between(
    redis_store_factory: RedisStoreFactory, redis_admin: aioredis.Redis, store_prefix: str
) -> None:
    async with asyncio.timeout(30):
        other = await redis_store_factory(process_id="B")
        sha = await redis_admin.script_load(WRITE)
        record = make_record("A")
        async with ReplyDropper.serving(TEST_REDIS_URL) as proxy:
            asker = RedisPendingStore(proxy.url, prefix=store_prefix, process_id="A")
            await asker.start()
            try:
                proxy.arm(sha)
                creating = asyncio.ensure_future(asker.create(record))
                await proxy.dropped.wait()
                assert proxy.lost_reply == b":1\r\n"
                _, between = await mutate(other, record.id, lambda r: r.next(note="by B"))
                assert between is not None and between.version == 1
                proxy.release()
                created = await creating
            finally:
                await asker.close()
        assert created  # not "a record with this id exists already"
        assert await other.get(record.id) == between


async def test_the_last_write_tokens_are_kept_capped_and_live_as_long_as_the_record(
    redis_store_factory: RedisStoreFactory,
    redis_admin: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with asyncio.timeout(20):
        kept_at_most: int = redis_lua.WRITE_TOKENS_KEPT
        store = await redis_store_factory(finished_ttl=10)
        record = make_record(store.process_id)
        tok = f"{store.prefix}:tok:{record.id}"
        monkeypatch.setattr(store, "_new_token", lambda: "create-0")
        assert await store.create(record)
        # one token, a plain string: what the version before kept (it reads it with GET)
        assert await redis_admin.type(tok) == "string"
        assert await redis_admin.get(tok) == "create-0"
        writes = [record]
        for i in range(1, kept_at_most + 4):
            writes.append(writes[-1].next(note=f"note {i}"))
            monkeypatch.setattr(store, "_new_token", lambda i=i: f"write-{i}")
            assert await store.compare_and_set(writes[-1])
        kept = str(await redis_admin.get(tok)).split()
        assert kept == [f"write-{i}" for i in range(kept_at_most + 3, 3, -1)]  # newest first
        assert await redis_admin.type(tok) == "string"
        assert await redis_admin.pttl(tok) == -1  # pending: no TTL, as the record
        # a retry of one of the last writes is done; of an older one, refused (stale)
        monkeypatch.setattr(store, "_new_token", lambda: "write-4")
        assert await store.compare_and_set(writes[4])
        monkeypatch.setattr(store, "_new_token", lambda: "write-3")
        assert not await store.compare_and_set(writes[3])
        monkeypatch.setattr(store, "_new_token", lambda: "create-0")
        assert not await store.create(record)
        assert await store.get(record.id) == writes[-1]

        # ended: the tokens take the record's TTL; bookkeeping keeps it; a reopen lifts it
        ended = writes[-1].next(state="answered", finished_at=time.time())
        monkeypatch.setattr(store, "_new_token", lambda: "end")
        assert await store.compare_and_set(ended)
        assert 0 < await redis_admin.pttl(tok) <= 10_000
        assert str(await redis_admin.get(tok)).split()[:2] == ["end", f"write-{kept_at_most + 3}"]
        monkeypatch.setattr(store, "_new_token", lambda: "note")
        noted = ended.next(message_ts="1.2")
        assert await store.compare_and_set(noted)
        assert 0 < await redis_admin.pttl(tok) <= 10_000
        monkeypatch.setattr(store, "_new_token", lambda: "reopen")
        assert await store.compare_and_set(noted.next(state="pending"))
        assert await redis_admin.pttl(tok) == -1
        assert len(str(await redis_admin.get(tok)).split()) == kept_at_most
