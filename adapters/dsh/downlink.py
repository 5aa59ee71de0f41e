"""The downlink: the host's WebSocket held open, reconnecting with capped jittered backoff
(tenacity); a message over ``max_frame`` bytes is skipped with a warning, the connection kept."""

from __future__ import annotations

import asyncio
import random
from typing import Literal

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential_jitter

from adapters.dsh.host import HTTP_FAILURES, Host, describe
from adapters.dsh.link import MuxLink
from adapters.dsh.mux import MUX_PATH
from adapters.urls import redact_url

ConnectionState = Literal["connecting", "connected", "disconnected"]
"""What ``status()`` reports about the downlink."""

HANDSHAKE_TIMEOUT = 15.0
"""Seconds a connection attempt may take, up to the upgrade's answer (tests set it small)."""

REPEAT_WARNING = 60.0
"""Seconds between warnings while the host stays out of reach (tests set it small)."""


class _Failed(Exception):
    """A connection attempt failed; the message says why."""


class Downlink:
    """Keeps the host's event downlink open: one ``link.opened`` per connection, then its
    texts (``too_big`` for each over ``max_frame`` bytes, which is skipped)."""

    def __init__(
        self, host: Host, link: MuxLink, *, heartbeat: float | None, max_frame: int
    ) -> None:
        self._host = host
        self._link = link
        self._shown_url = redact_url(host.base)
        self._heartbeat = heartbeat
        self._max_frame = max_frame
        self._logger = host.logger
        self.state: ConnectionState = "connecting"
        self.problem: str | None = None
        """Why the host is out of reach, while it is (for ``/healthz``)."""
        self._ever_connected = False
        self._warned_at = 0.0

    async def run(self) -> None:
        """Connect, read, reconnect: until cancelled (backoff capped at ``backoff_max``)."""
        while True:
            retrying = AsyncRetrying(
                wait=wait_exponential_jitter(
                    multiplier=self._host.backoff_initial,
                    max=self._host.backoff_max,
                    jitter=self._host.backoff_initial,
                ),
                retry=retry_if_exception_type(_Failed),
                before_sleep=lambda state: self._lost(
                    str(state.outcome and state.outcome.exception())
                ),
                reraise=True,
            )
            async for attempt in retrying:  # never stops: every failure is retried
                with attempt:
                    ws = await self._attempt()
            reason = "the host closed the downlink"
            try:
                async with ws:
                    self._connected()
                    await self._read(ws)
                if ws.close_code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG:
                    reason = f"a downlink message was over {4 * self._max_frame} bytes"
            except HTTP_FAILURES as exc:
                reason = describe(exc)
            except Exception as exc:  # a bug in frame handling must not end the loop
                self._logger.exception("dsh host: downlink failed")
                reason = describe(exc)
            self._lost(reason)
            await asyncio.sleep(self._host.backoff_initial * random.uniform(0.5, 1.0))

    async def _attempt(self) -> aiohttp.ClientWebSocketResponse:
        """One connection attempt; ``_Failed`` says why it failed."""
        bound = asyncio.timeout(HANDSHAKE_TIMEOUT)
        try:
            # Bounded up to the upgrade's answer: a host that takes the TCP connection and
            # never answers cannot hold the client at "connecting" for good.
            async with bound:
                headers = await self._link.auth.login()
                return await self._host.http().ws_connect(
                    self._host.base + MUX_PATH,
                    headers=headers,
                    heartbeat=self._heartbeat,
                    timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
                    max_msg_size=4 * self._max_frame,
                )
        except TimeoutError as exc:
            late = f"the host did not answer the downlink's upgrade within {HANDSHAKE_TIMEOUT:g} s"
            reason = late if bound.expired() else describe(exc)
        except aiohttp.WSServerHandshakeError as exc:
            reason = f"the host refused the downlink: HTTP {exc.status}"
            if exc.status in (401, 403):
                reason += " (check DSH_HOST_TOKEN)"
            elif exc.status in (404, 405):
                reason += " (is DSH_HOST_URL a dsh web host?)"
        except HTTP_FAILURES as exc:
            reason = describe(exc)
        except Exception as exc:  # a login refused, or a bug: retried all the same
            if not getattr(exc, "expected", False):
                self._logger.exception("dsh host: connection attempt failed")
            reason = str(exc) or describe(exc)
        raise _Failed(reason)

    def _connected(self) -> None:
        again = self._ever_connected
        self._ever_connected = True
        self.state = "connected"
        self._logger.info(
            "dsh host: reconnected" if again else "dsh host: connected",
            extra={"url": self._shown_url},
        )

    def _lost(self, reason: str) -> None:
        now = asyncio.get_running_loop().time()
        self.problem = reason
        if self.state != "disconnected" or now - self._warned_at >= REPEAT_WARNING:
            message = {
                "connected": "dsh host: disconnected; reconnecting with backoff",
                "connecting": "dsh host: cannot connect; retrying with backoff",
                "disconnected": "dsh host: still cannot connect; retrying with backoff",
            }[self.state]
            self._warned_at = now
            self._logger.warning(message, extra={"url": self._shown_url, "reason": reason})
        else:
            self._logger.debug("dsh host: still not connected", extra={"reason": reason})
        self.state = "disconnected"

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.problem = None
        try:
            await self._link.opened(ws)
            async for message in ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    text, limit = message.data, self._max_frame
                    fits = 4 * len(text) <= limit or (  # (at most 4 bytes a character)
                        len(text) <= limit and len(text.encode()) <= limit
                    )
                    (self._link.on_message if fits else self._link.too_big)(text)
                elif message.type is aiohttp.WSMsgType.ERROR:
                    break
                else:
                    self._logger.warning(
                        "dsh host: skipped a non-text downlink message",
                        extra={"kind": message.type.name},
                    )
        finally:
            self._link.closed()
