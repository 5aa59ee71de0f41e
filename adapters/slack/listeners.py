"""The bolt listeners: ack first, then hand the payload to the provider.

They match our ids with anchored patterns (bolt uses ``Pattern.search``), so another
app's widgets in the same workspace never reach the provider. Run the app with
``process_before_response=True``: the provider does only fast work before returning
(parse, authorize, compare-and-set, resolve) and leaves Web API calls to background tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from adapters.slack import ids

if TYPE_CHECKING:
    from adapters.slack.provider import SlackQuestionProvider

__all__ = ["register_listeners"]


def register_listeners(app: AsyncApp, provider: SlackQuestionProvider) -> None:
    """Route our block actions and modal submissions on ``app`` to ``provider``."""

    async def on_action(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await provider.handle_action(body)

    async def on_submission(ack: AsyncAck, body: dict[str, Any]) -> None:
        errors = await provider.handle_view(body)
        if errors:
            await ack(response_action="errors", errors=errors)
        else:
            await ack()

    app.action(ids.ACTION_PATTERN)(on_action)
    app.view_submission(ids.CALLBACK_PATTERN)(on_submission)
