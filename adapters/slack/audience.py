"""Who may answer each open question, and each person's "Waiting for you" list from that.

A Home tab lists the oldest open questions one person may answer and how many there are.
Reading and parsing every open record for it cost the bot's loop about 35 µs a record, for
every round of republishing; instead a store gives one ``Audience`` per open question (four
fields, read in the store: SQLite's JSON functions in its own thread), and ``Audiences``
answers each person from three buckets, built once a round: the questions open to anyone,
and those naming a user or a user group. No I/O here.

A round with 10,000 open questions makes and buckets 10,000 audiences: in one go that held
the loop for up to 24 ms (a click arriving meanwhile waited as long), so the stores and the
round go through them in ``batches``, giving the loop a turn between two.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from adapters.slack.record import PendingRecord

__all__ = ["BATCH", "Audience", "Audiences", "batches"]

BATCH: Final = 500
"""Audiences made or bucketed between two turns of the loop (a fraction of a millisecond)."""

_T = TypeVar("_T")


async def batches(items: Sequence[_T], size: int = BATCH) -> AsyncIterator[Sequence[_T]]:
    """``items`` in order, ``size`` at a time, other tasks given a turn between two."""
    for start in range(0, len(items), size):
        if start:
            await asyncio.sleep(0)
        yield items[start : start + size]


@dataclass(frozen=True, slots=True)
class Audience:
    """An open question and who may answer it (``allowed_users`` / ``allowed_usergroups``;
    neither: anyone)."""

    request_id: str
    created_at: float
    users: tuple[str, ...] = ()
    usergroups: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: PendingRecord) -> Audience | None:
        """``record``'s audience; ``None`` when it is on nobody's list (it is closed, or a
        tool approval, which has no questions and a panel of its own)."""
        if not record.is_open or not record.questions:
            return None
        return cls(
            record.id,
            record.created_at,
            tuple(record.allowed_users or ()),
            tuple(record.allowed_usergroups or ()),
        )

    @property
    def anyone(self) -> bool:
        """Whether anyone may answer (no user nor user group is named)."""
        return not self.users and not self.usergroups


def _order(audience: Audience) -> tuple[float, str]:
    return audience.created_at, audience.request_id


class Audiences:
    """The open questions' audiences, bucketed so each person's list costs what it holds."""

    def __init__(self, audiences: Iterable[Audience] = ()) -> None:
        self._anyone: list[Audience] = []
        self._sorted = True
        self._by_user: dict[str, list[Audience]] = {}
        self._by_group: dict[str, list[Audience]] = {}
        self.extend(audiences)

    def extend(self, audiences: Iterable[Audience]) -> None:
        """Add more open questions' audiences (a round adds them in ``batches``)."""
        anyone = self._anyone
        size = len(anyone)
        for audience in audiences:
            if audience.anyone:
                anyone.append(audience)
            for user in audience.users:
                self._by_user.setdefault(user, []).append(audience)
            for group in audience.usergroups:
                self._by_group.setdefault(group, []).append(audience)
        self._sorted = self._sorted and len(anyone) == size

    @property
    def usergroups(self) -> frozenset[str]:
        """Every user group an open question names (whose members a list depends on)."""
        return frozenset(self._by_group)

    def waiting_for(
        self, user: str, usergroups: Iterable[str], limit: int
    ) -> tuple[Sequence[str], int]:
        """The ids of the ``limit`` oldest questions ``user`` (a member of ``usergroups``)
        may answer, oldest first, and how many they may answer in all."""
        if not self._sorted:
            self._anyone.sort(key=_order)
            self._sorted = True
        named = {a.request_id: a for a in self._by_user.get(user, ())}
        for group in usergroups:
            named.update((a.request_id, a) for a in self._by_group.get(group, ()))
        restricted = sorted(named.values(), key=_order)
        oldest = itertools.islice(heapq.merge(self._anyone, restricted, key=_order), limit)
        return [a.request_id for a in oldest], len(self._anyone) + len(restricted)
