"""The HTTP side of the dsh host: ``POST /api/respond`` with retries, ``session.history``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
from pydantic import ValidationError

from adapters.dsh.events import SESSION_HISTORY_PATH, SessionEvent, history_events
from adapters.dsh.protocol import RESPOND_PATH, Receipt

__all__ = ["HTTP_FAILURES", "HostUplink", "describe", "host_asker"]

HTTP_FAILURES = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
"""What a request to an unreachable (or vanishing) host raises."""

_PASSING_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
_POST_TIMEOUT: Final = aiohttp.ClientTimeout(total=30.0)
_MAX_HISTORY_BYTES: Final = 32 * 1024 * 1024


def describe(exc: BaseException) -> str:
    """``Type: message`` (or the type alone) for a log line."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def host_asker(base_url: str) -> str:
    """``dsh:<scheme>://<host>[:port][/path]``: the host, without its URL's user, password
    or query (who asked, in the audit trail)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # not a port number: leave it out
        port = ""
    return f"dsh:{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


class _Refused(Exception):
    """The host answered the POST with something other than a receipt."""


class _Unavailable(Exception):
    """The host (or a proxy before it) answered the POST with a passing failure: retry."""


class HostUplink:
    """Sends responses to the host and reads session history, over one aiohttp session."""

    def __init__(
        self,
        base_url: str,
        session: Callable[[], aiohttp.ClientSession],
        headers: Mapping[str, str],
        *,
        backoff_initial: float,
        backoff_max: float,
        retry_for: float,
        stopping: Callable[[], bool],
        logger: logging.Logger,
    ) -> None:
        self._base = base_url
        self.asker = host_asker(base_url)
        """The host as the audit trail names who asked its questions and approvals."""
        self._session = session
        self._headers = dict(headers)
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._retry_for = retry_for
        self._stopping = stopping
        self._logger = logger

    async def respond(self, rpc_id: str, body: Mapping[str, Any]) -> Receipt | None:
        """POST ``body``; retry while the host is unreachable; ``None`` if it never took it."""
        url = self._base + RESPOND_PATH
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._retry_for
        delay = self._backoff_initial
        warned = False
        while True:
            try:
                async with self._session().post(
                    url, json=body, headers=self._headers, timeout=_POST_TIMEOUT
                ) as response:
                    if response.status != 200:
                        detail = f"HTTP {response.status}: {(await response.text())[:200]}"
                        if response.status in _PASSING_STATUSES:
                            raise _Unavailable(detail)
                        raise _Refused(detail)
                    return Receipt.model_validate(await response.json(content_type=None))
            except (_Refused, ValueError, ValidationError) as exc:
                # The host is up and answered, but not with a receipt: retrying will not help.
                self._logger.error(
                    "dsh host: response not taken",
                    extra={"rpc_id": rpc_id, "error": str(exc)[:300]},
                )
                return None
            except (_Unavailable, *HTTP_FAILURES) as exc:
                if self._stopping() or loop.time() + delay > deadline:
                    self._logger.error(
                        "dsh host: gave up sending a response",
                        extra={"rpc_id": rpc_id, "error": describe(exc)},
                    )
                    return None
                if not warned:
                    warned = True
                    self._logger.warning(
                        "dsh host: could not send a response; retrying",
                        extra={"rpc_id": rpc_id, "error": describe(exc)},
                    )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff_max)

    async def history(self, session_id: str) -> list[SessionEvent]:
        """The session's events from ``POST /api/session.history`` (none if it fails)."""
        try:
            async with self._session().post(
                self._base + SESSION_HISTORY_PATH,
                json={"sessionId": session_id},
                headers=self._headers,
                timeout=_POST_TIMEOUT,
            ) as response:
                if response.status != 200:
                    raise _Refused(f"HTTP {response.status}")
                if (response.content_length or 0) > _MAX_HISTORY_BYTES:
                    raise _Refused(f"{response.content_length} bytes is too long")
                body = await response.json(content_type=None)
        except (_Refused, ValueError, RecursionError, *HTTP_FAILURES) as exc:
            self._logger.warning(
                "dsh host: could not read the session history",
                extra={"session": session_id, "error": describe(exc)},
            )
            return []
        return history_events(session_id, body)
