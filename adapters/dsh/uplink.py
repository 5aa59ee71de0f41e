"""The HTTP side of the dsh host: answers with retries, and what an approval's tool will run
(0.1.1: ``POST /api/respond`` and ``session.history``; 0.2: through ``MuxLink``)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import aiohttp
from pydantic import ValidationError

from adapters.dsh.protocol import RESPOND_PATH, SESSION_HISTORY_PATH, ApprovalRequested, Receipt
from adapters.dsh.session_log import SessionEvent, ToolCall, history_events, pair_from_history
from adapters.dsh.wire import load_json

if TYPE_CHECKING:
    from adapters.dsh.link import MuxLink

__all__ = ["HTTP_FAILURES", "Delivery", "Host", "HostUplink", "describe", "host_asker"]

HTTP_FAILURES = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
"""What a request to an unreachable (or vanishing) host raises."""

_PASSING_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
_NOT_TAKEN_STATUSES: Final = frozenset({408, 429, 503})
"""Passing failures that say the request was not handled (a proxy or the host refusing it
for now): unlike a 502/504 or a lost connection, they never hide a response the host took."""
_POST_TIMEOUT: Final = aiohttp.ClientTimeout(total=30.0)
_PAUSE_SLICE: Final = 0.25
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


@dataclass(frozen=True, slots=True)
class Host:
    """What every part of one host's client shares: the host's base URL, the HTTP session,
    the logger, whether the client is stopping, and the backoff between attempts."""

    base: str
    http: Callable[[], aiohttp.ClientSession]
    logger: logging.Logger
    stopping: Callable[[], bool] = lambda: False
    backoff_initial: float = 0.25
    backoff_max: float = 1.5


class _Refused(Exception):
    """The host answered the POST with something other than a receipt."""


class _Unavailable(Exception):
    """The host (or a proxy before it) answered the POST with a passing failure: retry."""

    def __init__(self, detail: str, status: int) -> None:
        super().__init__(detail)
        self.status = status


def _may_have_reached(exc: BaseException) -> bool:
    """Whether a failed attempt may have been taken by the host (its receipt lost)."""
    if isinstance(exc, _Unavailable):
        return exc.status not in _NOT_TAKEN_STATUSES
    return not isinstance(exc, aiohttp.ClientConnectorError)  # never connected: not sent


@dataclass(frozen=True, slots=True)
class Delivery:
    """How sending a response went: the host's ``receipt`` (or ``None``), whether a lost-receipt
    attempt may have ``reached`` it, whether the host ``settled`` it meanwhile."""

    receipt: Receipt | None
    reached: bool = False
    settled: bool = False


class HostUplink:
    """Sends responses to the host and reads session history, over one aiohttp session."""

    def __init__(
        self,
        host: Host,
        headers: Mapping[str, str],
        *,
        retry_for: float,
        connected: Callable[[], bool] = lambda: False,
        link: Callable[[], MuxLink | None] = lambda: None,
    ) -> None:
        self._host = host
        self.asker = host_asker(host.base)
        """The host as the audit trail names who asked its questions and approvals."""
        self._headers = dict(headers)
        self._retry_for = retry_for
        self._connected = connected
        self._link = link
        self._logger = host.logger

    async def respond(
        self,
        rpc_id: str,
        body: Mapping[str, Any],
        *,
        settled: Callable[[], bool] | None = None,
        overdue: Callable[[str], Awaitable[object]] | None = None,
    ) -> Delivery:
        """Send ``body``, retrying for ``retry_for`` seconds, then (capped, no deadline) while
        the downlink stays connected, until taken, ``settled()`` or stopped; ``overdue`` is
        awaited once, at the first failed attempt."""
        link = self._link()
        if link is not None:
            return await link.respond(rpc_id, dict(body), settled=settled, overdue=overdue)
        url = self._host.base + RESPOND_PATH
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._retry_for
        delay = self._host.backoff_initial
        warned = late = reached = False
        while True:
            if settled is not None and settled():
                self._logger.info(
                    "dsh host: request settled while its response was being sent",
                    extra={"rpc_id": rpc_id},
                )
                return Delivery(None, reached, settled=True)
            try:
                async with self._host.http().post(
                    url, json=body, headers=self._headers, timeout=_POST_TIMEOUT
                ) as response:
                    if response.status != 200:
                        detail = f"HTTP {response.status}: {(await response.text())[:200]}"
                        if response.status in _PASSING_STATUSES:
                            raise _Unavailable(detail, response.status)
                        raise _Refused(detail)
                    receipt = Receipt.model_validate(await response.json(content_type=None))
                    return Delivery(receipt, reached)
            except (_Refused, ValueError, ValidationError) as exc:
                # The host is up and answered, but not with a receipt: retrying will not help.
                self._logger.error(
                    "dsh host: response not taken",
                    extra={"rpc_id": rpc_id, "error": str(exc)[:300]},
                )
                return Delivery(None, reached)
            except (_Unavailable, *HTTP_FAILURES) as exc:
                reached = reached or _may_have_reached(exc)
                past = loop.time() + delay > deadline
                if self._host.stopping() or (past and not self._connected()):
                    self._logger.error(
                        "dsh host: gave up sending a response",
                        extra={"rpc_id": rpc_id, "error": describe(exc)},
                    )
                    return Delivery(None, reached)
                if past and not late:
                    late = True
                    self._logger.error(
                        "dsh host: still cannot send a response; retrying while connected",
                        extra={"rpc_id": rpc_id, "error": describe(exc)},
                    )
                elif not warned:
                    warned = True
                    self._logger.warning(
                        "dsh host: could not send a response; retrying",
                        extra={"rpc_id": rpc_id, "error": describe(exc)},
                    )
                    if overdue is not None:
                        await overdue("")
            await self._pause(delay, settled)
            delay = min(delay * 2, self._host.backoff_max)

    async def _pause(self, delay: float, settled: Callable[[], bool] | None) -> None:
        """Sleep ``delay`` s, waking early when the request is settled or the client stops."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay
        while (left := until - loop.time()) > 0:
            if self._host.stopping() or (settled is not None and settled()):
                return
            await asyncio.sleep(min(left, _PAUSE_SLICE))

    async def call_of(self, approval: ApprovalRequested) -> ToolCall | None:
        """What an approval's tool will run, from its session's log (0.2) or history (0.1)."""
        link = self._link()
        if link is not None:
            return await link.call_of(approval.session_id, approval.call_id)
        events = await self.history(approval.session_id)
        return pair_from_history(events, approval.approval_id)

    async def history(self, session_id: str) -> list[SessionEvent]:
        """The session's events from ``POST /api/session.history`` (none if it fails)."""
        body = {
            "type": "client-request",
            "rpcId": str(uuid.uuid4()),
            "method": "session.history",
            "payload": {"type": "session.history", "sessionId": session_id},
        }
        try:
            async with self._host.http().post(
                self._host.base + SESSION_HISTORY_PATH,
                json=body,
                headers=self._headers,
                timeout=_POST_TIMEOUT,
            ) as response:
                if response.status != 200:
                    raise _Refused(f"HTTP {response.status}")
                if (response.content_length or 0) > _MAX_HISTORY_BYTES:
                    raise _Refused(f"{response.content_length} bytes is too long")
                text = await response.text()
            if text.lstrip().startswith("bad-request"):
                raise _Refused(text[:200])
            reply: Any = load_json(text, "session history")
            if isinstance(reply, dict) and isinstance(reply.get("result"), dict):
                result = reply["result"]
                if result.get("ok") is not True:
                    raise _Refused(f"refused: {str(result.get('error'))[:200]}")
                reply = result.get("value")
        except (_Refused, ValueError, RecursionError, *HTTP_FAILURES) as exc:
            self._logger.warning(
                "dsh host: could not read the session history",
                extra={"session": session_id, "error": describe(exc)},
            )
            return []
        return history_events(session_id, reply)
