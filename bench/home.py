"""Home tab rounds: the time a round of "Waiting for you" lists costs the bot's loop.

``python -m bench.home [--open 10000] [--tabs 1 100] [--runs 5] [--stores memory sqlite redis]``

Each store is filled with ``--open`` open questions (a third open to anyone, a third naming
users, a third naming a user group) and each round builds the lists of ``--tabs`` people, as
``HomeTab`` does, two ways:

- ``bot``: ``HomeTab``'s own ``ListingRound``: the store's ``open_audiences()``, ``Audiences``
  (audience.py), each person's 20 oldest read in one ``get_many`` (each record once a round)
  and rendered (``render_home``);
- ``every record`` (the baseline, how rounds were built before ``open_audiences``): every open
  record read and parsed (``open_records()``), filtered per person, rendered.

Reported per round: the time of the bot's loop thread (``time.thread_time``: what other
clicks wait for in all) and the wall time (the loop plus SQLite's thread or the Redis
script); and, in rounds of their own (with another task on the loop), the longest the round
held the loop without a turn for anything else (what one click arriving then waits). The
people's user groups are given (the gate's cache, warm after the first round); publishing
(``views.publish``) is left out. Redis: ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``),
keys under a fresh ``bench-<hex>`` prefix, deleted afterwards; skipped if Redis does not answer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import secrets
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path

from adapters.slack.home.tab import ListingRound, render_home
from adapters.slack.model.audience import ANYONE
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import MemoryPendingStore, PendingStore, SqlitePendingStore
from bench.common import fmt_ms, machine_line, print_table, question, summarize
from bot.questions.models import AskUserQuestionRequest

GROUPS = ("S0OPS", "S0DEV", "S0SEC")
"""The user groups the questions name; every person is in the first."""


async def _store(kind: str) -> PendingStore | None:
    if kind == "memory":
        return MemoryPendingStore()
    if kind == "sqlite":
        store: PendingStore = SqlitePendingStore(
            Path(tempfile.mkdtemp(prefix="bench-home-")) / "questions.db"
        )
    else:
        from adapters.slack.stores.contract import StoreUnavailable
        from adapters.slack.stores.redis import RedisPendingStore

        url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        store = RedisPendingStore(url, prefix=f"bench-{secrets.token_hex(4)}")
        try:
            await store.start()
        except StoreUnavailable as exc:
            print(f"redis: skipped ({exc})")
            return None
        return store
    await store.start()
    return store


async def _fill(store: PendingStore, count: int) -> None:
    items = AskUserQuestionRequest.model_validate(question(1)).questions
    for i in range(count):
        named: dict[str, list[str]] = {}
        if i % 3 == 1:
            named["allowed_users"] = [f"U{i % 50:08d}", f"U{(i + 7) % 50:08d}"]
        elif i % 3 == 2:
            named["allowed_usergroups"] = [GROUPS[i % len(GROUPS)]]
        record = PendingRecord(
            id=f"benchhome{i:08d}",
            questions=items,
            channel="C0BENCHHOME",
            message_ts=f"{1_790_000_000 + i}.000100",
            created_at=1_790_000_000.0 + i,
            owner=None,
            **named,
        )
        await store.create(record)


class _PublicChannel:
    """Tells the round that the bench's channel is public (as ``conversations.info`` would,
    once, then from its cache): its questions naming nobody are listed for anyone."""

    async def resolve(self, channels: Iterable[str]) -> dict[str, str | None]:
        return {channel: ANYONE for channel in channels}


async def _audiences_round(store: PendingStore, people: Sequence[str]) -> None:
    round_ = await ListingRound.read(store, _PublicChannel())  # type: ignore[arg-type]
    for person in people:
        groups = [g for g in round_.audiences.usergroups if g == GROUPS[0]]
        listed, total = await round_.listed(person, groups)
        render_home(listed, total=total)


def may_answer(record: PendingRecord, user: str, groups: Sequence[str]) -> bool:
    """Whether ``user`` (in ``groups``) is on ``record``'s allow-lists (none: anyone)."""
    if not record.allowed_users and not record.allowed_usergroups:
        return True
    return user in (record.allowed_users or []) or bool(
        set(groups) & set(record.allowed_usergroups or [])
    )


