"""The bolt listeners: ack first, then hand the payload to the interaction handler."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from adapters.slack.clicks.handler import InteractionHandler
from adapters.slack.home.tab import HomeTab
from adapters.slack.model import ids

__all__ = ["register_listeners"]


def register_listeners(app: AsyncApp, handler: InteractionHandler, home: HomeTab) -> None:
    """Route our actions (a tool approval's too) and submissions to ``handler``, and
    ``app_home_opened`` to ``home``."""

    @app.action(ids.ACTION_PATTERN)
    @app.action(ids.APPROVAL_ACTION_PATTERN)
    async def on_action(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await handler.handle_action(body)

    @app.view_submission(ids.CALLBACK_PATTERN)
    async def on_submission(ack: AsyncAck, body: dict[str, Any]) -> None:
        errors = await handler.handle_view(body)
        await (ack(response_action="errors", errors=errors) if errors else ack())

    @app.event("app_home_opened")
    async def on_home(event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab") == "home" and isinstance(user, str) and user:
            home.open_later(user)  # publishing is a Web API call: off the ack path
