"""Webhooks: one POST to a question's ``callback`` when it ends, signed as Slack signs
(``X-Webhook-Signature``), retried with backoff for ``GIVE_UP_AFTER``; only hosts in
``WEBHOOK_HOSTS``, no redirects, no private addresses unless ``WEBHOOK_ALLOW_PRIVATE``."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from adapters.slack import BackgroundTasks
from bot.api.access import asker_of
from bot.api.taken import Watch
from bot.webhook_outbox import Delivery, Outbox

GIVE_UP_AFTER: Final = 86_400.0
"""Seconds after a question ends that its delivery is retried before it is given up."""
REPLAY_WINDOW: Final = 300.0
"""Seconds a receiver accepts a timestamp from (``verify``): an older request is a replay."""
POST_TIMEOUT: Final = 10.0
"""Seconds one attempt may take (a receiver that stalls longer has failed it)."""
LEASE: Final = 30.0
RECHECK: Final = 60.0
"""Seconds between looks at a question still open, should its ending not be seen here."""
IN_PROCESS: Final = ""
"""The name of the secret questions asked in process (no API token) are signed with."""
_log = logging.getLogger("bot.webhooks")


def signing_secret(api_token: str) -> bytes:
    """The secret deliveries to ``api_token``'s callbacks are signed with (derived from it,
    so the agent holding the token can check them and nobody else can)."""
    return hmac.new(api_token.encode(), b"slack-user-questions webhook", hashlib.sha256).digest()


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """``v0=`` + HMAC-SHA256 of ``v0:{timestamp}:{body}``, as Slack signs its requests."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()


