"""Who may answer each open question, and each person's "Waiting for you" list from that."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from adapters.slack.model.record import PendingRecord

if TYPE_CHECKING:
    from adapters.slack.model.interactions import Origin

ANYONE: Final = "*"
"""Who sees a public channel, for ``Audiences.resolve``."""
BATCH: Final = 500
"""Audiences made or bucketed between two turns of the loop (a fraction of a millisecond)."""

_T = TypeVar("_T")


async def batches(items: Sequence[_T], size: int = BATCH) -> AsyncIterator[Sequence[_T]]:
    """``items`` in order, ``size`` at a time, other tasks given a turn between two."""
    for start in range(0, len(items), size):
        if start:
            await asyncio.sleep(0)
        yield items[start : start + size]


def who_may(record: PendingRecord) -> tuple[list[str] | None, list[str] | None]:
    """Who may act on ``record``: a team review's reviewers, else who may answer (users and
    user groups; neither: whoever sees the message)."""
    reviewers = record.review.reviewers if record.review is not None else None
    if reviewers is not None:
        return list(reviewers.users), list(reviewers.usergroups)
    return record.allowed_users, record.allowed_usergroups


def also_allowed(record: PendingRecord) -> tuple[list[str] | None, list[str] | None] | None:
    """The operator's allow-list a team review's reviewers must be on too; ``None`` when
    ``who_may`` alone decides."""
    if record.review is None or record.review.reviewers is None:
        return None
    if not record.allowed_users and not record.allowed_usergroups:
        return None
    return record.allowed_users, record.allowed_usergroups


def outside_message(record: PendingRecord, origin: Origin) -> bool:
    """Whether a click names a message other than the question's (a Home tab's button, a
    forged payload); one with no message (in a modal) is the message's."""
    if origin.channel is None:
        return False
    if origin.channel != (record.message_channel or record.channel):
        # a question asked by user id is posted in that user's DM (``D…``)
        return not (record.message_channel is None and record.channel.startswith(("U", "W")))
    return record.message_ts is not None and origin.message_ts != record.message_ts


def policy_groups(record: PendingRecord) -> frozenset[str]:
    """The user groups whose membership a team review's tally needs."""
    if record.review is None:
        return frozenset()
    return frozenset(g for required in record.review.required for g in required.usergroups)


def narrowed(
    users: Sequence[str],
    groups: Sequence[str],
    allowed_users: Sequence[str] | None,
    allowed_groups: Sequence[str] | None,
) -> tuple[list[str], list[str]]:
    """A team review's reviewers within the operator's allow-list as far as names tell
    (users only on both sides: those on both, ``[""]`` for nobody); else the reviewers."""
    if (allowed_users or allowed_groups) and not groups and not allowed_groups:
        return [u for u in users if u in (allowed_users or ())] or [""], []
    return list(users), list(groups)


