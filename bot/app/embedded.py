"""Webhooks wired to a provider: the bot's own (``runtime``) and one embedded in a user's
bolt app (``embed_webhooks``), so a ``callback`` asked in process is delivered as the API's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from adapters.slack import SlackQuestionProvider
from bot.api.asking import ended_view
from bot.webhook_outbox import MemoryOutbox, Outbox
from bot.webhooks import IN_PROCESS, Webhooks

APPROVAL_TTL = 900.0
"""Seconds an answer may be consumed after it was given (the view's ``expiresAt``)."""


def wired(
    provider: SlackQuestionProvider,
    outbox: Outbox,
    secrets: Mapping[str, str],
    *,
    hosts: Iterable[str],
    allow_private: bool = False,
    approval_ttl: float = APPROVAL_TTL,
) -> Webhooks:
    """Webhooks delivering the endings ``provider`` sees, set as its ``webhooks``, started."""
    webhooks = Webhooks(
        outbox,
        lambda request_id: ended_view(provider, request_id, approval_ttl),
        provider.report_ending,
        secrets,
        hosts=frozenset(hosts),
        allow_private=allow_private,
    )
    provider.webhooks = webhooks
    webhooks.start()
    return webhooks


def embed_webhooks(
    provider: SlackQuestionProvider,
    *,
    secret: str,
    hosts: Iterable[str],
    allow_private: bool = False,
    outbox: Outbox | None = None,
) -> Webhooks:
    """Deliver the callbacks of ``provider``'s questions (signed with ``signing_secret(secret)``)
    to ``hosts`` only, from ``outbox`` (default: this process's memory); started: ``stop()``."""
    if len(secret) < 16:
        raise ValueError("secret must be at least 16 characters (it signs every delivery)")
    return wired(
        provider,
        outbox or MemoryOutbox(),
        {IN_PROCESS: secret},
        hosts=hosts,
        allow_private=allow_private,
    )
