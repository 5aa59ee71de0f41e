"""``PacedWebClient``: slack_sdk's ``AsyncWebClient`` with every call sent through the scheduler."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.slack.pacing.rate_limits import POST_MESSAGE
from adapters.slack.pacing.scheduler import WebApiScheduler

Guard = Callable[[], Awaitable[bool]]
_GUARD: ContextVar[Guard | None] = ContextVar("web_api_call_guard", default=None)


class NotSent(Exception):
    """A guarded call whose guard said no when its turn came: it was never sent."""


@contextlib.contextmanager
def only_if(guard: Guard) -> Iterator[None]:
    """Calls made in this block are sent only if ``guard()`` still says yes when their turn
    comes (after waiting for Slack's limits); otherwise they raise ``NotSent``."""
    token = _GUARD.set(guard)
    try:
        yield
    finally:
        _GUARD.reset(token)


class PacedWebClient(AsyncWebClient):
    """An ``AsyncWebClient`` whose calls wait their turn in ``scheduler``."""

    def __init__(self, *args: Any, scheduler: WebApiScheduler, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler = scheduler
        """Where every call waits its turn (``depths()`` for ``/healthz``)."""
        self.retry_handlers = [
            h for h in self.retry_handlers if not isinstance(h, AsyncRateLimitErrorRetryHandler)
        ]
        self._own_session: aiohttp.ClientSession | None = None

    def _keep_session(self) -> None:
        """Without a session slack_sdk opens one (and a connection) per call: keep one."""
        if self.session is None:
            timeout = aiohttp.ClientTimeout(total=self.timeout)
            self.session = self._own_session = aiohttp.ClientSession(timeout=timeout)

    async def aclose(self) -> None:
        """Close the scheduler, and the session if this client opened it (idempotent)."""
        await self.scheduler.close()
        if self._own_session is not None:
            await self._own_session.close()

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        """Queue the call in the scheduler; returns Slack's response once sent."""
        self._keep_session()
        args: dict[str, Any] = {}
        for source in ("params", "data", "json"):
            if isinstance(kwargs.get(source), dict):
                args.update(kwargs[source])
        channel = args.get("channel") or args.get("user")
        key = f"{channel}/{args['ts']}" if api_method == "chat.update" and args.get("ts") else None
        guard = _GUARD.get()

        async def send() -> AsyncSlackResponse:
            if guard is not None and not await guard():
                raise NotSent(api_method)
            response = await super(PacedWebClient, self).api_call(api_method, **kwargs)
            if api_method == POST_MESSAGE and channel:
                # Learnt before the caller resumes: its next post (a thread part to the
                # D… id) and the calls still waiting go in the conversation's lane.
                await self.scheduler.learn(str(channel), str(response.get("channel") or ""))
            return response

        return await self.scheduler.call(
            api_method, send, channel=str(channel) if channel else None, key=key
        )

    async def update_latest(
        self, channel: str, ts: str, latest: Callable[[], Awaitable[Mapping[str, Any] | None]]
    ) -> AsyncSlackResponse | None:
        """``chat.update`` of one message with the content ``latest()`` gives when its turn
        comes (``None``: nothing to send). While it waits, a newer update of the message
        replaces it, so a busy message gets one call per turn showing its newest state."""
        self._keep_session()

        async def send() -> AsyncSlackResponse | None:
            if (fields := await latest()) is None:
                return None
            body = {"channel": channel, "ts": ts, **fields}
            return await super(PacedWebClient, self).api_call("chat.update", json=body)

        return await self.scheduler.call(
            "chat.update", send, channel=channel, key=f"{channel}/{ts}"
        )


def paced_copy(client: AsyncWebClient, scheduler: WebApiScheduler) -> PacedWebClient:
    """A ``PacedWebClient`` that calls Slack as ``client`` does (token, address, session,
    proxy, headers, retry handlers), its calls waiting their turn in ``scheduler``."""
    copy = PacedWebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        ssl=client.ssl,
        proxy=client.proxy,
        session=client.session,
        trust_env_in_session=client.trust_env_in_session,
        headers=dict(client.headers),
        logger=client.logger,
        retry_handlers=list(client.retry_handlers),
        scheduler=scheduler,
    )
    copy.default_params.update(client.default_params)  # an org-wide app's team_id
    return copy
