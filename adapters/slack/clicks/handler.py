"""``InteractionHandler``: what a click or a modal submission does, on the ack path; and the
bolt listeners that ack first, then hand it the payload."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from adapters.slack.asks.authorize import ClickAuthority
from adapters.slack.clicks.transitions import (
    NO_LONGER_OPEN_APPROVAL,
    Decision,
    Modal,
    Refuse,
    Save,
    decide,
)
from adapters.slack.home.tab import HomeTab
from adapters.slack.model import ids
from adapters.slack.model.audience import outside_message, policy_groups, who_may
from adapters.slack.model.interactions import (
    Approve,
    ConfirmSkip,
    Interaction,
    OpenText,
    Origin,
    ReadPlan,
    Submit,
    TextAnswer,
    parse_block_actions,
    parse_view_submission,
)
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.modals import render_plan_modal
from adapters.slack.render.layout import plan_review_of
from adapters.slack.render.messages import NO_LONGER_OPEN, NOT_CHECKED, not_recorded, not_yours
from adapters.slack.stores import settle
from bot.questions import UserQuestionError

_log = logging.getLogger("adapters.slack")


class InteractionHandler(ClickAuthority):
    """Applies Slack interactions (a tool approval's too) to pending records; the listeners'
    only counterpart."""

    async def handle_action(self, body: Mapping[str, Any]) -> None:
        """Handle a ``block_actions`` payload (already acked)."""
        interaction = parse_block_actions(body)
        if interaction is not None:
            view = body.get("view")
            home = isinstance(view, Mapping) and view.get("type") == "home"
            await self._recorded(interaction, self._handle_action(interaction, home=home))

    async def _recorded(self, interaction: Interaction, work: Awaitable[None]) -> None:
        """Run ``work``; a store that cannot take the click tells the person, not Slack (a 500)."""
        try:
            await work
        except UserQuestionError as exc:
            # The store's words (its address, its path) go to the log only, not to the clicker.
            what = "approval click" if isinstance(interaction, Approve) else "click"
            _log.warning(
                f"{what} not recorded",
                extra={
                    "request_id": interaction.request_id,
                    "error": exc.message,
                    "code": exc.code,
                },
            )
            self._sync.note(interaction.origin, None, not_recorded())

    async def _handle_action(self, interaction: Interaction, *, home: bool = False) -> None:
        record = await self._store.get(interaction.request_id)
        if record is None:
            if isinstance(interaction, Approve):
                self._sync.note(interaction.origin, None, NO_LONGER_OPEN_APPROVAL)
            else:
                self._sync.stale(interaction.origin)
            return
        reading = isinstance(interaction, ReadPlan)  # whoever sees the message may read it
        if reading and plan_review_of(record.questions) is None:
            return  # not a plan: a click no message of ours carries
        user = interaction.origin.user
        # A click in the whole-plan modal is the message's only for whom the read let in.
        modal = interaction.origin.view_id is not None and user not in record.plan_readers
        outside = home or modal or outside_message(record, interaction.origin)
        who = self._outside_cached(record) if outside else who_may(record)
        allowed = None if who is None else self._also_cached(user, record, who)
        member = self._gate.groups_cached(user, policy_groups(record))
        if not (reading or allowed is None or member is None):
            # Decided on the record just read (a stale one loses the compare-and-set).
            await self._apply(interaction, record, allowed, member, fresh=True)
            return
        # A Web API call is needed: off the ack path.
        view = render_plan_modal(record) if reading else _modal_first(record, interaction)
        opened = False
        if view is not None and (not outside or allowed):  # else shown once checked
            # The trigger expires 3 s after the click: open the modal now (nothing private;
            # its submission is authorized again), reading the membership meanwhile.
            self._sync.open_modal(interaction.origin, record, view)
            opened = True
        later = self._authorize_later(interaction, record, outside, view, opened)
        self._sync.spawn(self._recorded(interaction, later), "authorize click")

    async def handle_view(self, body: Mapping[str, Any]) -> dict[str, str] | None:
        """Handle a ``view_submission``; returns input errors to show in the modal, if any."""
        interaction = parse_view_submission(body)
        if interaction is None:
            return None
        try:
            return await self._handle_view(interaction)
        except UserQuestionError as exc:
            _log.warning("submission not recorded", extra={"error": exc.message, "code": exc.code})
            if isinstance(interaction, TextAnswer):
                return {interaction.input_block_id: not_recorded(what="answer")}
            self._sync.note(interaction.origin, None, not_recorded(what="choice"))
            return None

    async def _handle_view(self, interaction: TextAnswer | ConfirmSkip) -> dict[str, str] | None:
        record = await self._store.get(interaction.request_id)

        def refuse(plain: str, note: str | None = None) -> dict[str, str] | None:
            if isinstance(interaction, TextAnswer):
                return {interaction.input_block_id: plain}
            self._sync.note(interaction.origin, record, note or plain)
            return None

        if record is None:
            return refuse(NO_LONGER_OPEN)
        checked = await self._authorize_within(interaction.origin.user, record)
        if checked is None:
            return refuse(NOT_CHECKED)  # nothing applied: the person is asked to try again
        allowed, member = checked
        if not allowed:
            return refuse(not_yours(record, plain=True), not_yours(record))
        decision = await self._decide_and_write(interaction, member)
        if isinstance(decision, Refuse):
            readable = decision.text.replace("<@", "@").replace(">", "")  # a modal: no mentions
            return refuse(decision.plain or readable, decision.text)
        self._reshow(interaction.origin, record.id)
        return None

    async def _authorize_later(
        self,
        interaction: Interaction,
        record: PendingRecord,
        outside: bool,
        view: dict[str, Any] | None,
        opened: bool,
    ) -> None:
        """Authorize, then apply the click; or, for a click opening ``view`` (``opened``
        already, or now if allowed): learn the message's ts, keep that they read the plan."""
        allowed, member = await self._authorize(interaction.origin.user, record, outside)
        if view is None:
            await self._apply(interaction, record, allowed, member)
            return
        if not opened:
            if not allowed:
                self._sync.note(interaction.origin, record, not_yours(record))
                return
            self._sync.open_modal(interaction.origin, record, view)
        if allowed:
            await self._adopt_message(record, interaction.origin)
            if isinstance(interaction, ReadPlan):
                await self._decide_and_write(interaction, member)

    async def _apply(
        self,
        interaction: Interaction,
        record: PendingRecord,
        allowed: bool,
        member: frozenset[str],
        *,
        fresh: bool = False,
    ) -> None:
        """``fresh``: ``record`` was just read here, so the decision starts from it."""
        if not allowed:
            if record.approval is not None:  # who tried to allow a command is an operator's concern
                _log.info(
                    "approval click refused: not an approver",
                    extra={"request_id": record.id, "user": interaction.origin.user},
                )
            self._sync.note(interaction.origin, record, not_yours(record))
            self._reshow(interaction.origin, record.id, not_yours(record))
            return
        # A bot that posted and died before storing the message's ts (or a request adopted
        # from it) learns the ts from the click, so the outcome can be shown on the message.
        adopted = await self._adopt_message(record, interaction.origin)
        known = (adopted or record) if fresh else None
        decision = await self._decide_and_write(interaction, member, known)
        if isinstance(decision, Modal):
            self._sync.open_modal(interaction.origin, record, decision.view)
        elif isinstance(decision, Refuse):
            self._sync.note(interaction.origin, record, decision.text)
            self._sync.refresh(record.id)
            self._reshow(interaction.origin, record.id, decision.text)
        elif decision is not None:
            self._reshow(interaction.origin, record.id)

    def _reshow(self, origin: Origin, request_id: str, note: str | None = None) -> None:
        """After a click in (or over) the whole-plan modal: show it again, ``note`` at its end."""
        if origin.view_id is not None:
            self._sync.spawn(self._reshown(origin.view_id, request_id, note), "views.update")

    async def _reshown(self, view_id: str, request_id: str, note: str | None) -> None:
        record = await self._store.get(request_id)
        if record is not None and record.questions:
            self._sync.update_modal(view_id, render_plan_modal(record, note))

    async def _decide_and_write(
        self,
        interaction: Interaction,
        member: frozenset[str] = frozenset(),
        known: PendingRecord | None = None,
    ) -> Decision:
        """Decide on the freshest record and write it; the first writer wins, losers re-decide."""
        decision: Decision = None

        def change(current: PendingRecord) -> PendingRecord | None:
            nonlocal decision
            decision = decide(current, interaction, time.time(), groups=member)
            return decision.record if isinstance(decision, Save) else None

        origin = interaction.origin
        seen, written = await settle(
            self._store,
            interaction.request_id,
            change,
            by=origin.user,
            by_name=origin.name,
            known=known,
        )
        if seen is None:
            return Refuse(
                NO_LONGER_OPEN_APPROVAL if isinstance(interaction, Approve) else NO_LONGER_OPEN
            )
        if written is not None and isinstance(decision, Save) and decision.rerender:
            self._sync.refresh(interaction.request_id)
        return decision

    async def _adopt_message(self, record: PendingRecord, origin: Origin) -> PendingRecord | None:
        """Learn the message's ts from a click when the ask never saw Slack's reply."""
        if record.message_ts is not None or not origin.channel or not origin.message_ts:
            return None
        channel, ts = origin.channel, origin.message_ts
        _, written = await settle(
            self._store,
            record.id,
            lambda r: (
                r.next(message_channel=channel, message_ts=ts) if r.message_ts is None else None
            ),
        )
        return written


def _modal_first(record: PendingRecord, interaction: Interaction) -> dict[str, Any] | None:
    """The modal this click opens whoever clicks (Answer…, Other…, an empty Submit's)."""
    if not isinstance(interaction, OpenText | Submit):
        return None
    decision = decide(record, interaction, time.time())
    return decision.view if isinstance(decision, Modal) else None


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
