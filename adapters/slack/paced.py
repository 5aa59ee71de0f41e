"""``PacedWebClient``: slack_sdk's ``AsyncWebClient`` with every call sent through the scheduler.

Every Web API method of slack_sdk's client ends in ``api_call``; this client queues that
call in a ``WebApiScheduler`` (lane: the channel for posts, the message for updates) and
leaves 429s to it, so nothing that uses the client (the provider, bolt, the gatekeeper)
can spend more than Slack's limits or fail for having waited its turn.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.slack.scheduler import WebApiScheduler

__all__ = ["PacedWebClient"]


class PacedWebClient(AsyncWebClient):
    """An ``AsyncWebClient`` whose calls wait their turn in ``scheduler``."""

    def __init__(self, *args: Any, scheduler: WebApiScheduler, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler = scheduler
        """Where every call waits its turn (``depths()`` for ``/healthz``)."""
        self.retry_handlers = [
            h for h in self.retry_handlers if not isinstance(h, AsyncRateLimitErrorRetryHandler)
        ]

    async def api_call(
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict[str, Any] | None = None,
        data: Any = None,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        auth: dict[str, Any] | None = None,
    ) -> AsyncSlackResponse:
        """Queue the call in the scheduler; returns Slack's response once sent."""
        args: dict[str, Any] = {}
        for source in (params, data, json):
            if isinstance(source, dict):
                args.update(source)
        channel = args.get("channel") or args.get("user")
        key = None
        if api_method == "chat.update" and args.get("ts"):
            key = f"{channel}/{args['ts']}"
        send = functools.partial(
            super().api_call,
            api_method,
            http_verb=http_verb,
            files=files,
            data=data,
            params=params,
            json=json,
            headers=headers,
            auth=auth,
        )
        response: AsyncSlackResponse = await self.scheduler.call(
            api_method, send, channel=str(channel) if channel else None, key=key
        )
        return response

    async def update_latest(
        self,
        channel: str,
        ts: str,
        latest: Callable[[], Awaitable[Mapping[str, Any] | None]],
    ) -> AsyncSlackResponse | None:
        """``chat.update`` of one message with the content ``latest()`` gives when its turn
        comes (``None``: nothing to send). While it waits, a newer update of the message
        replaces it, so a busy message gets one call per turn showing its newest state."""

        async def send() -> AsyncSlackResponse | None:
            fields = await latest()
            if fields is None:
                return None
            body = {"channel": channel, "ts": ts, **fields}
            return await super(PacedWebClient, self).api_call("chat.update", json=body)

        response: AsyncSlackResponse | None = await self.scheduler.call(
            "chat.update", send, channel=channel, key=f"{channel}/{ts}"
        )
        return response
