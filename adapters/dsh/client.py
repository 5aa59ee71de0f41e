"""``DshHostClient``: the bot as a connected client of a running dsh web host (the 0.2
protocol); each request becomes one ask keyed by its id."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

import aiohttp

from adapters.dsh.asks import HostAsk
from adapters.dsh.downlink import ConnectionState, Downlink
from adapters.dsh.host import Host, host_asker
from adapters.dsh.link import MuxLink
from adapters.dsh.mux import split_host_url
from adapters.dsh.open_requests import OpenRequests
from adapters.dsh.runners import ApprovalRunner, QuestionRunner
from adapters.slack import SlackQuestionProvider
from adapters.urls import redact_url
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService


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
        self._logger = logger or logging.getLogger("adapters.dsh")
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False
        host = Host(
            self._base, self._http, self._logger, self._stopped, backoff_initial, backoff_max
        )
        asker = host_asker(self._base)
        self._requests = OpenRequests(
            provider,
            self._serve,
            host,
            max_open=max_open_per_session,
            max_open_host=max_open_per_host,
            replay_window=replay_window,
            asker=asker,
        )
        self._link = MuxLink(host, token or url_token, self._requests, max_frame_bytes)
        self._downlink = Downlink(host, self._link, heartbeat=heartbeat, max_frame=max_frame_bytes)
        self.skips = self._link.skips
        """Malformed frames skipped, counted (``counts``) and logged once a minute."""
        self._questions = QuestionRunner(
            service,
            provider,
            self._link,
            asker=asker,
            on_posted=self._requests.posted,
            logger=self._logger,
            review=review,
        )
        self._approvals = ApprovalRunner(
            provider,
            self._link,
            asker=asker,
            approvers=approvers,
            approver_groups=approver_groups,
            on_posted=self._requests.posted,
            logger=self._logger,
        )

    @property
    def state(self) -> ConnectionState:
        """The downlink's state."""
        return self._downlink.state

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
        status: dict[str, Any] = {"dsh": self._downlink.state, "dshProtocol": "0.2"}
        if self._downlink.problem is not None:
            status["dshProblem"] = self._downlink.problem
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
        self._loop = asyncio.get_running_loop().create_task(
            self._downlink.run(), name="dsh downlink"
        )

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
        self._downlink.state = "disconnected"
        self._logger.info("dsh host: stopped", extra={"url": self._shown_url})

    def _stopped(self) -> bool:
        return self._stopping

    def _http(self) -> aiohttp.ClientSession:
        assert self._session is not None, "start() first"
        return self._session

    def _serve(self, ask: HostAsk) -> Coroutine[Any, Any, None]:
        runner = self._questions if ask.approval is None else self._approvals
        return runner.serve(ask)
