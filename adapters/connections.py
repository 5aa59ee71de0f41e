"""A TCP listener for aiohttp: a cap on open connections (503 over it) and time limits."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Final, cast

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from adapters.httpguard import RefusalLog

LINGER: Final = 1.0
"""Seconds the server keeps reading an unread body after answering early (aiohttp: 10)."""
_BUSY_TEXT: Final = b"too many connections; retry\n"
_BUSY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    + f"Content-Length: {len(_BUSY_TEXT)}\r\n".encode()
    + b"Retry-After: 1\r\nConnection: close\r\n\r\n"
    + _BUSY_TEXT
)


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """How long a client may take, and how many may be connected at once."""

    header_timeout: float = 10.0
    """Seconds to send a complete request head (also the keep-alive idle limit)."""
    body_timeout: float = 30.0
    """Seconds to send a request body."""
    max_connections: int = 1024
    """Open connections at most; more are answered 503 and closed."""


class GuardedSite(web.TCPSite):
    """A TCP site that answers connections over ``max_connections`` with 503 and closes them."""

    __slots__ = ("_max", "_open")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, max_connections: int) -> None:
        super().__init__(runner, host, port)
        self._max, self._open = max_connections, 0

    async def start(self) -> None:
        """Listen (``TCPSite``'s own start would serve every connection: it is skipped)."""
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: self._protocol(server), self._host, self._port, reuse_address=True
        )

    def _protocol(self, server: web.Server) -> asyncio.BaseProtocol:
        if self._open >= self._max:
            return _Busy()
        self._open += 1
        return cast(asyncio.BaseProtocol, _Counted(server(), self))


class _Busy(asyncio.Protocol):
    """Answers 503 and closes: the connection cap is reached."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY)
        transport.close()


class _Counted:
    """aiohttp's handler, every protocol call passed on; the site counts it open until its
    connection is lost."""

    def __init__(self, inner: RequestHandler, site: GuardedSite) -> None:
        self._inner, self._site = inner, site

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def connection_lost(self, exc: Exception | None) -> None:
        self._site._open -= 1
        self._inner.connection_lost(exc)


def _server_logger(refusals: RefusalLog) -> logging.Logger:
    """A logger for one listener's aiohttp handlers, under ``aiohttp.server``: requests it
    could not parse are counted refusals, other lines logged as ``refusals`` throttles them."""

    def counted(record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            reason = str(error.message).strip().splitlines()[0] if error.message else "malformed"
            refusals.refused("bad_http", f"malformed HTTP ({reason})")
            return False
        return bool(refusals.due(f"server: {record.msg}"))

    log = logging.Logger("aiohttp.server")  # not registered: dropped with the listener
    log.parent = logging.getLogger("aiohttp.server")
    log.addFilter(counted)
    return log


async def start_listener(
    app: web.Application,
    host: str,
    port: int,
    *,
    limits: ListenerLimits,
    refusals: RefusalLog,
    shutdown_timeout: float,
) -> web.AppRunner:
    """Serve ``app`` on ``host:port`` with ``limits`` (a ``GuardedSite``); returns the runner."""
    runner = web.AppRunner(
        app,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=limits.header_timeout,
        lingering_time=LINGER,
        logger=_server_logger(refusals),
    )
    await runner.setup()
    site = GuardedSite(runner, host, port, limits.max_connections)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
