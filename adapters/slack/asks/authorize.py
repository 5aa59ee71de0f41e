"""Who may act on a question: allowed users and groups (``Gatekeeper``), who sees each
conversation (``Conversations``), and each click's decision (``ClickAuthority``)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Sequence
from typing import Final

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.synchroniser import SLACK_FAILURES, MessageSynchroniser, describe
from adapters.slack.model.audience import ANYONE, Audience, also_allowed, policy_groups, who_may
from adapters.slack.model.record import PendingRecord
from adapters.slack.model.tally import Membership
from adapters.slack.stores import PendingStore

LASTING_ERRORS: Final = frozenset(
    {"no_such_subteam", "subteam_not_found", "missing_scope", "plan_upgrade_required",
     "not_allowed_token_type", "invalid_auth", "not_authed", "account_inactive"}
)  # fmt: skip
"""Slack's errors that asking again a few seconds later would not change."""
RETRY = 5.0
"""Seconds before a failed lookup is tried again (Slack allows about 20 a minute)."""


class Gatekeeper:
    """Decides whether a user may answer a request with given allow-lists."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl: float = 60.0,
        retry: float = RETRY,
        logger: logging.Logger,
    ) -> None:
        self._client = client
        self._ttl = ttl
        self._retry = retry
        self._logger = logger
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._unreadable: dict[str, str] = {}  # Slack's lasting error per group not listed
        self._reading: dict[str, asyncio.Lock] = {}

    def decide_cached(
        self,
        user: str,
        users: Sequence[str] | None,
        groups: Sequence[str] | None,
        *,
        stale: bool = False,
    ) -> bool | None:
        """The decision if it needs no Web API call, else ``None`` (``stale``: by the members
        last read, however old, for a caller that cannot wait for Slack)."""
        if not users and not groups:
            return True
        if users and user in users:
            return True
        known = [self._cached(group, stale) for group in groups or ()]
        if any(members is not None and user in members for members in known):
            return True
        return None if None in known else False

    async def allowed(
        self, user: str, users: Sequence[str] | None, groups: Sequence[str] | None
    ) -> bool:
        """Whether ``user`` may answer, reading group membership if the cache is cold."""
        cached = self.decide_cached(user, users, groups)
        if cached is not None:
            return cached
        for group in groups or ():
            if user in await self._group_members(group):
                return True
        return False

    def groups_cached(
        self, user: str, groups: Iterable[str], *, stale: bool = False
    ) -> Membership | None:
        """The groups among ``groups`` that ``user`` is in, if no Web API call is needed
        (``stale``: by the members last read, however old); ``None`` if one has no such read."""
        asked = list(groups)
        known = [self._cached(group, stale) for group in asked]
        if None in known:
            return None
        found = [g for g, m in zip(asked, known, strict=True) if m and user in m]
        return self._membership(found, asked)

    async def groups_of(self, user: str, groups: Iterable[str]) -> Membership:
        """The groups among ``groups`` that ``user`` is in, reading cold ones from Slack."""
        asked = list(groups)
        found = [g for g in asked if user in await self._group_members(g)]
        return self._membership(found, asked)

    def _membership(self, found: Iterable[str], asked: Iterable[str]) -> Membership:
        """``found``, with Slack's lasting word on each group of ``asked`` it would not list."""
        unreadable = {g: self._unreadable[g] for g in asked if g in self._unreadable}
        return Membership(found, unreadable)

    async def _group_members(self, group: str) -> frozenset[str]:
        cached = self._cached(group)
        if cached is not None:
            return cached
        async with self._reading.setdefault(group, asyncio.Lock()):
            # Whoever read the group while this call waited its turn has filled the cache.
            cached = self._cached(group)
            return cached if cached is not None else await self._read(group)

    def _cached(self, group: str, stale: bool = False) -> frozenset[str] | None:
        cached = self._members.get(group)
        fresh = cached is not None and (stale or cached[0] >= time.monotonic())
        return cached[1] if cached is not None and fresh else None

    async def _read(self, group: str) -> frozenset[str]:
        cached = self._members.get(group)
        now = time.monotonic()
        try:
            response = await self._client.usergroups_users_list(usergroup=group)
            raw = response.get("users")
            listed = raw if isinstance(raw, list) else []
            members = frozenset(u for u in listed if isinstance(u, str))
        except SLACK_FAILURES as exc:
            # A passing failure keeps the members last read (none if never) until the retry;
            # Slack's word that the group or the scope is missing is kept the ttl.
            lasting = isinstance(exc, SlackApiError) and describe(exc) in LASTING_ERRORS
            members = frozenset() if cached is None or lasting else cached[1]
            wait = self._ttl if lasting else self._retry
            self._logger.warning(
                "cannot read user group members; %s for %g s",
                "keeping the last members read" if members else "treating the group as empty",
                wait,
                extra={"usergroup": group, "error": describe(exc)},
            )
            self._members[group] = (now + wait, members)
            if lasting:
                self._unreadable[group] = describe(exc)
            return members
        self._members[group] = (now + self._ttl, members)
        self._unreadable.pop(group, None)
        return members


CONVERSATION_TTL: Final = 60.0
"""Seconds a channel's kind (public or private) is kept (a DM's never changes: for good)."""


