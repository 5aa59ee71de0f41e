"""Scale: many questions pending at once in one bot process.

``python -m bench.scale [--levels 100,1000,10000] [--k 200] [--batch 200] [--cores split|shared]``
``python -m bench.scale --trace 2000`` (where the memory goes, by allocation site)

One bot process (bolt app served on 127.0.0.1, memory store) posts to the Web API stand-in,
which runs in a process of its own so that Slack's copy of the messages never counts in the
bot's memory (and, with ``--cores split``, on the cores the bot does not use:
``bench.cores``). After a warm-up (20 questions asked and answered) the bot's RSS is the
baseline.
Then, for each level L, the bot tops up to L + k pending questions (asked ``--batch`` at a time)
and notes its RSS after a full collection; then it answers k of them, one at a time, picked at
random: a signed click is POSTed and the time to the ack and to the awaiting ``ask()``
returning is taken. k fresh asks are then posted one at a time (ask -> posted).

``bench.scale_api`` then measures questions asked over the HTTP API (the bot as ``python -m
bot`` runs it, SQLite): KiB per pending question with no waiter (target <= 6, goal 4) and
with a long-poll each (target <= 104).

Targets: under 10 KB of RSS per pending question beyond the baseline; the time to answer one
question flat in the number pending. At the end the bot shuts down with everything still
pending (each message is edited to say so), and the shutdown is timed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
from collections.abc import Sequence

import aiohttp

from adapters.slack.provider import SlackQuestionProvider
from bench import cores, scale_api
from bench.common import (
    Asks,
    StandIn,
    Stats,
    bench_store,
    bot_app,
    fmt_ms,
    machine_line,
    message_of,
    print_table,
    rss_kib,
    serve_bolt,
    settled_rss_kib,
    signed,
    store_kind,
    summarize,
    with_stores,
)
from bot.questions.service import UserQuestionService


async def _quiet(provider: SlackQuestionProvider, within: float = 60) -> None:
    """Wait until the provider's background Web API calls are done."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while provider.background_count:
        if loop.time() > deadline:
            raise TimeoutError(f"{provider.background_count} background tasks still running")
        await asyncio.sleep(0.005)


async def bench(levels: Sequence[int], k: int, batch: int, api: int) -> None:
    started = time.perf_counter()
    rng = random.Random(0)
    rows: list[list[str]] = []
    answer_at: dict[int, Stats] = {}
    ack_at: dict[int, Stats] = {}
    async with StandIn() as slack:
        app = await bot_app(slack.url, slack.token, http_timeout=30, pace=False)
        provider = SlackQuestionProvider(
            app, channel=slack.channel, store=await bench_store(), paced=False
        )
        service = UserQuestionService()
        service.register_provider(provider)
        served = await serve_bolt(app)
        asks = Asks(service)
        session = aiohttp.ClientSession()

        async def answer(rid: str) -> tuple[float, float]:
            channel, ts = await message_of(provider.store, rid)
            user = slack.users[rng.randrange(len(slack.users))]
            (payload,) = await slack.clicks(
                [{"channel": channel, "ts": ts, "user": user, "text": "Yes"}]
            )
            request = signed(served.url, payload)
            await _quiet(provider)
            sent = time.perf_counter()
            async with session.post(
                request["url"], data=request["body"].encode(), headers=request["headers"]
            ) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"click answered {response.status}")
            acked = time.perf_counter() - sent
            await asyncio.wait_for(asks.tasks[rid], 30)
            return acked, asks.returned_perf[rid] - sent

        for rid in await asks.start(20):  # warm-up: every path once
            await answer(rid)
        await _quiet(provider)
        asks.tasks.clear()
        asks.returned.clear()
        asks.returned_perf.clear()
        baseline = settled_rss_kib()
        objects_before = len(gc.get_objects())
        pending: list[str] = []
        fill_rates: dict[int, float] = {}
        for level in levels:
            need = level + k - len(pending)
            t0 = time.perf_counter()
            pending.extend(await asks.start(need, batch=batch, within=600))
            fill_rates[level] = need / (time.perf_counter() - t0)
            await _quiet(provider)
            rss = settled_rss_kib()
            objects = len(gc.get_objects())
            count = provider.pending_count
            assert count == len(pending), (count, len(pending))

            acks: list[float] = []
            answers: list[float] = []
            for rid in rng.sample(pending, k):
                pending.remove(rid)
                acked, resumed = await answer(rid)
                acks.append(acked)
                answers.append(resumed)
                del asks.tasks[rid]  # keep the bench's own bookkeeping flat
                del asks.returned[rid], asks.returned_perf[rid]
            posts: list[float] = []
            for _ in range(k):
                await _quiet(provider)
                t0 = time.perf_counter()
                pending.extend(await asks.start(1))
                posts.append(time.perf_counter() - t0)
            answer_at[level] = summarize(answers)
            ack_at[level] = summarize(acks)
            post = summarize(posts)
            base_answer = answer_at[levels[0]]
            rows.append(
                [
                    f"{count:,} pending",
                    f"{(rss - baseline) / count:.2f}",
                    f"{(objects - objects_before) / count:.0f}",
                    fmt_ms(ack_at[level].p50),
                    fmt_ms(ack_at[level].p99),
                    fmt_ms(answer_at[level].p50),
                    fmt_ms(answer_at[level].p99),
                    f"{answer_at[level].p50 / base_answer.p50:.2f}x",
                    fmt_ms(post.p50),
                    f"{fill_rates[level]:.0f}",
                ]
            )
        final_count = provider.pending_count
        rss_before_close = rss_kib()
        t0 = time.perf_counter()
        await provider.aclose(grace=120)
        shutdown = time.perf_counter() - t0
        waiting = [t for t in asks.tasks.values() if not t.done()]
        await asks.cancel_all()
        await session.close()
        await served.close()
        stats = await slack.stats()
        api_waiting, api_polled = await scale_api.measure(slack, api, batch) if api else (0, 0)

    print_table(
        f"Scale: one bot process, {store_kind()} store, questions pending at once; "
        f"k = {k} answered one at a time at each level; times in ms",
        [
            "level",
            "KiB/pending",
            "objects/pending",
            "ack p50",
            "ack p99",
            "answer p50",
            "answer p99",
            "answer vs first",
            "ask->posted p50",
            "asks/s filling",
        ],
        rows,
    )
    top = levels[-1]
    last = rows[-1]
    print()
    print(f"baseline RSS after warm-up: {baseline / 1024:.1f} MiB")
    print(
        f"target < 10 KB per pending question at {top:,}: {last[1]} KiB -> "
        f"{'met' if float(last[1]) * 1.024 < 10 else 'MISSED'}"
    )
    growth = answer_at[top].p50 / answer_at[levels[0]].p50
    print(
        f"target flat answer time: p50 at {top:,} pending = {growth:.2f}x the p50 at "
        f"{levels[0]:,} -> {'met' if growth < 1.5 else 'MISSED'} (flat: < 1.5x)"
    )
    print(
        f"shutdown with {final_count:,} pending (RSS {rss_before_close / 1024:.0f} MiB): "
        f"{shutdown:.1f} s; asks still waiting after it: {len(waiting)}; messages still "
        f"showing buttons: {stats['with_buttons']} of {stats['messages']}; Web API calls "
        f"{stats['calls']}, failed {stats['failed']}"
    )
    if api:
        print(
            f"API questions ({api:,}, HTTP, SQLite store): {api_waiting:.1f} KiB per pending "
            f"question with no waiter (target <= 6, goal 4) -> "
            f"{'met' if api_waiting <= 6 else 'MISSED'}; {api_polled:.1f} KiB with a long-poll "
            f"each (target <= 104) -> {'met' if api_polled <= 104 else 'MISSED'}"
        )
    print(machine_line())
    print(f"(took {time.perf_counter() - started:.0f} s)")


