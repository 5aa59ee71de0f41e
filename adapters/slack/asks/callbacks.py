"""A question's ``callback``, owed before it is asked: by whatever delivers webhooks (the
bot's ``Webhooks``), or refused at once (``BAD_CALLBACK``) when nothing would deliver it."""

from __future__ import annotations

from typing import Protocol

from adapters.slack.model import ids
from bot.questions import AskOptions, UserQuestionError
from bot.questions.errors import BAD_CALLBACK

__all__ = ["Callbacks", "owe_callback"]

UNWIRED = (
    "this provider delivers no callbacks: wire webhooks to it first "
    "(bot.app.embedded.embed_webhooks(provider, secret=..., hosts=[...])), or ask without one"
)


class Callbacks(Protocol):
    """Owes a question's callback one POST when it ends (``bot.webhooks.Webhooks``)."""

    async def owe(self, request_id: str, url: str, asked_by: str | None) -> str | None:
        """Keep the delivery owed; or why ``url`` may not be a callback (nothing kept)."""
        ...


async def owe_callback(callbacks: Callbacks | None, options: AskOptions) -> AskOptions:
    """``options`` with the request id its delivery is owed under; raises ``BAD_CALLBACK``."""
    if options.callback is None:
        return options
    if callbacks is None:
        raise UserQuestionError(UNWIRED, BAD_CALLBACK)
    request_id = options.request_id or (
        ids.key_request_id(options.key) if options.key else ids.new_request_id()
    )
    why = await callbacks.owe(request_id, options.callback, options.asked_by)
    if why is not None:
        raise UserQuestionError(f"callback refused: {why}", BAD_CALLBACK)
    return options.model_copy(update={"request_id": request_id})
