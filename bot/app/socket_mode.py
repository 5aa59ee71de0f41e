"""Socket Mode: bolt's handler, connected once at start, with its state for ``/healthz``; and
how a refusal of Slack's Web API reads at startup."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.urls import redact_url

SOCKET_CONNECT_TIMEOUT: Final = 30.0
"""Longest wait for the Socket Mode WebSocket to open at startup, in seconds."""
PING_INTERVAL: Final = 1.0
"""Seconds between pings on the WebSocket: a dropped connection is found within this, a
stalled one (no pong within half of it) within about twice this, and replaced at once."""


def slack_reason(exc: SlackApiError) -> str | None:
    """Slack's ``error`` code in the refusal ``exc`` carries, if its answer had one."""
    data = getattr(exc.response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else None


def refusal(exc: SlackApiError, method: str, client: Any, setting: str) -> str:
    """Why ``method`` failed: Slack refusing ``setting`` (with its reason), or an answer that
    was not Slack's JSON (a ``SLACK_API_URL`` without ``/api/``, a proxy's page); shows
    ``client``'s base URL, never its token."""
    response = exc.response
    data = getattr(response, "data", None)
    if isinstance(data, dict) and "ok" in data:  # Slack's own refusal: its reason is in "error"
        return f"Slack refused {setting} ({method}: {slack_reason(exc) or 'no reason given'})"
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    answered = f"HTTP {status}" if status else "an unreadable answer"
    base = str(getattr(client, "base_url", "") or AsyncWebClient.BASE_URL)
    if base.rstrip("/") == AsyncWebClient.BASE_URL.rstrip("/"):
        return (
            f"{method} at Slack's {AsyncWebClient.BASE_URL} (SLACK_API_URL unset) answered "
            f"{answered}, not Slack's JSON: something between this machine and Slack (a "
            "proxy?) answered instead. Try again, or set SLACK_API_URL if Slack is reached "
            "through another address."
        )
    return (
        f"{method} at SLACK_API_URL={redact_url(base)} answered {answered}, not Slack's "
        "JSON; check SLACK_API_URL (the Web API's base URL, ending in /api/)."
    )


class SocketMode:
    """bolt's Socket Mode handler, with its connection state for ``/healthz``."""

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        self.handler = AsyncSocketModeHandler(
            app,
            app_token,
            logger=logging.getLogger("slack_bolt.socket_mode"),
            ping_interval=PING_INTERVAL,
        )

    async def connect(self) -> None:
        """Open the connection; a refused app token fails here, not in a retry loop."""
        client = self.handler.client
        # slack_sdk's connect() retries a failed apps.connections.open forever; ask once
        # first so a wrong SLACK_APP_TOKEN is a startup error with Slack's reason.
        try:
            client.wss_uri = await self._wss_url()
        except SlackApiError as exc:
            why = refusal(exc, "apps.connections.open", client.web_client, "SLACK_APP_TOKEN")
            raise RuntimeError(f"Socket Mode: {why}") from exc
        connecting = self.handler.connect_async()  # type: ignore[no-untyped-call]  # untyped in bolt
        try:
            await asyncio.wait_for(connecting, SOCKET_CONNECT_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(
                f"Socket Mode: the WebSocket that apps.connections.open handed out (for "
                f"SLACK_APP_TOKEN) did not open within {SOCKET_CONNECT_TIMEOUT:g} s. Check that "
                "this machine can reach Slack's Socket Mode servers (wss://wss-primary.slack.com, "
                "port 443; a proxy or firewall may hold the connection), and that Socket Mode is "
                "turned on for the app of SLACK_APP_TOKEN."
            ) from None

    async def _wss_url(self) -> str:
        """``apps.connections.open``'s URL, asked here: slack_sdk's ``issue_new_wss_url`` fails
        with an ``AttributeError`` on a non-JSON answer (``ratelimited`` is left to it)."""
        client = self.handler.client
        try:
            response = await client.web_client.apps_connections_open(app_token=client.app_token)
        except SlackApiError as exc:
            if slack_reason(exc) != "ratelimited":
                raise
            return await client.issue_new_wss_url()
        return str(response["url"])

    async def status(self) -> dict[str, str]:
        """``{"socket": "connected" | "disconnected"}``."""
        connected = await self.handler.client.is_connected()
        return {"socket": "connected" if connected else "disconnected"}

    async def close(self) -> None:
        """Close the WebSocket and the handler's HTTP session."""
        await self.handler.close_async()  # type: ignore[no-untyped-call]  # untyped in bolt
