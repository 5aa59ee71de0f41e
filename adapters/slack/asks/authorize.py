"""Who may answer: allowed user ids, and members of allowed user groups."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Final

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.failures import SLACK_FAILURES, describe
from adapters.slack.model.tally import Membership

__all__ = ["RETRY", "Gatekeeper"]

LASTING_ERRORS: Final = frozenset(
    {"no_such_subteam", "subteam_not_found", "missing_scope", "plan_upgrade_required",
     "not_allowed_token_type", "invalid_auth", "not_authed", "account_inactive"}
)  # fmt: skip
"""Slack's errors that asking again a few seconds later would not change."""
RETRY = 5.0
"""Seconds before a group whose lookup failed is asked again (Slack allows this method
about 20 calls a minute: every click during an outage must not call it)."""


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
        self._unreadable: dict[str, str] = {}
        """Slack's lasting error for each group it would not list, until a read succeeds."""
        self._reading: dict[str, asyncio.Lock] = {}

    def decide_cached(
        self, user: str, users: Sequence[str] | None, groups: Sequence[str] | None
    ) -> bool | None:
        """The decision if it needs no Web API call, else ``None``."""
        if not users and not groups:
            return True
        if users and user in users:
            return True
        now = time.monotonic()
        unknown = False
        for group in groups or ():
            cached = self._members.get(group)
            if cached is None or cached[0] < now:
                unknown = True
            elif user in cached[1]:
                return True
        return None if unknown else False

    def decide_known(
        self, user: str, users: Sequence[str] | None, groups: Sequence[str] | None
    ) -> bool:
        """Whether ``user`` may answer by the members last read, however old: for a caller
        that cannot wait for Slack (a group never read counts as empty)."""
        if self.decide_cached(user, users, groups):
            return True
        return any(user in self._members.get(g, (0.0, frozenset()))[1] for g in groups or ())

    def groups_known(self, user: str, groups: Iterable[str]) -> Membership | None:
        """The groups among ``groups`` that ``user`` is in by the members last read, however
        old; ``None`` if one was never read."""
        return self._in_groups(user, groups, stale=True)

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

    def groups_cached(self, user: str, groups: Iterable[str]) -> Membership | None:
        """The groups among ``groups`` that ``user`` is in, if no Web API call is needed."""
        return self._in_groups(user, groups, stale=False)

    def _in_groups(self, user: str, groups: Iterable[str], *, stale: bool) -> Membership | None:
        """The groups ``user`` is in by the members read (``stale``: however long ago, else
        only while fresh); ``None`` if one of ``groups`` has no such read."""
        now = time.monotonic()
        asked = list(groups)
        found: set[str] = set()
        for group in asked:
            cached = self._members.get(group)
            if cached is None or (not stale and cached[0] < now):
                return None
            if user in cached[1]:
                found.add(group)
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
        cached = self._fresh(group)
        if cached is not None:
            return cached
        async with self._reading.setdefault(group, asyncio.Lock()):
            # Whoever read the group while this call waited its turn has filled the cache.
            cached = self._fresh(group)
            return cached if cached is not None else await self._read(group)

    def _fresh(self, group: str) -> frozenset[str] | None:
        cached = self._members.get(group)
        return cached[1] if cached is not None and cached[0] >= time.monotonic() else None

    async def _read(self, group: str) -> frozenset[str]:
        cached = self._members.get(group)
        now = time.monotonic()
        try:
            response = await self._client.usergroups_users_list(usergroup=group)
            raw = response.get("users")
            members = (
                frozenset(u for u in raw if isinstance(u, str))
                if isinstance(raw, list)
                else frozenset()
            )
        except SLACK_FAILURES as exc:
            # A passing failure is not kept for the whole ttl (one would shut the group out
            # for a minute): the members last read (none if never) stand until it is asked
            # again. Slack's word that the group or the scope is missing is kept the ttl.
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
