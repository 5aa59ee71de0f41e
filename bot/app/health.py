"""``/healthz``: the mode, the store, the open questions this process serves, what waits on
them, and each connection's state (``owned`` by this process, ``unowned``: any process's)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from aiohttp import web

from adapters.dsh.client import DshHostClient
from adapters.slack import SlackQuestionProvider
from bot.api.gateway import Gateway
from bot.settings.config import Mode

if TYPE_CHECKING:
    from bot.app.socket_mode import SocketMode

__all__ = ["HEALTH_STORE_TIMEOUT", "Health"]

HEALTH_STORE_TIMEOUT: Final = 3.0
"""Longest ``/healthz`` waits for the store before it calls it unreachable, in seconds."""


class Health:
    """``GET /healthz``: mode, store, the questions pending (owned/unowned) and open, the waiters,
    the Web API queue, and each connection's state."""

    def __init__(self, mode: Mode, provider: SlackQuestionProvider) -> None:
        self.mode = mode
        self.provider = provider
        self.socket: SocketMode | None = None
        self.dsh: DshHostClient | None = None
        self.gateway: Gateway | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer ``GET /healthz``: 503 and ``ok: false`` while the store is unreachable."""
        store = self.provider.store
        body: dict[str, object] = {"ok": True, "mode": self.mode}
        try:
            async with asyncio.timeout(HEALTH_STORE_TIMEOUT):
                count = await store.open_count()
        except Exception as exc:  # HarnessError(STORE_UNAVAILABLE), RedisError, TimeoutError
            body.update(ok=False, store="unreachable", error=type(exc).__name__)
        else:
            body.update(
                store="ok",
                pending=count.mine + count.unowned,
                owned=count.mine,
                unowned=count.unowned,
                open=count.total,
            )
        body["waiters"] = store.watch_count
        if self.gateway is not None:
            body["longPolls"] = self.gateway.long_polls
        scheduler = getattr(self.provider.client, "scheduler", None)
        if scheduler is not None:  # Web API calls waiting for Slack's rate limits
            body["webApiQueue"] = scheduler.depths()
        if self.socket is not None:
            body.update(await self.socket.status())
        if self.dsh is not None:
            body.update(self.dsh.status())
        return web.json_response(body, status=200 if body["ok"] else 503)