async def _every_record_round(store: PendingStore, people: Sequence[str]) -> None:
    records = await store.open_records()
    for person in people:
        render_home([r for r in records if r.questions and may_answer(r, person, GROUPS[:1])])


Round = Callable[[PendingStore, Sequence[str]], Awaitable[None]]


async def _time(
    round_: Round, store: PendingStore, people: Sequence[str], runs: int
) -> tuple[list[float], list[float]]:
    loop_times, walls = [], []
    for _ in range(runs):
        gc.collect()
        wall, loop = time.perf_counter(), time.thread_time()
        await round_(store, people)
        loop_times.append(time.thread_time() - loop)
        walls.append(time.perf_counter() - wall)
    return loop_times, walls


async def _held(round_: Round, store: PendingStore, people: Sequence[str], runs: int) -> float:
    """The longest the loop went without another task's turn over ``runs`` rounds."""
    longest = 0.0
    running = True

    async def other_task() -> None:
        nonlocal longest
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    for _ in range(runs):
        gc.collect()
        running = True
        task = asyncio.ensure_future(other_task())
        await asyncio.sleep(0)
        await round_(store, people)
        running = False
        await task
    return longest


async def bench(open_count: int, tabs: Sequence[int], runs: int, kinds: Sequence[str]) -> None:
    started = time.perf_counter()
    rows: list[Sequence[str]] = []
    for kind in kinds:
        store = await _store(kind)
        if store is None:
            continue
        try:
            await _fill(store, open_count)
            for count in tabs:
                people = [f"U{i:08d}" for i in range(count)]
                bot = await _time(_audiences_round, store, people, runs)
                base = await _time(_every_record_round, store, people, runs)
                held = {
                    "bot": await _held(_audiences_round, store, people, runs),
                    "every record": await _held(_every_record_round, store, people, runs),
                }
                bot_loop, base_loop = summarize(bot[0]), summarize(base[0])
                for what, (loops, walls) in (("bot", bot), ("every record", base)):
                    loop_stats, wall_stats = summarize(loops), summarize(walls)
                    rows.append(
                        [
                            f"{kind}: {count} tab(s), {what}",
                            str(loop_stats.n),
                            fmt_ms(loop_stats.p50),
                            fmt_ms(loop_stats.max),
                            fmt_ms(wall_stats.p50),
                            fmt_ms(held[what]),
                            f"{loop_stats.p50 / base_loop.p50:.2f}x",
                        ]
                    )
                print(
                    f"{kind}, {count} tab(s): the loop's time per round "
                    f"{fmt_ms(bot_loop.p50)} ms against {fmt_ms(base_loop.p50)} ms reading every "
                    f"record ({base_loop.p50 / bot_loop.p50:.1f}x less)",
                    flush=True,
                )
        finally:
            await store.close()
            if kind == "redis":
                await _forget_redis(store)
    print()
    print_table(
        f"Home tab rounds with {open_count:,} open questions: the bot's loop thread per round, "
        f"{runs} rounds each; times in ms",
        ["what", "n", "loop p50", "loop max", "wall p50", "held max", "loop vs every record"],
        rows,
    )
    print(machine_line(", ".join(kinds)))
    print(f"(took {time.perf_counter() - started:.0f} s)")


async def _forget_redis(store: PendingStore) -> None:
    """Delete the bench's keys (its fresh prefix)."""
    import redis.asyncio as aioredis

    prefix = getattr(store, "prefix", None)
    if not prefix:
        return
    client = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
    finally:
        await client.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--open", type=int, default=10_000, help="open questions")
    parser.add_argument("--tabs", type=int, nargs="+", default=[1, 100], help="tabs per round")
    parser.add_argument("--runs", type=int, default=5, help="rounds per row")
    parser.add_argument("--stores", nargs="+", default=["memory", "sqlite", "redis"])
    args = parser.parse_args(argv)
    asyncio.run(bench(args.open, args.tabs, args.runs, args.stores))


if __name__ == "__main__":
    main()