_RENDERING = frozenset({"mrkdwn.py", "ids.py", "checker.py"})
"""Rendering modules outside ``adapters/slack/render/blocks/`` (all of which renders)."""


def _rendering(path: str) -> bool:
    return "/slack/blocks/" in path or path.rsplit("/", 1)[-1] in _RENDERING


async def trace(count: int) -> None:
    """Where the memory of ``count`` pending questions goes (tracemalloc, by call site)."""
    import tracemalloc

    async with StandIn() as slack:
        app = await bot_app(slack.url, slack.token, http_timeout=30, pace=False)
        provider = SlackQuestionProvider(
            app, channel=slack.channel, store=await bench_store(), paced=False
        )
        service = UserQuestionService()
        service.register_provider(provider)
        asks = Asks(service)
        await asks.start(20)
        await _quiet(provider)
        gc.collect()
        tracemalloc.start(30)
        before = tracemalloc.take_snapshot()
        await asks.start(count, batch=200, within=600)
        await _quiet(provider)
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        sites: dict[str, int] = {}
        for stat in after.compare_to(before, "traceback"):
            ours = [
                f"{f.filename.rsplit('/work/main/', 1)[-1]}:{f.lineno}"
                for f in stat.traceback
                if "/adapters/" in f.filename or "/bot/" in f.filename
            ]
            if not ours:
                site = "the caller (its request and task, the bench's bookkeeping)"
            elif _rendering(ours[-1].split(":")[0]):
                site = "the rendered message (blocks/, mrkdwn.py, ids.py)"
            else:
                site = " <- ".join(ours[::-1][:2])
            sites[site] = sites.get(site, 0) + stat.size_diff
        total = sum(sites.values())
        rows = [
            [site, f"{size / count:.0f}", f"{100 * size / total:.0f}%"]
            for site, size in sorted(sites.items(), key=lambda kv: -kv[1])[:15]
        ]
        print_table(
            f"Memory of {count:,} pending questions by allocation site (innermost adapters/bot "
            f"frame first); {total / count:.0f} bytes traced per pending question",
            ["site", "bytes/pending", "share"],
            rows,
        )
        print(machine_line())
        await asks.cancel_all()
        await provider.aclose(grace=60)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--levels", default="100,1000,10000", help="pending counts to measure")
    parser.add_argument("--k", type=int, default=200, help="questions answered per level")
    parser.add_argument("--batch", type=int, default=200, help="asks started at once")
    parser.add_argument("--api", type=int, default=2000, help="API questions (0: none)")
    parser.add_argument(
        "--trace",
        type=int,
        default=0,
        metavar="N",
        help="instead: where N pending questions' memory goes",
    )
    cores.add_option(parser)
    args = parser.parse_args(argv)
    cores.place(args.cores)
    if args.trace:
        asyncio.run(trace(args.trace))
        return
    levels = [int(x) for x in args.levels.split(",")]
    asyncio.run(with_stores(bench(levels, args.k, args.batch, args.api)))


if __name__ == "__main__":
    main()