class Conversations:
    """Who sees each conversation: ``ANYONE`` (a public channel), a DM's user, or ``None``
    (a private channel or group DM, or Slack would not say: on nobody's Home tab)."""

    def __init__(self, client: AsyncWebClient, logger: logging.Logger) -> None:
        self._client = client
        self._logger = logger
        self._seen: dict[str, tuple[float, str | None]] = {}
        self._reading: dict[str, asyncio.Lock] = {}

    def cached(self, channel: str) -> tuple[bool, str | None]:
        """Whether who sees ``channel`` is known without a Web API call, and who."""
        kept = self._seen.get(channel)
        if kept is None or kept[0] < time.monotonic():
            return False, None
        return True, kept[1]

    async def seen_by(self, channel: str) -> str | None:
        """Who sees ``channel``, reading it from Slack when the cache is cold."""
        known, seen = self.cached(channel)
        if known:
            return seen
        async with self._reading.setdefault(channel, asyncio.Lock()):
            known, seen = self.cached(channel)
            return seen if known else await self._read(channel)

    async def resolve(self, channels: Iterable[str]) -> dict[str, str | None]:
        """Who sees each of ``channels`` (``""``, a conversation not known: nobody)."""
        return {channel: await self.seen_by(channel) for channel in sorted(channels) if channel}

    async def _read(self, channel: str) -> str | None:
        now = time.monotonic()
        try:
            response = await self._client.conversations_info(channel=channel)
        except SLACK_FAILURES as exc:
            # Nobody's list meanwhile: listing a private question for everyone is the harm.
            self._logger.warning(
                "cannot tell who sees a conversation; its questions are on no Home tab for %g s",
                RETRY,
                extra={"channel": channel, "error": describe(exc)},
            )
            self._seen[channel] = (now + RETRY, None)
            return None
        info = response.get("channel")
        info = info if isinstance(info, dict) else {}
        seen: str | None = None
        until = now + CONVERSATION_TTL
        if info.get("is_im") is True:
            user = info.get("user")
            seen = user if isinstance(user, str) and user else None
            until = math.inf
        elif info.get("is_mpim") is True:
            until = math.inf
        elif info.get("is_private") is False:
            seen = ANYONE
        self._seen[channel] = (until, seen)
        return seen


_log = logging.getLogger("adapters.slack")

SUBMISSION_LOOKUP: Final = 1.5
"""Seconds a modal submission waits for Slack's group lookup (the ack is due within 3 s; a
longer lookup goes on in the background, filling the cache for the person's next try)."""


class ClickAuthority:
    """Authorizes clicks and submissions against a record's audience and allow-lists."""

    def __init__(
        self,
        store: PendingStore,
        gate: Gatekeeper,
        sync: MessageSynchroniser,
        conversations: Conversations,
    ) -> None:
        self._store = store
        self._gate = gate
        self._sync = sync
        self._conversations = conversations

    async def _authorize(
        self, user: str, record: PendingRecord, outside: bool = False
    ) -> tuple[bool, frozenset[str]]:
        """Whether ``user`` may act on ``record`` (``outside`` its message: from a Home tab),
        and their team-review policy groups."""
        who = await self._outside(record) if outside else who_may(record)
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
        users, groups = who_may(record)
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
        known = self._gate.groups_cached(user, policy, stale=True)
        if known is None or not self._also_cached(user, record, (users, groups), stale=True):
            _log.warning(
                "submission not checked: Slack's group lookup is slow", extra={"user": user}
            )
            return None
        _log.info(
            "Slack's group lookup is slow: deciding on the members last read", extra={"user": user}
        )
        return True, known

    def _also_cached(
        self,
        user: str,
        record: PendingRecord,
        who: tuple[list[str] | None, list[str] | None],
        *,
        stale: bool = False,
    ) -> bool | None:
        """``who``'s cached decision, narrowed by the operator's allow-list (``also_allowed``)."""
        allowed = self._gate.decide_cached(user, *who, stale=stale)
        also = also_allowed(record)
        if not allowed or also is None:
            return allowed
        return self._gate.decide_cached(user, *also, stale=stale)

    def _outside_cached(
        self, record: PendingRecord
    ) -> tuple[list[str] | None, list[str] | None] | None:
        """``_outside``, if no Web API call is needed to tell; else ``None``."""
        audience = Audience.of(record, closed=True)
        if audience is None or audience.channel is None:
            return _listed(audience, record)
        known, seen = self._conversations.cached(audience.channel)
        return _listed(audience.resolved(seen), record) if known else None

    async def _outside(self, record: PendingRecord) -> tuple[list[str] | None, list[str] | None]:
        """Who may act on ``record`` from outside its message: whom its Home tab entry is
        listed for (its message's own buttons need only ``who_may``)."""
        audience = Audience.of(record, closed=True)
        if audience is not None and audience.channel is not None:  # (cached, or read)
            audience = audience.resolved(await self._conversations.seen_by(audience.channel))
        return _listed(audience, record)


_NOBODY: Final[tuple[list[str] | None, list[str] | None]] = ([""], [])
"""An allow-list no Slack user is on (a question listed on nobody's Home tab)."""


def _listed(
    audience: Audience | None, record: PendingRecord
) -> tuple[list[str] | None, list[str] | None]:
    """Who may act on ``record`` from its Home tab entry: its ``audience`` once resolved
    (``None``: on nobody's list); a tool approval (no audience) keeps ``who_may``."""
    if audience is None:
        return who_may(record) if not record.questions else _NOBODY
    if audience.anyone:
        return None, None
    return list(audience.users), list(audience.usergroups)
