"""Clicks on an approval's two buttons: parse, authorize, record the decision once."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from adapters.slack.asks.authorize import Gatekeeper
from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.model import ids
from adapters.slack.model.audience import who_may
from adapters.slack.model.interactions import Origin, origin_of
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import NOT_AN_APPROVER, not_recorded, not_yours
from adapters.slack.stores import PendingStore, settle
from bot.questions import UserQuestionError

__all__ = [
    "NOT_AN_APPROVER",
    "NO_LONGER_OPEN_APPROVAL",
    "ApprovalClick",
    "ApprovalHandler",
    "parse_approval_click",
]

NO_LONGER_OPEN_APPROVAL: Final = "This approval is no longer open."
_logger = logging.getLogger("adapters.slack")


@dataclass(frozen=True, slots=True)
class ApprovalClick:
    """Someone (``origin``) clicked Allow once or Reject on approval ``request_id``."""

    request_id: str
    outcome: Literal["allowed-once", "rejected"]
    origin: Origin


def parse_approval_click(body: Mapping[str, Any]) -> ApprovalClick | None:
    """The approval click a ``block_actions`` payload carries, or ``None`` if not ours."""
    actions = body.get("actions")
    if body.get("type") != "block_actions" or not isinstance(actions, list) or not actions:
        return None
    action = actions[0] if isinstance(actions[0], Mapping) else {}
    match = ids.APPROVAL_ACTION_PATTERN.match(str(action.get("action_id") or ""))
    ref = ids.parse_block_id(action.get("block_id"))
    origin = origin_of(body)
    if match is None or ref is None or origin is None:
        return None
    return ApprovalClick(
        ref.request_id, "allowed-once" if match.group(1) == "allow" else "rejected", origin
    )


class ApprovalHandler:
    """Applies approval clicks: allowed people only, the first click on an open record wins."""

    def __init__(self, store: PendingStore, gate: Gatekeeper, sync: MessageSynchroniser) -> None:
        self._store = store
        self._gate = gate
        self._sync = sync

    async def handle_action(self, body: Mapping[str, Any]) -> None:
        """Record an approval click (already acked)."""
        click = parse_approval_click(body)
        if click is None:
            return
        await self._recording(click, self._handle(click))

    async def _recording(self, click: ApprovalClick, work: Awaitable[None]) -> None:
        """Run ``work``; a store that cannot take the click tells the person, not Slack (a 500)."""
        try:
            await work
        except UserQuestionError as exc:
            _logger.warning(
                "approval click not recorded",
                extra={"request_id": click.request_id, "error": exc.message, "code": exc.code},
            )
            self._sync.note(click.origin, None, not_recorded())

    async def _handle(self, click: ApprovalClick) -> None:
        record = await self._store.get(click.request_id)
        if record is None or record.approval is None:
            self._sync.note(click.origin, None, NO_LONGER_OPEN_APPROVAL)
            return
        allowed = self._gate.decide_cached(click.origin.user, *who_may(record))
        if allowed is None:  # needs a Web API call: off the ack path
            later = self._recording(click, self._authorize_then_apply(click, record))
            self._sync.spawn(later, "authorize approval click")
            return
        await self._apply(click, record, allowed)

    async def _authorize_then_apply(self, click: ApprovalClick, record: PendingRecord) -> None:
        allowed = await self._gate.allowed(click.origin.user, *who_may(record))
        await self._apply(click, record, allowed)

    async def _apply(self, click: ApprovalClick, record: PendingRecord, allowed: bool) -> None:
        """Refuse, or decide on the freshest record (``record``: the one read on the way)."""
        origin, now = click.origin, time.time()
        if not allowed:
            _logger.info(
                "approval click refused: not an approver",
                extra={"request_id": record.id, "user": origin.user},
            )
            self._sync.note(origin, record, not_yours(record))
            return

        def decide(current: PendingRecord) -> PendingRecord | None:
            if not current.is_open or current.approval is None:
                return None
            view = current.approval.model_copy(update={"outcome": click.outcome})
            where: dict[str, object] = {}
            if current.message_ts is None and origin.channel and origin.message_ts:
                # Posted by a bot that died before storing the ts: learn it from the click.
                where = {"message_channel": origin.channel, "message_ts": origin.message_ts}
            return current.next(
                state="answered",
                approval=view,
                answered_by=origin.user,
                answered_by_name=origin.name,
                finished_at=now,
                note=None,
                **where,
            )

        rid, who = click.request_id, origin.user
        _, written = await settle(self._store, rid, decide, by=who, by_name=origin.name)
        if written is None:
            self._sync.note(origin, record, NO_LONGER_OPEN_APPROVAL)
        self._sync.refresh(click.request_id)
