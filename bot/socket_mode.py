"""Socket Mode: bolt's handler, connected once at start, with its state for ``/healthz``."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

__all__ = ["SOCKET_CONNECT_TIMEOUT", "SocketMode"]

SOCKET_CONNECT_TIMEOUT: Final = 30.0
"""Longest wait for the Socket Mode WebSocket to open at startup, in seconds."""


class SocketMode:
    """bolt's Socket Mode handler, with its connection state for ``/healthz``."""

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        self.handler = AsyncSocketModeHandler(
            app, app_token, logger=logging.getLogger("slack_bolt.socket_mode")
        )

    async def connect(self) -> None:
        """Open the connection; a refused app token fails here, not in a retry loop."""
        client = self.handler.client
        # slack_sdk's connect() retries a failed apps.connections.open forever; ask once
        # first so a wrong SLACK_APP_TOKEN is a startup error with Slack's reason.
        try:
            client.wss_uri = await client.issue_new_wss_url()
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            raise RuntimeError(
                f"Socket Mode: Slack refused SLACK_APP_TOKEN in apps.connections.open "
                f"({error or 'no reason given'})"
            ) from exc
        connecting = self.handler.connect_async()  # type: ignore[no-untyped-call]  # untyped in bolt
        await asyncio.wait_for(connecting, SOCKET_CONNECT_TIMEOUT)

    async def status(self) -> dict[str, str]:
        """``{"socket": "connected" | "disconnected"}``."""
        connected = await self.handler.client.is_connected()
        return {"socket": "connected" if connected else "disconnected"}

    async def close(self) -> None:
        """Close the WebSocket and the handler's HTTP session."""
        await self.handler.close_async()  # type: ignore[no-untyped-call]  # untyped in bolt
