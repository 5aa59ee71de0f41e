"""``DshHostClient``: the bot as a connected client of a running dsh web host (the 0.2
protocol); each request becomes one ask keyed by its id. Its downlink (the host's WebSocket)
reconnects with capped jittered backoff (tenacity); a message over ``max_frame_bytes`` bytes is
skipped with a warning, the connection kept."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from typing import Any, Literal

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential_jitter

from adapters.dsh.host import HTTP_FAILURES, Host, describe, host_asker
from adapters.dsh.link import MuxLink
from adapters.dsh.mux import MUX_PATH, split_host_url
from adapters.dsh.open_requests import OpenRequests
from adapters.dsh.runners import HostRunner
from adapters.slack import SlackQuestionProvider
from adapters.urls import redact_url
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

ConnectionState = Literal["connecting", "connected", "disconnected"]
"""What ``status()`` reports about the downlink."""

HANDSHAKE_TIMEOUT = 15.0
"""Seconds a connection attempt may take, up to the upgrade's answer (tests set it small)."""

REPEAT_WARNING = 60.0
"""Seconds between warnings while the host stays out of reach (tests set it small)."""


class _Failed(Exception):
    """A connection attempt failed; the message says why."""


class DshHostClient:
    """Answers a running dsh web host's questions and approvals in Slack (``base_url`` may
    carry the host's ``?token=``)."""

    def __init__(
        self,
        base_url: str,
        service: UserQuestionService,
        *,
        provider: SlackQuestionProvider,
        token: str | None = None,
        backoff_initial: float = 0.25,
        backoff_max: float = 1.5,
        replay_window: float = 2.0,
        heartbeat: float | None = 30.0,
        stop_grace: float = 5.0,
        max_frame_bytes: int = 8 * 1024 * 1024,
        max_open_per_session: int = 20,
        max_open_per_host: int = 100,
        review: ReviewPolicy | None = None,
        approvers: Sequence[str] | None = None,
        approver_groups: Sequence[str] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("backoff needs 0 < backoff_initial <= backoff_max")
        if max_frame_bytes < 1024 or min(max_open_per_session, max_open_per_host) < 1:
            raise ValueError("max_frame_bytes must be >= 1024 and the open-request caps >= 1")
        self._base, url_token = split_host_url(base_url)
        self._shown_url = redact_url(self._base)
        self._stop_grace = stop_grace
        self._heartbeat = heartbeat
        self._max_frame = max_frame_bytes
        self._logger = logger or logging.getLogger("adapters.dsh")
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False
        self.state: ConnectionState = "connecting"
        """The downlink's state."""
        self.problem: str | None = None
        """Why the host is out of reach, while it is (for ``/healthz``)."""
        self._ever_connected = False
        self._warned_at = 0.0
        self._host = host = Host(
            self._base, self._http, self._logger, self._stopped, backoff_initial, backoff_max
        )
        asker = host_asker(self._base)
        self._requests = OpenRequests(
            provider,
            lambda ask: self._runner.serve(ask),  # the runner is made below
            host,
            max_open=max_open_per_session,
            max_open_host=max_open_per_host,
            replay_window=replay_window,
            asker=asker,
        )
        self._link = MuxLink(host, token or url_token, self._requests, max_frame_bytes)
        self.skips = self._link.skips
        """Malformed frames skipped, counted (``counts``) and logged once a minute."""
        self._runner = HostRunner(
            service,
            provider,
            self._link,
            asker=asker,
            approvers=approvers,
            approver_groups=approver_groups,
            on_posted=self._requests.posted,
            logger=self._logger,
            review=review,
        )

    @property
    def in_flight(self) -> int:
        """Requests of the host being asked or answered now, queued ones too."""
        return sum(self._requests.counts())

    @property
    def queued(self) -> int:
        """Requests waiting for a free place in their session's share of Slack."""
        return self._requests.queued

    def status(self) -> dict[str, Any]:
        """For ``/healthz``: the downlink's state and the host's open questions and approvals."""
        questions, approvals = self._requests.counts()
        status: dict[str, Any] = {"dsh": self.state, "dshProtocol": "0.2"}
        if self.problem is not None:
            status["dshProblem"] = self.problem
        return status | {"dshQuestions": questions, "dshApprovals": approvals}

    async def start(self) -> None:
        """Start the connection loop and return at once (the host may still be down)."""
        if self._loop is not None or self._stopping:
            raise RuntimeError("a dsh host client starts once")
        # No total timeout on the session: it would cut the long-lived downlink.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0)
        )
        self._logger.info("dsh host: connecting", extra={"url": self._shown_url})
        self._loop = asyncio.get_running_loop().create_task(self._run(), name="dsh downlink")

    async def stop(self) -> None:
        """Stop reconnecting, release the open requests (a later bot adopts them), close HTTP."""
        if self._stopping:
            return
        self._stopping = True
        loop_task, self._loop = self._loop, None
        if loop_task is not None:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
        await self._requests.release(self._stop_grace)
        if self._session is not None:
            await self._session.close()
        self.state = "disconnected"
        self._logger.info("dsh host: stopped", extra={"url": self._shown_url})

    def _stopped(self) -> bool:
        return self._stopping

    def _http(self) -> aiohttp.ClientSession:
        assert self._session is not None, "start() first"
        return self._session

    async def _run(self) -> None:
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
                    self.state = "connected"
                    again = self._ever_connected
                    self._ever_connected = True
                    connected = "dsh host: reconnected" if again else "dsh host: connected"
                    self._logger.info(connected, extra={"url": self._shown_url})
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
                return await self._http().ws_connect(
                    self._base + MUX_PATH,
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
