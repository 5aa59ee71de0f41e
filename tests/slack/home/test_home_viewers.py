"""App Home's viewers (stores/viewers.py): shared, bounded, expiring; and what they refresh.

The contract runs on each implementation (memory, SQLite, Redis): the most recent
``max_viewers`` openers, each for ``ttl`` after they last opened, oldest first; two handles
on one SQLite file or one Redis prefix see the same set. Then through a real bolt app and
the Slack stand-in: a viewer whose last opening is older than the limit is no longer
refreshed (an injectable clock), and a change republishes only the Home tabs it concerns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from adapters.slack.home.tab import MAX_HOME_ENTRIES
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import MemoryPendingStore, PendingStore
from adapters.slack.stores.viewers import (
    VIEWER_TTL,
    HomeViewers,
    MemoryHomeViewers,
    SqliteHomeViewers,
    viewers_for,
)
from tests.slack_harness import SlackHarness, until

T0 = 1_790_000_000.0
"""An epoch time in 2026 (the stores keep real timestamps)."""


Handles = Callable[..., Awaitable[tuple[HomeViewers, HomeViewers]]]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def handles(request: pytest.FixtureRequest) -> Handles:
    """Two handles on one set of viewers (one file, one Redis prefix: two processes, in
    effect), each through a store of its own."""
    if request.param == "memory":

        async def memory(**limits: Any) -> tuple[HomeViewers, HomeViewers]:
            viewers = MemoryHomeViewers(**limits)  # one process: one set
            return viewers, viewers

        return memory
    factory: Callable[[], Awaitable[PendingStore]] = request.getfixturevalue(
        f"{request.param}_store_factory"
    )

    async def shared(**limits: Any) -> tuple[HomeViewers, HomeViewers]:
        first, second = await factory(), await factory()
        one, other = viewers_for(first, **limits), viewers_for(second, **limits)
        assert type(one).__name__ == f"{request.param.title()}HomeViewers"
        return one, other

    return shared


async def test_the_most_recent_openers_are_kept_oldest_first(handles: Handles) -> None:
    one, other = await handles(max_viewers=3)
    # only a set in this process's memory knows it is empty without asking
    assert one.known_empty() is (one is other)
    for i, user in enumerate(["U1", "U2", "U3"]):
        await one.opened(user, T0 + i)
    assert await other.current(T0 + 10) == ["U1", "U2", "U3"]  # shared
    assert not one.known_empty() and not other.known_empty()
    await other.opened("U1", T0 + 4)  # opened again: the most recent now
    assert await one.current(T0 + 10) == ["U2", "U3", "U1"]
    await one.opened("U4", T0 + 5)  # one too many: the oldest opener goes
    assert await other.current(T0 + 10) == ["U3", "U1", "U4"]
    await one.opened("U4", T0 + 1)  # a late, older report does not move anyone back
    assert await one.current(T0 + 10) == ["U3", "U1", "U4"]


async def test_a_viewer_expires_the_limit_after_their_last_opening(handles: Handles) -> None:
    one, other = await handles(ttl=100.0)
    await one.opened("U1", T0)
    await other.opened("U2", T0 + 50)
    assert await one.current(T0 + 100) == ["U1", "U2"]  # exactly the limit: still kept
    assert await other.current(T0 + 100.5) == ["U2"]
    await other.opened("U1", T0 + 120)  # opening again keeps them again
    assert await one.current(T0 + 151) == ["U1"]
    await one.opened("U3", T0 + 400)  # an opening also forgets the expired ones
    assert await other.current(T0 + 400) == ["U3"]


def test_the_limits_are_seven_days_and_positive() -> None:
    assert VIEWER_TTL == 7 * 86400
    with pytest.raises(ValueError):
        MemoryHomeViewers(max_viewers=0)
    with pytest.raises(ValueError):
        SqliteHomeViewers("x.db", ttl=0)


# -- through the bolt app and the Slack stand-in -------------------------------------------


class ManualClock:
    """Wall-clock time that moves only when the test sets it."""

    def __init__(self, now: float) -> None:
        self.time = now

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


def published(h: SlackHarness, user: str) -> list[str]:
    """What ``user``'s Home tab was set to, each ``views.publish`` in order."""
    return [
        str(call.params.get("view"))
        for call in h.slack.calls("views.publish")
        if call.params.get("user_id") == user and call.ok
    ]


def one(question: str) -> dict[str, Any]:
    return {"questions": [{"id": "q", "question": question, "options": [{"label": "Yes"}]}]}


