"""``InteractionHandler``: what a click or a modal submission does, on the ack path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from adapters.slack.asks.authorize import Gatekeeper
from adapters.slack.asks.failures import settle
from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.clicks.transitions import (
    Decision,
    Finish,
    Ignore,
    Invalid,
    Modal,
    Refuse,
    Save,
    decide,
)
from adapters.slack.home.tab import Conversations
from adapters.slack.model.audience import Audience, who_may
from adapters.slack.model.interactions import (
    ConfirmSkip,
    Interaction,
    OpenText,
    Origin,
    Submit,
    TextAnswer,
    parse_block_actions,
    parse_view_submission,
)
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.messages import (
    NO_LONGER_OPEN,
    NOT_A_REVIEWER,
    NOT_ALLOWED,
    NOT_CHECKED,
    not_recorded,
)
from adapters.slack.stores import PendingStore
from bot.questions import UserQuestionError

__all__ = ["SUBMISSION_LOOKUP", "InteractionHandler"]

_log = logging.getLogger("adapters.slack")

SUBMISSION_LOOKUP: Final = 1.5
"""Seconds a modal submission waits for Slack's group lookup. Slack wants the ack within
3 s, and with ``process_before_response`` nothing reaches it before the listener returns:
the store's read and write need the rest. A lookup that takes longer goes on in the
background (it fills the cache for the person's next try)."""


class InteractionHandler:
    """Applies Slack interactions to pending records; the listeners' only counterpart."""

    def __init__(
        self,
        store: PendingStore,
        gate: Gatekeeper,
        sync: MessageSynchroniser,
        conversations: Conversations | None = None,
    ) -> None:
        self._store = store
        self._gate = gate
        self._sync = sync
        self._conversations = conversations
        """Who sees each conversation (``None``: no Home tab; outside clicks naming nobody
        are refused)."""

    async def handle_action(self, body: Mapping[str, Any]) -> None:
        """Handle a ``block_actions`` payload (already acked)."""
        interaction = parse_block_actions(body)
        if interaction is None:
            return  # not ours
        view = body.get("view")
        home = isinstance(view, Mapping) and view.get("type") == "home"
        try:
            await self._handle_action(interaction, home=home)
        except UserQuestionError as exc:
            # The store's words (its address, its path) go to the log only, not to the clicker.
            _log.warning("click not recorded", extra={"error": exc.message, "code": exc.code})
            self._sync.note(interaction.origin, None, not_recorded())

    async def _handle_action(self, interaction: Interaction, *, home: bool = False) -> None:
        record = await self._store.get(interaction.request_id)
        if record is None:
            self._sync.stale(interaction.origin)
            return
        outside = home or _outside_message(record, interaction.origin)
        user = interaction.origin.user
        who = self._outside_cached(record) if outside else _who_may(record)
        allowed = None if who is None else self._gate.decide_cached(user, *who)
        member = self._gate.groups_cached(user, _policy_groups(record))
        if allowed is None or member is None:  # needs a Web API call: off the ack path
            view = _modal_first(record, interaction)
            if view is None:
                self._sync.spawn(
                    self._authorize_then_apply(interaction, record, outside), "authorize click"
                )
                return
            # The trigger expires 3 s after the click: open the modal now (nothing private;
            # its submission is authorized again), reading the membership meanwhile.
            self._sync.open_modal(interaction.origin, record, view)
            self._sync.spawn(
                self._authorize_then_adopt(interaction, record, outside), "authorize click"
            )
            return
        # Decided on the record just read (a stale one loses the compare-and-set).
        await self._apply(interaction, record, allowed, member, fresh=True)

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
            return refuse(_refusal(record))
        decision = await self._decide_and_write(interaction, member)
        if isinstance(decision, Refuse):
            return refuse(decision.plain or _plain(decision.text), decision.text)
        if isinstance(decision, Invalid):
            return decision.errors
        if isinstance(decision, Save) and decision.note:
            self._sync.note(interaction.origin, record, decision.note)
        return None

    async def _authorize(
        self, user: str, record: PendingRecord, outside: bool = False
    ) -> tuple[bool, frozenset[str]]:
        """Whether ``user`` may act on ``record``, and their team-review policy groups
        (reading cold group memberships from Slack); ``outside``: the click came from
        elsewhere than the question's message (a Home tab)."""
        who = await self._outside(record) if outside else _who_may(record)
        allowed = await self._gate.allowed(user, *who)
        member = await self._gate.groups_of(user, _policy_groups(record)) if allowed else None
        # an empty read keeps what Slack said of the groups it would not list
        return allowed, member if member is not None else frozenset()

    async def _authorize_within(
        self, user: str, record: PendingRecord
    ) -> tuple[bool, frozenset[str]] | None:
        """``_authorize`` for a submission, within ``SUBMISSION_LOOKUP`` seconds; ``None``
        when it cannot be told in time."""
        users, groups = _who_may(record)
        policy = _policy_groups(record)
        allowed = self._gate.decide_cached(user, users, groups)
        member = self._gate.groups_cached(user, policy)
        if allowed is not None and member is not None:
            return allowed, member
        lookup = self._sync.spawn(self._authorize(user, record), "authorize submission")
        done, _ = await asyncio.wait({lookup}, timeout=SUBMISSION_LOOKUP)
        if done:
            result: tuple[bool, frozenset[str]] = lookup.result()
            return result
        known = self._gate.groups_known(user, policy)
        if known is None or not self._gate.decide_known(user, users, groups):
            _log.warning(
                "submission not checked: Slack's group lookup is slow", extra={"user": user}
            )
            return None
        _log.info(
            "Slack's group lookup is slow: deciding on the members last read", extra={"user": user}
        )
        return True, known

    def _outside_cached(
        self, record: PendingRecord
    ) -> tuple[list[str] | None, list[str] | None] | None:
        """Who may act on ``record`` from outside its message (``_outside``), if no Web API
        call is needed to tell; else ``None``."""
        audience = Audience.of(record, closed=True)
        if audience is None or audience.channel is None:
            return _listed(audience, record)
        conversations = self._conversations
        if conversations is None:
            return _NOBODY
        known, seen = conversations.cached(audience.channel)
        return _listed(audience.resolved(seen), record) if known else None

    async def _outside(self, record: PendingRecord) -> tuple[list[str] | None, list[str] | None]:
        """Who may act on ``record`` from outside its message (a Home tab's buttons): whom
        its Home tab entry is listed for (``audience.py``). Its message's own buttons need
        no more than ``_who_may``: only people who see the message can click them."""
        known = self._outside_cached(record)
        if known is not None:
            return known
        # Unknown only for a conversation's members not cached yet: read them.
        audience, conversations = Audience.of(record, closed=True), self._conversations
        assert audience is not None and audience.channel and conversations is not None
        return _listed(audience.resolved(await conversations.seen_by(audience.channel)), record)

    async def _authorize_then_apply(
        self, interaction: Interaction, record: PendingRecord, outside: bool = False
    ) -> None:
        allowed, member = await self._authorize(interaction.origin.user, record, outside)
        await self._apply(interaction, record, allowed, member)

    async def _authorize_then_adopt(
        self, interaction: Interaction, record: PendingRecord, outside: bool = False
    ) -> None:
        """After a modal opened before its lookup: read the membership (the submission then
        finds it cached), and learn the message's ts from an allowed clicker's click."""
        allowed, _ = await self._authorize(interaction.origin.user, record, outside)
        if allowed:
            await self._adopt_message(record, interaction.origin)

    async def _apply(
        self,
        interaction: Interaction,
        record: PendingRecord,
        allowed: bool,
        member: frozenset[str],
        *,
        fresh: bool = False,
    ) -> None:
        """``fresh``: ``record`` was read on this click's way here, with nothing awaited
        since but the store: the decision starts from it instead of reading it again."""
        if not allowed:
            self._sync.note(interaction.origin, record, _refusal(record))
            return
        # A bot that posted and died before storing the message's ts (or a request adopted
        # from it) learns the ts from the click, so the outcome can be shown on the message.
        adopted = await self._adopt_message(record, interaction.origin)
        known = (adopted or record) if fresh else None
        decision = await self._decide_and_write(interaction, member, known)
        if isinstance(decision, Refuse):
            self._sync.note(interaction.origin, record, decision.text)
            self._sync.refresh(record.id)
        elif isinstance(decision, Modal):
            self._sync.open_modal(interaction.origin, record, decision.view)

    async def _decide_and_write(
        self,
        interaction: Interaction,
        member: frozenset[str] = frozenset(),
        known: PendingRecord | None = None,
    ) -> Decision:
        """Decide on the freshest record and write it; the first writer wins, losers re-decide."""
        decision: Decision = Ignore()

        def change(current: PendingRecord) -> PendingRecord | None:
            nonlocal decision
            decision = decide(current, interaction, time.time(), groups=member)
            if isinstance(decision, Finish | Save):
                return decision.record
            return None

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
            return Refuse(NO_LONGER_OPEN)
        if written is not None and (
            isinstance(decision, Finish) or (isinstance(decision, Save) and decision.rerender)
        ):
            self._sync.refresh(interaction.request_id)
        return decision

    async def _adopt_message(self, record: PendingRecord, origin: Origin) -> PendingRecord | None:
        """Learn the message's ts from a click when the ask never saw Slack's reply; the
        record written, if any."""
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
    """The modal this click opens whoever clicks ("Answer…", "Other…", an empty Submit's
    confirmation), decided on the record just read with nothing written; else ``None``."""
    if not isinstance(interaction, OpenText | Submit):
        return None
    decision = decide(record, interaction, time.time())
    return decision.view if isinstance(decision, Modal) else None


_who_may = who_may  # a team review's reviewers, else who may answer (``audience.py``)

_NOBODY: Final[tuple[list[str] | None, list[str] | None]] = ([""], [])
"""An allow-list no Slack user is on (a question listed on nobody's Home tab)."""


def _listed(
    audience: Audience | None, record: PendingRecord
) -> tuple[list[str] | None, list[str] | None]:
    """Who may act on ``record`` from its Home tab entry: its ``audience`` once resolved
    (``None``: on nobody's list); a tool approval (no audience) keeps ``_who_may``."""
    if audience is None:
        return _who_may(record) if not record.questions else _NOBODY
    if audience.anyone:
        return None, None
    return list(audience.users), list(audience.usergroups)


def _outside_message(record: PendingRecord, origin: Origin) -> bool:
    """Whether a click names a message other than the question's (a button copied onto a
    Home tab, or a forged payload): only the question's own message is seen by exactly the
    people who may click it. A click with no message (in a modal) is the message's."""
    if origin.channel is None:
        return False
    if origin.channel != (record.message_channel or record.channel):
        # a question asked by user id is posted in that user's DM (``D…``)
        return not (record.message_channel is None and record.channel.startswith(("U", "W")))
    return record.message_ts is not None and origin.message_ts != record.message_ts


def _policy_groups(record: PendingRecord) -> frozenset[str]:
    """The user groups whose membership a team review's tally needs."""
    if record.review is None:
        return frozenset()
    return frozenset(g for required in record.review.required for g in required.usergroups)


def _refusal(record: PendingRecord) -> str:
    """The note for someone who may not act on ``record``."""
    reviewers = record.review.reviewers if record.review is not None else None
    return NOT_A_REVIEWER if reviewers is not None else NOT_ALLOWED


def _plain(text: str) -> str:
    """Mrkdwn mentions made readable for a plain-text modal error."""
    return text.replace("<@", "@").replace(">", "")
