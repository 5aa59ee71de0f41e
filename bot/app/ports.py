"""Opening a listening port, with errors that name the setting to change."""

from __future__ import annotations

import errno
import socket
from collections.abc import Awaitable
from typing import TypeVar

from bot.settings.secrecy import show

__all__ = ["PortUnavailable", "listening"]

T = TypeVar("T")


class PortUnavailable(OSError):
    """A server could not listen on ``host:port``; the message names the setting."""

    def __str__(self) -> str:
        return str(self.strerror)


async def listening(opening: Awaitable[T], *, setting: str, host: str, port: int) -> T:
    """Await ``opening`` (a server starting on ``host:port``); a refused bind names ``setting``
    (``PORT``, ``SANDBOX_PORT``), a host name that does not resolve names ``HOST``."""
    try:
        return await opening
    except OSError as exc:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if isinstance(exc, socket.gaierror):  # getaddrinfo: its errno is an EAI_* code
            message = (
                f"HOST: {show(host)} does not resolve to an address ({exc.strerror}). Set HOST to "
                "an IP address of this machine (127.0.0.1, or 0.0.0.0 for all) or a name "
                "that resolves to one."
            )
        elif exc.errno == errno.EADDRINUSE:
            message = (
                f"{setting}: {where} is already in use (another bot, or another program). "
                f"Set {setting} to a free port, or to 0 for any free port."
            )
        elif exc.errno == errno.EADDRNOTAVAIL:
            message = f"HOST: {host} is not an address of this machine, so {where} cannot be used."
        elif exc.errno == errno.EACCES:
            message = (
                f"{setting}: {where} needs privileges this process lacks (ports below 1024). "
                f"Set {setting} to 1024 or above."
            )
        else:
            raise
        raise PortUnavailable(exc.errno, message) from exc
