"""The downlink: ``GET /api/events.mux`` held open as a WebSocket, reconnecting with backoff.

``Downlink.run`` connects, hands each text message to ``on_text`` and reconnects with
jittered exponential backoff when the connection ends (or an attempt gets no answer to its
upgrade within ``HANDSHAKE_TIMEOUT``), logging each change of state once.
A message over ``max_frame`` bytes is skipped with a warning naming its method and rpcId
(read from its first characters), and the connection is kept; aiohttp itself drops a
connection whose message passes four times that.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Callable, Mapping
from typing import Final, Literal

import aiohttp

from adapters.dsh.protocol import EVENTS_MUX_PATH
from adapters.dsh.uplink import HTTP_FAILURES, describe

__all__ = ["HANDSHAKE_TIMEOUT", "ConnectionState", "Downlink"]

ConnectionState = Literal["connecting", "connected", "disconnected"]
"""What ``status()`` reports about the downlink."""

HANDSHAKE_TIMEOUT = 15.0
"""Seconds a connection attempt may take, up to the host's answer to the WebSocket upgrade;
then it counts as failed (backoff, retry). Read at each attempt (tests set it small)."""

_RPC_ID: Final = re.compile(r'"rpcId"\s*:\s*"([^"\\]{1,100})"')
_METHOD: Final = re.compile(r'"method"\s*:\s*"([^"\\]{1,100})"')


class _HandshakeTimedOut(Exception):
    """The host did not answer the downlink's upgrade within ``HANDSHAKE_TIMEOUT``."""


class Downlink:
    """Keeps the host's event downlink open; one ``on_open`` per connection, then its texts."""

    def __init__(
        self,
        base_url: str,
        session: Callable[[], aiohttp.ClientSession],
        headers: Mapping[str, str],
        *,
        shown_url: str,
        backoff_initial: float,
        backoff_max: float,
        heartbeat: float | None,
        max_frame: int,
        on_open: Callable[[], None],
        on_text: Callable[[str], None],
        on_close: Callable[[], None],
        logger: logging.Logger,
    ) -> None:
        self._url = base_url + EVENTS_MUX_PATH
        self._session = session
        self._headers = dict(headers)
        self._shown_url = shown_url
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._heartbeat = heartbeat
        self._max_frame = max_frame
        self._on_open = on_open
        self._on_text = on_text
        self._on_close = on_close
        self._logger = logger
        self.state: ConnectionState = "connecting"
        self._ever_connected = False

    async def run(self) -> None:
        """Connect, read, reconnect: until cancelled."""
        delay = self._backoff_initial
        while True:
            try:
                ws = await self._open()
                async with ws:
                    self._connected()
                    delay = self._backoff_initial
                    await self._read(ws)
                reason = "the host closed the downlink"
                if ws.close_code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG:
                    reason = f"a downlink message was over {4 * self._max_frame} bytes"
            except _HandshakeTimedOut:
                reason = (
                    f"the host did not answer the downlink's upgrade within {HANDSHAKE_TIMEOUT:g} s"
                )
            except aiohttp.WSServerHandshakeError as exc:
                reason = f"the host refused the downlink: HTTP {exc.status}"
                if exc.status in (401, 403):
                    reason += " (check DSH_HOST_TOKEN)"
            except HTTP_FAILURES as exc:
                reason = describe(exc)
            except Exception as exc:  # a bug in frame handling must not end the loop
                self._logger.exception("dsh host: downlink failed")
                reason = describe(exc)
            self._lost(reason)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self._backoff_max)

    async def _open(self) -> aiohttp.ClientWebSocketResponse:
        """Open the downlink, its handshake bounded by ``HANDSHAKE_TIMEOUT``.

        The session has no total timeout (it would cut the long-lived downlink), so without
        this bound a host that takes the TCP connection and never answers the upgrade (hung,
        half-open, a proxy with a dead backend) would hold the loop at "connecting" for good.
        """
        bound = asyncio.timeout(HANDSHAKE_TIMEOUT)
        try:
            async with bound:
                return await self._session().ws_connect(
                    self._url,
                    headers=self._headers,
                    heartbeat=self._heartbeat,
                    timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
                    max_msg_size=4 * self._max_frame,
                )
        except TimeoutError:
            if bound.expired():
                raise _HandshakeTimedOut from None
            raise

    def _connected(self) -> None:
        again = self._ever_connected
        self._ever_connected = True
        self.state = "connected"
        self._logger.info(
            "dsh host: reconnected" if again else "dsh host: connected",
            extra={"url": self._shown_url},
        )

    def _lost(self, reason: str) -> None:
        if self.state == "connected":
            self.state = "disconnected"
            self._logger.warning(
                "dsh host: disconnected; reconnecting with backoff",
                extra={"url": self._shown_url, "reason": reason},
            )
        elif self.state == "connecting":
            self.state = "disconnected"
            self._logger.warning(
                "dsh host: cannot connect; retrying with backoff",
                extra={"url": self._shown_url, "reason": reason},
            )
        else:
            self._logger.debug("dsh host: still not connected", extra={"reason": reason})

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._on_open()
        try:
            async for message in ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    if not self._too_big(message.data):
                        self._on_text(message.data)
                elif message.type is aiohttp.WSMsgType.ERROR:
                    break
                else:
                    self._logger.warning(
                        "dsh host: skipped a non-text downlink message",
                        extra={"kind": message.type.name},
                    )
        finally:
            self._on_close()

    def _too_big(self, text: str) -> bool:
        """Whether ``text`` is over the size limit (then logged, and skipped by the caller)."""
        limit = self._max_frame
        if len(text) <= limit and (4 * len(text) <= limit or len(text.encode()) <= limit):
            return False
        head = text[:2000]
        rpc, method = _RPC_ID.search(head), _METHOD.search(head)
        self._logger.warning(
            "dsh host: skipped a downlink message over the size limit",
            extra={
                "bytes": len(text.encode("utf-8")),
                "limit": limit,
                "method": method.group(1) if method else None,
                "rpc_id": rpc.group(1) if rpc else None,
            },
        )
        return True