def verify(
    secret: bytes, headers: Mapping[str, str], body: bytes, *, now: float | None = None
) -> bool:
    """Whether a delivery is genuine and fresh (within ``REPLAY_WINDOW``): for receivers."""
    try:
        timestamp = int(headers.get("X-Webhook-Timestamp", ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - timestamp) > REPLAY_WINDOW:
        return False
    given = headers.get("X-Webhook-Signature", "")
    return hmac.compare_digest(given, sign(secret, timestamp, body))


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    return ip.is_global and not ip.is_multicast


class _PublicResolver(AbstractResolver):
    """Resolves names to public addresses only (no rebinding into a private range)."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = [r for r in await self._inner.resolve(host, port, family) if _public(r["host"])]
        if not found:
            raise OSError(f"{host} resolves to no public address")
        return found

    async def close(self) -> None:
        await self._inner.close()


Status = Callable[[str], Awaitable[dict[str, Any] | None]]
"""The body ``GET /v1/questions/{id}`` answers with, ``{}`` while open, ``None`` if unknown."""


class Webhooks:
    """Keeps the outbox and delivers from it, in every process that runs one: one task
    watches every owed question (a store watch each, no task) and looks at what is due."""

    def __init__(
        self,
        outbox: Outbox,
        view: Status,
        watch: Watch,
        secrets: Mapping[str, str],
        *,
        hosts: frozenset[str],
        allow_private: bool = False,
        poll: float = 0.5,
    ) -> None:
        self.outbox = outbox
        self._view, self._report_ending, self._secrets = view, watch, secrets
        self.hosts, self._allow_private = hosts, allow_private
        self._poll = poll
        self._tasks = BackgroundTasks(_log)  # the watcher, and each attempt while it runs
        self._watched: set[str] = set()  # a store watch reports their ending
        self._unwatched: dict[str, float] = {}  # to watch (unknown yet, or the store away): since
        self._attempting: set[str] = set()
        self._wake = asyncio.Event()
        self._stopping = False
        self._session: aiohttp.ClientSession | None = None
        self.delivered = 0

    def refusal(self, url: str, asker: str | None) -> str | None:
        """Why a question may not have ``url`` as its callback; ``None`` when it may."""
        host = (urlsplit(url).hostname or "").rstrip(".")
        if asker is None or asker not in self._secrets:
            return "a callback needs an API token (its deliveries are signed with it)"
        if not self.hosts:
            return "this bot takes no callbacks (the operator allows no host: WEBHOOK_HOSTS)"
        if host not in self.hosts:
            return f"the callback's host {host!r} is not one the operator allows (WEBHOOK_HOSTS)"
        with contextlib.suppress(ValueError):  # a name, not an address: resolved when posting
            if not self._allow_private and not _public(host.strip("[]")):
                return "the callback's address is private (WEBHOOK_ALLOW_PRIVATE is off)"
        return None

    async def owe(self, request_id: str, url: str, asked_by: str | None) -> str | None:
        """Owe ``url`` a delivery for a question asked by ``asked_by`` (an API token's
        ``api:<name>``, else in process); or why it may not (nothing is owed then)."""
        api, name = asker_of(asked_by)
        asker = name if api else IN_PROCESS
        why = self.refusal(url, asker)
        if why is None:
            now = time.time()
            await self.outbox.add(Delivery(request_id, url, asker, now, now + RECHECK))
            self._watch(request_id)
        return why

    def start(self) -> None:
        resolver = None if self._allow_private else _PublicResolver()
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver))
        self._tasks.spawn(self._run(), "webhook watcher")

    async def stop(self) -> None:
        self._stopping = True  # a cancel a Redis read swallows must not keep the loop going
        await self._tasks.drain(0.0)
        if self._session is not None:
            await self._session.close()
        await self.outbox.close()

    def _watch(self, request_id: str) -> None:
        """Deliver as soon as the question ends (seen through the store, from any process)."""
        if request_id not in self._watched and not self._stopping:
            self._unwatched.setdefault(request_id, time.time())
            self._wake.set()

    async def _watch_owed(self) -> bool:
        """Set a store watch on each question owed one; whether one not stored yet (the ask
        stores it right after owing) is to be tried again soon (after ``RECHECK``: never)."""
        soon = False
        for request_id, since in list(self._unwatched.items()):
            del self._unwatched[request_id]
            self._watched.add(request_id)  # (a watch may report before this returns)
            age = 0.0
            try:
                if await self._report_ending(request_id, self._ended):
                    continue
                age = time.time() - since
                soon = soon or age < 1.0
            except Exception as exc:  # the store down: tried again next time
                _log.info("webhook watch of %s not set: %s", request_id, exc)
            self._watched.discard(request_id)
            if age <= RECHECK:
                self._unwatched.setdefault(request_id, since)
        return soon

    def _ended(self, request_id: str, outcome: Any) -> None:
        """A watch reported: attempt the delivery, or watch again (the store was away)."""
        self._watched.discard(request_id)
        if isinstance(outcome, BaseException):
            self._watch(request_id)
        else:
            self._try(request_id)

    async def _run(self) -> None:
        due_at = 0.0
        while not self._stopping:
            soon = False
            try:
                soon = await self._watch_owed()
                if time.monotonic() >= due_at:
                    due_at = time.monotonic() + self._poll * random.uniform(0.5, 1.5)
                    for delivery in await self.outbox.due(time.time()):
                        self._try(delivery.id)
            except Exception as exc:  # the store down: looked at again next time
                _log.warning("webhook outbox unavailable: %s", exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.01 if soon else due_at - time.monotonic()):
                    await self._wake.wait()
            self._wake.clear()

    def _try(self, delivery_id: str) -> None:
        """Start an attempt at ``delivery_id``, unless this process makes one already (a slow
        store or receiver would otherwise see every periodic look start another)."""
        if delivery_id not in self._attempting and not self._stopping:
            self._attempting.add(delivery_id)
            self._tasks.spawn(self._attempt(delivery_id), "webhook")

    async def _attempt(self, delivery_id: str) -> None:
        """Claim the delivery (one process per attempt) and make the attempt."""
        now, view = time.time(), None
        try:
            kept = await self.outbox.get(delivery_id)
            if kept is None or not kept.claimable(now):
                return
            held = kept.claimed(now + LEASE)
            if not await self.outbox.put(kept, held):
                return  # another process holds this attempt
            view = await self._view(delivery_id)
            after: Delivery | None = None  # delivered, or given up
            if view == {}:  # still open: look again later, and as soon as it ends
                after = replace(held, next_at=now + RECHECK, leased=False)
            elif view is not None and await self._post(held, view):
                self.delivered += 1
            elif view is not None and now - held.created_at <= GIVE_UP_AFTER:
                pause = min(3600.0, 2.0**held.tries)
                after = replace(held, next_at=now + pause, leased=False, tries=held.tries + 1)
            else:
                _log.warning("webhook of %s given up after %d tries", delivery_id, held.tries + 1)
            await self.outbox.put(held, after)
        finally:
            self._attempting.discard(delivery_id)
        if view == {}:
            self._watch(delivery_id)  # once this attempt has let go of the id

    async def _post(self, delivery: Delivery, view: dict[str, Any]) -> bool:
        """One attempt; whether the receiver took it (2xx)."""
        assert self._session is not None
        body = json.dumps(view, ensure_ascii=False).encode()
        stamp = int(time.time())
        secret = signing_secret(self._secrets[delivery.asker or ""])
        headers = {
            "Content-Type": "application/json",
            "X-Webhook-Timestamp": str(stamp),
            "X-Webhook-Signature": sign(secret, stamp, body),
            "X-Webhook-Id": delivery.id,
            "X-Webhook-Attempt": f"{delivery.id}.{delivery.version}",
        }
        try:
            async with self._session.post(
                delivery.url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=POST_TIMEOUT),
            ) as response:
                return 200 <= response.status < 300
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            _log.info("webhook of %s failed: %s", delivery.id, type(exc).__name__)
            return False
