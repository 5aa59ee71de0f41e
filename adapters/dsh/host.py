"""What every part of one host's client shares: the host, its HTTP session, its logger."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

HTTP_FAILURES = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
"""What a request to an unreachable (or vanishing) host raises."""


def describe(exc: BaseException) -> str:
    """``Type: message`` (or the type alone) for a log line."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def host_asker(base_url: str) -> str:
    """``dsh:<scheme>://<host>[:port][/path]``: the host, without its URL's user, password
    or query (who asked, in the audit trail); its port was checked with the settings."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None else ""
    return f"dsh:{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


@dataclass(frozen=True, slots=True)
class Host:
    """One host's base URL, the HTTP session, the logger, whether the client is stopping,
    and the backoff between attempts."""

    base: str
    http: Callable[[], aiohttp.ClientSession]
    logger: logging.Logger
    stopping: Callable[[], bool] = lambda: False
    backoff_initial: float = 0.25
    backoff_max: float = 1.5
