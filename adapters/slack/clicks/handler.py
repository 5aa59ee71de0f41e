"""``InteractionHandler``: what a click or a modal submission does, on the ack path.

A click reads, in order: parse (interactions.py) → authorize (authorize.py) → decide
(transitions.py) → compare-and-set (stores/protocol.py). The winning write of a terminal state
wakes the waiting ``ask()`` through the store's watch; everything that talks to Slack
afterwards (the message update, a private note, a modal) goes to the synchroniser's
background tasks, so the listener acks in about a millisecond.

Two paths cannot leave the group lookup (``usergroups.users.list``, paced, sometimes slow)
to the background: a modal submission, whose answer *is* the ack, waits for it at most
``SUBMISSION_LOOKUP`` seconds; and a click that opens a modal opens it before the lookup,
since its trigger expires 3 s after the click (the submission is authorized again).
"""

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
from adapters.slack.model.audience import (
    Audience,
    also_allowed,
    outside_message,
    policy_groups,
    who_may,
)
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
    refused,
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
        """Who sees each conversation, as the Home tab reads it (``None``: no Home tab, so
        a click from outside a question's message that names nobody is refused)."""

    async def handle_action(self, body: Mapping[str, Any]) -> None:
        """Handle a ``block_actions`` payload (already acked).

        A store that cannot answer in time does not fail the request Slack sent (which
        would show the person an error icon and log a traceback): the person is told
        privately that the click was not recorded, and may click again.
        """
        interaction = parse_block_actions(body)
        if interaction is None:
            return  # not ours
        view = body.get("view")
        home = isinstance(view, Mapping) and view.get("type") == "home"
        try:
            await self._handle_action(interaction, home=home)
        except UserQuestionError as exc:
            # The store's words (its Redis address, its SQLite path) go to the log only:
            # whoever clicked, allowed or not, reads a fixed sentence.
            _log.warning("click not recorded", extra={"error": exc.message, "code": exc.code})
            self._sync.note(interaction.origin, None, not_recorded())

    async def _handle_action(self, interaction: Interaction, *, home: bool = False) -> None:
        record = await self._store.get(interaction.request_id)
        if record is None:
            self._sync.stale(interaction.origin)
            return
        outside = home or outside_message(record, interaction.origin)
        user = interaction.origin.user
        who = self._outside_cached(record) if outside else _who_may(record)
        allowed = None if who is None else self._also_cached(user, record, who)
        member = self._gate.groups_cached(user, policy_groups(record))
        if allowed is None or member is None:  # needs a Web API call: off the ack path
            view = _modal_first(record, interaction)
            if view is None:
                self._sync.spawn(
                    self._authorize_then_apply(interaction, record, outside), "authorize click"
                )
                return
            # The trigger expires 3 s after the click, maybe before the lookup ends: open the
            # modal now (it shows nothing private; its submission is authorized again) and
            # read the membership meanwhile, so the submission finds it cached.
            self._sync.open_modal(interaction.origin, record, view)
            self._sync.spawn(
                self._authorize_then_adopt(interaction, record, outside), "authorize click"
            )
            return
        # Decided on the record just read (a stale one loses the compare-and-set).
        await self._apply(interaction, record, allowed, member, fresh=True)

    async def handle_view(self, body: Mapping[str, Any]) -> dict[str, str] | None:
        """Handle a ``view_submission``; returns input errors to show in the modal, if any.

        A modal without an input (the empty-Submit confirmation) cannot show an error: it
        closes and the person gets a private note instead.
        """
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
            return refuse(_refusal(record, plain=True), _refusal(record))
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
        also = also_allowed(record)
        if allowed and also is not None:  # reviewers narrow the operator's allow-list
            allowed = await self._gate.allowed(user, *also)
        member = await self._gate.groups_of(user, policy_groups(record)) if allowed else None
        # an empty read keeps what Slack said of the groups it would not list
        return allowed, member if member is not None else frozenset()

    async def _authorize_within(
        self, user: str, record: PendingRecord
    ) -> tuple[bool, frozenset[str]] | None:
        """``_authorize`` for a submission, within ``SUBMISSION_LOOKUP`` seconds; ``None``
        when it cannot be told in time.

        A lookup that takes longer goes on in the background. Meanwhile the members last
        read decide for someone they list (as the gatekeeper does after a failed read); for
        anyone else the answer is not applied, and the person is asked to send it again.
        """
        users, groups = _who_may(record)
        policy = policy_groups(record)
        allowed = self._also_cached(user, record, (users, groups))
        member = self._gate.groups_cached(user, policy)
        if allowed is not None and member is not None:
            return allowed, member
        lookup = self._sync.spawn(self._authorize(user, record), "authorize submission")
        done, _ = await asyncio.wait({lookup}, timeout=SUBMISSION_LOOKUP)
        if done:
            result: tuple[bool, frozenset[str]] = lookup.result()
            return result
        known = self._gate.groups_known(user, policy)
        also = also_allowed(record) or (None, None)
        if known is None or not (
            self._gate.decide_known(user, users, groups) and self._gate.decide_known(user, *also)
        ):
            _log.warning(
                "submission not checked: Slack's group lookup is slow", extra={"user": user}
            )
            return None
        _log.info(
            "Slack's group lookup is slow: deciding on the members last read", extra={"user": user}
        )
        return True, known

    def _also_cached(
        self, user: str, record: PendingRecord, who: tuple[list[str] | None, list[str] | None]
    ) -> bool | None:
        """``who``'s cached decision, narrowed by the operator's allow-list (``also_allowed``)."""
        allowed = self._gate.decide_cached(user, *who)
        also = also_allowed(record)
        return self._gate.decide_cached(user, *also) if allowed and also is not None else allowed

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
        # Not known without a read: a question naming nobody, its conversation not cached.
        audience = Audience.of(record, closed=True)
        conversations = self._conversations
        if audience is None or audience.channel is None or conversations is None:
            return _NOBODY  # (not reached: _outside_cached knows these)
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
        """Decide on the freshest record and write it; the first writer wins, losers re-decide.

        ``member``: the team-review policy's user groups the person is in; ``known``: the
        record as just read (decided on first, see ``stores.mutate``).
        """
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


def _refusal(record: PendingRecord, *, plain: bool = False) -> str:
    """The note for someone who may not act on ``record``, naming who can (``plain``: for a
    modal's plain-text error, which cannot show mentions)."""
    reviewers = record.review.reviewers if record.review is not None else None
    note = NOT_A_REVIEWER if reviewers is not None else NOT_ALLOWED
    return note if plain else refused(note, *_who_may(record))


def _plain(text: str) -> str:
    """Mrkdwn mentions made readable for a plain-text modal error."""
    return text.replace("<@", "@").replace(">", "")