@dataclass(frozen=True, slots=True)
class Audience:
    """An open question and who may answer it: the ``users`` and ``usergroups`` named, else
    whoever sees ``channel``; neither: anyone."""

    request_id: str
    created_at: float
    users: tuple[str, ...] = ()
    usergroups: tuple[str, ...] = ()
    channel: str | None = None

    @classmethod
    def of(cls, record: PendingRecord, *, closed: bool = False) -> Audience | None:
        """``record``'s audience; ``None`` when on nobody's list (closed, unless ``closed``,
        or a tool approval)."""
        if not (record.is_open or closed) or not record.questions:
            return None
        users, groups = who_may(record)
        also = also_allowed(record)
        if also is not None:
            users, groups = narrowed(users or [], groups or [], *also)
        return cls.named(
            record.id,
            record.created_at,
            users or (),
            groups or (),
            channel=record.channel,
            message_channel=record.message_channel,
        )

    @classmethod
    def named(
        cls,
        request_id: str,
        created_at: float,
        users: Iterable[str],
        usergroups: Iterable[str],
        *,
        channel: str,
        message_channel: str | None = None,
    ) -> Audience:
        """The audience of a question naming ``users`` and ``usergroups`` asked in ``channel``
        (posted in ``message_channel``): a DM's user, else those named among who sees it."""
        named, groups = tuple(users), tuple(usergroups)
        if channel.startswith(("U", "W")):  # a DM: its user only, if named (or none is)
            dm = not (named or groups) or channel in named or bool(groups)
            return cls(request_id, created_at, (channel,) if dm else ("",))
        # Named or not, it waits on who sees its conversation (a private channel's: no list).
        return cls(request_id, created_at, named, groups, message_channel or channel)

    @property
    def anyone(self) -> bool:
        """Whether anyone may answer (nobody named, no conversation to see)."""
        return not self.users and not self.usergroups and self.channel is None

    def resolved(self, seen_by: str | None) -> Audience | None:
        """This audience once its conversation is known: ``seen_by`` ``ANYONE``, a user id (a
        DM) or ``None`` (members only, or unknown: nobody's list)."""
        if seen_by is None:
            return None
        if seen_by == ANYONE:
            return Audience(self.request_id, self.created_at, self.users, self.usergroups)
        if self.users and seen_by not in self.users and not self.usergroups:
            return None  # a DM with someone not allowed to answer
        return Audience(self.request_id, self.created_at, (seen_by,))


def _order(audience: Audience) -> tuple[float, str]:
    return audience.created_at, audience.request_id


class Audiences:
    """The open questions' audiences, bucketed so each person's list costs what it holds."""

    def __init__(self, audiences: Iterable[Audience] = ()) -> None:
        self._anyone: list[Audience] = []
        self._sorted = True
        self._by_user: dict[str, list[Audience]] = {}
        self._by_group: dict[str, list[Audience]] = {}
        self._by_channel: dict[str, list[Audience]] = {}
        self.extend(audiences)

    def extend(self, audiences: Iterable[Audience]) -> None:
        """Add more open questions' audiences."""
        anyone = self._anyone
        size = len(anyone)
        for audience in audiences:
            if audience.channel is not None:
                self._by_channel.setdefault(audience.channel, []).append(audience)
                continue
            if audience.anyone:
                anyone.append(audience)
            for user in audience.users:
                self._by_user.setdefault(user, []).append(audience)
            for group in audience.usergroups:
                self._by_group.setdefault(group, []).append(audience)
        self._sorted = self._sorted and len(anyone) == size

    @property
    def channels(self) -> frozenset[str]:
        """The conversations whose questions wait on ``resolve``."""
        return frozenset(self._by_channel)

    def resolve(self, seen_by: Mapping[str, str | None]) -> None:
        """List the questions waiting on their conversation, by who sees each."""
        waiting, self._by_channel = self._by_channel, {}
        for channel, audiences in waiting.items():
            seen = seen_by.get(channel)
            self.extend(a for a in (a.resolved(seen) for a in audiences) if a is not None)

    @property
    def usergroups(self) -> frozenset[str]:
        """Every user group an open question names."""
        return frozenset(self._by_group)

    def waiting_for(
        self, user: str, usergroups: Iterable[str], limit: int
    ) -> tuple[Sequence[str], int]:
        """The ids of the ``limit`` oldest questions ``user`` (in ``usergroups``) may answer,
        and how many they may answer in all."""
        if not self._sorted:
            self._anyone.sort(key=_order)
            self._sorted = True
        named = {a.request_id: a for a in self._by_user.get(user, ())}
        for group in usergroups:
            named.update((a.request_id, a) for a in self._by_group.get(group, ()))
        restricted = sorted(named.values(), key=_order)
        oldest = itertools.islice(heapq.merge(self._anyone, restricted, key=_order), limit)
        return [a.request_id for a in oldest], len(self._anyone) + len(restricted)