@pytest.mark.slow
async def test_a_viewer_older_than_the_limit_is_no_longer_refreshed() -> None:
    clock = ManualClock(time.time())
    start = clock.time
    async with asyncio.timeout(30), SlackHarness(clock=clock) as h:
        await h.slack.open_home(h.alice)
        await until(lambda: len(published(h, h.alice)) == 1, what="alice's home")
        clock.time = start + VIEWER_TTL - 60
        await h.slack.open_home(h.bob)
        await until(lambda: len(published(h, h.bob)) == 1, what="bob's home")
        clock.time = start + VIEWER_TTL + 1  # alice last opened hers 7 days and 1 s ago

        task = h.ask(one("Ship 2.5?"))
        message = await h.posted()
        await until(lambda: "Ship 2.5?" in "".join(published(h, h.bob)[1:]), what="bob's")
        # A round publishes the oldest opener first: alice's would have come before bob's.
        assert len(published(h, h.alice)) == 1
        assert "Ship 2.5?" not in "".join(published(h, h.alice))

        await h.slack.open_home(h.alice)  # opening it again shows the list, and keeps it
        await until(lambda: "Ship 2.5?" in published(h, h.alice)[-1], what="alice's reopened")
        await h.click(message, h.bob, text="Yes")
        await task
        for user in (h.alice, h.bob):
            await until(lambda u=user: "Nothing is waiting" in published(h, u)[-1], what=user)
        assert len(published(h, h.alice)) == 3 and len(published(h, h.bob)) == 3


@pytest.mark.slow
async def test_a_change_republishes_only_the_home_tabs_it_concerns() -> None:
    async with asyncio.timeout(30), SlackHarness() as h:
        for user in (h.alice, h.bob, h.carol):
            await h.slack.open_home(user)
            await until(lambda u=user: len(published(h, u)) == 1, what=f"{user}'s home")
        h.provider.defaults.allowed_users = [h.alice, h.carol]
        task = h.ask(one("Rotate the keys?"))
        await h.posted()
        # carol opened her tab last, so her list is published last in a round
        await until(lambda: "Rotate the keys?" in published(h, h.carol)[-1], what="carol's")
        assert "Rotate the keys?" in published(h, h.alice)[-1]
        assert len(published(h, h.bob)) == 1  # not bob's to answer: his tab is left alone
        task.cancel()


class ReadsNoOpenRecords(MemoryPendingStore):
    """A store whose ``open_records`` fails once ``guarded``: the Home tab must not need it.

    It also notes how many ids each ``get_many`` read once ``guarded``.
    """

    guarded = False

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def open_records(self, owner: str | None = None) -> list[PendingRecord]:
        if self.guarded and owner is None:
            raise AssertionError("a Home tab read every open record")
        return await super().open_records(owner)

    async def get(self, request_id: str) -> PendingRecord | None:
        (record,) = await super().get_many([request_id])  # one record's read is no batch
        return record

    async def get_many(self, request_ids: Sequence[str]) -> list[PendingRecord | None]:
        if self.guarded:
            self.batches.append(len(request_ids))
        return await super().get_many(request_ids)


@pytest.mark.slow
async def test_a_home_tab_lists_the_oldest_twenty_without_reading_every_open_record() -> None:
    store = ReadsNoOpenRecords()
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        store.guarded = True
        tasks = [h.ask(one(f"Question {n:02}?")) for n in range(MAX_HOME_ENTRIES + 5)]
        await h.posted(len(tasks))
        (first,) = [m for m in h.top_messages() if "Question 00?" in str(m.text)]
        h.provider.defaults.allowed_users = [h.bob]
        tasks.append(h.ask(one("Only for bob?")))
        await h.posted(len(tasks))
        await h.slack.open_home(h.alice)
        await until(lambda: len(published(h, h.alice)) == 1, what="alice's home")
        shown = published(h, h.alice)[0]
        assert "Question 00?" in shown and f"Question {MAX_HOME_ENTRIES - 1:02}?" in shown
        assert f"Question {MAX_HOME_ENTRIES:02}?" not in shown and "bob" not in shown
        assert "…and 5 more, in the channels." in shown
        assert store.batches == [MAX_HOME_ENTRIES]  # the listed records: one read of the store

        await h.click(first, h.alice, text="Yes")  # the oldest is answered: the next shows
        await tasks[0]
        await until(lambda: len(published(h, h.alice)) == 2, what="alice's republished home")
        shown = published(h, h.alice)[1]
        assert "Question 00?" not in shown and f"Question {MAX_HOME_ENTRIES:02}?" in shown
        assert "…and 4 more, in the channels." in shown
        # the changed record (one read), then the listed ones (one read)
        assert store.batches == [MAX_HOME_ENTRIES, 1, MAX_HOME_ENTRIES]
        for task in tasks:
            task.cancel()
