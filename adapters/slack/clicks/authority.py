"""``ClickAuthority``: who may act on a record, from its message or from outside it (a Home
tab), decided from cached memberships on the ack path when it can be."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from adapters.slack.asks.authorize import Gatekeeper
from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.home.tab import Conversations
from adapters.slack.model.audience import Audience, also_allowed, policy_groups, who_may
from adapters.slack.model.record import PendingRecord

__all__ = ["SUBMISSION_LOOKUP", "ClickAuthority", "who_may_act"]

_log = logging.getLogger("adapters.slack")

SUBMISSION_LOOKUP: Final = 1.5
"""Seconds a modal submission waits for Slack's group lookup. Slack wants the ack within
3 s, and with ``process_before_response`` nothing reaches it before the listener returns:
the store's read and write need the rest. A lookup that takes longer goes on in the
background (it fills the cache for the person's next try)."""


class ClickAuthority:
    """Authorizes clicks and submissions against a record's audience and allow-lists."""

    def __init__(
        self,
        gate: Gatekeeper,
        sync: MessageSynchroniser,
        conversations: Conversations | None = None,
    ) -> None:
        self._gate = gate
        self._sync = sync
        self._conversations = conversations
        """Who sees each conversation (``None``: no Home tab; outside clicks naming nobody
        are refused)."""

    async def _authorize(
        self, user: str, record: PendingRecord, outside: bool = False
    ) -> tuple[bool, frozenset[str]]:
        """Whether ``user`` may act on ``record``, and their team-review policy groups
        (reading cold group memberships from Slack); ``outside``: the click came from
        elsewhere than the question's message (a Home tab)."""
        who = await self._outside(record) if outside else who_may_act(record)
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
        when it cannot be told in time."""
        users, groups = who_may_act(record)
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
        # Unknown only for a conversation's members not cached yet: read them.
        audience, conversations = Audience.of(record, closed=True), self._conversations
        assert audience is not None and audience.channel and conversations is not None
        return _listed(audience.resolved(await conversations.seen_by(audience.channel)), record)


who_may_act = who_may  # a team review's reviewers, else who may answer (``audience.py``)

_NOBODY: Final[tuple[list[str] | None, list[str] | None]] = ([""], [])
"""An allow-list no Slack user is on (a question listed on nobody's Home tab)."""


def _listed(
    audience: Audience | None, record: PendingRecord
) -> tuple[list[str] | None, list[str] | None]:
    """Who may act on ``record`` from its Home tab entry: its ``audience`` once resolved
    (``None``: on nobody's list); a tool approval (no audience) keeps ``_who_may``."""
    if audience is None:
        return who_may_act(record) if not record.questions else _NOBODY
    if audience.anyone:
        return None, None
    return list(audience.users), list(audience.usergroups)
