"""``InteractionHandler``: what a click or a modal submission does, on the ack path.

A click reads, in order: parse (interactions.py) → authorize (authorize.py) → decide
(transitions.py) → compare-and-set (pending.py). The winning write of a terminal state
wakes the waiting ``ask()`` through the store's watch; everything that talks to Slack
afterwards (the message update, a private note, a modal) goes to the synchroniser's
background tasks, so the listener acks in about a millisecond.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from adapters.slack.authorize import Gatekeeper
from adapters.slack.failures import settle
from adapters.slack.interactions import (
    Interaction,
    Origin,
    parse_block_actions,
    parse_view_submission,
)
from adapters.slack.messages import NO_LONGER_OPEN, NOT_ALLOWED
from adapters.slack.pending import PendingStore
from adapters.slack.record import PendingRecord
from adapters.slack.synchroniser import MessageSynchroniser
from adapters.slack.transitions import (
    Decision,
    Finish,
    Ignore,
    Invalid,
    Modal,
    Refuse,
    Save,
    decide,
)

__all__ = ["InteractionHandler"]


class InteractionHandler:
    """Applies Slack interactions to pending records; the listeners' only counterpart."""

    def __init__(self, store: PendingStore, gate: Gatekeeper, sync: MessageSynchroniser) -> None:
        self._store = store
        self._gate = gate
        self._sync = sync

    async def handle_action(self, body: Mapping[str, Any]) -> None:
        """Handle a ``block_actions`` payload (already acked)."""
        interaction = parse_block_actions(body)
        if interaction is None:
            return  # not ours
        record = await self._store.get(interaction.request_id)
        if record is None:
            self._sync.stale(interaction.origin)
            return
        allowed = self._gate.decide_cached(
            interaction.origin.user, record.allowed_users, record.allowed_usergroups
        )
        if allowed is None:  # needs a Web API call: do it off the ack path
            self._sync.spawn(self._authorize_then_apply(interaction, record), "authorize click")
            return
        await self._apply(interaction, record, allowed)

    async def handle_view(self, body: Mapping[str, Any]) -> dict[str, str] | None:
        """Handle a ``view_submission``; returns input errors to show in the modal, if any."""
        interaction = parse_view_submission(body)
        if interaction is None:
            return None
        record = await self._store.get(interaction.request_id)
        if record is None:
            return {interaction.input_block_id: NO_LONGER_OPEN}
        allowed = await self._gate.allowed(
            interaction.origin.user, record.allowed_users, record.allowed_usergroups
        )
        if not allowed:
            return {interaction.input_block_id: NOT_ALLOWED}
        decision = await self._decide_and_write(interaction)
        if isinstance(decision, Refuse):
            return {interaction.input_block_id: decision.plain or _plain(decision.text)}
        if isinstance(decision, Invalid):
            return decision.errors
        return None

    async def _authorize_then_apply(self, interaction: Interaction, record: PendingRecord) -> None:
        allowed = await self._gate.allowed(
            interaction.origin.user, record.allowed_users, record.allowed_usergroups
        )
        await self._apply(interaction, record, allowed)

    async def _apply(self, interaction: Interaction, record: PendingRecord, allowed: bool) -> None:
        if not allowed:
            self._sync.note(interaction.origin, record, NOT_ALLOWED)
            return
        decision = await self._decide_and_write(interaction)
        if isinstance(decision, Refuse):
            self._sync.note(interaction.origin, record, decision.text)
            await self._adopt_message(record, interaction.origin)
            self._sync.refresh(record.id)
        elif isinstance(decision, Modal) and interaction.origin.trigger_id:
            self._sync.open_modal(interaction.origin.trigger_id, decision.view)

    async def _decide_and_write(self, interaction: Interaction) -> Decision:
        """Decide on the freshest record and write it; the first writer wins, losers re-decide."""
        decision: Decision = Ignore()

        def change(current: PendingRecord) -> PendingRecord | None:
            nonlocal decision
            decision = decide(current, interaction, time.time())
            if isinstance(decision, Finish | Save):
                return decision.record
            return None

        seen, written = await settle(self._store, interaction.request_id, change)
        if seen is None:
            return Refuse(NO_LONGER_OPEN)
        if written is not None and (
            isinstance(decision, Finish) or (isinstance(decision, Save) and decision.rerender)
        ):
            self._sync.refresh(interaction.request_id)
        return decision

    async def _adopt_message(self, record: PendingRecord, origin: Origin) -> None:
        """Learn the message's ts from a click when the ask never saw Slack's reply."""
        if record.message_ts is not None or not origin.channel or not origin.message_ts:
            return
        channel, ts = origin.channel, origin.message_ts
        await settle(
            self._store,
            record.id,
            lambda r: (
                r.next(message_channel=channel, message_ts=ts) if r.message_ts is None else None
            ),
        )


def _plain(text: str) -> str:
    """Mrkdwn mentions made readable for a plain-text modal error."""
    return text.replace("<@", "@").replace(">", "")
