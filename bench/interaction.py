"""Interaction cost: a signed ``block_actions`` click, from the HTTP request to the ack.

``python -m bench.interaction [--n 500] [--runs 3] [--rate 100] [--warmup 50] [--block 20]
[--cores split|shared]``

Bolt ``AsyncApp``s, each served by aiohttp on 127.0.0.1, get the same signed, form-encoded
payloads at ``--rate`` clicks per second from a load generator in another process (one
keep-alive connection per app):

- ``bolt default``: a bare app whose listener only acks, with bolt's defaults (its ack path
  polls every 10 ms), served as bolt serves itself on aiohttp (its ``to_bolt_request``);
- ``bolt process_before_response``: the same with ``process_before_response=True``: the
  floor, bare bolt;
- ``bare ack, the bot's handler``: that app served the way the bot serves itself in HTTP
  mode (``events_handler``: the signature checked first, the form decoded by
  ``bolt_request``), for comparison: it shows what the bot's handler saves or costs;
- ``bot``: ``SlackQuestionProvider`` on an app with ``process_before_response=True``, on
  the store ``BENCH_STORE`` names (memory, or SQLite as ``python -m bot`` runs it): verify,
  parse, authorize, compare-and-set, resolve the waiting ``ask()``, ack. The bot first asks
  one question per click, so every click really answers a pending question.
- ``team-review vote``: the same for plan reviews under a policy of two approvals: every
  click is a vote (the first keeps the review open and re-renders its tally, the second
  decides it).
- ``embedded``: the provider as the README embeds it, on ``AsyncApp(token=…,
  process_before_response=True)`` (bolt's own client, authorization and signature check,
  the provider's paced copy of the client) served on aiohttp as docs/python.md shows (bolt's
  dispatch, requests read by ``adapters.slack.to_bolt_request``): the same work as ``bot``,
  through a library user's app.

The Web API stand-in runs in its own process; with ``--cores split`` (the default on two or
more cores) it and the load generator share the cores this process (the bot, and the floor
beside it) does not use, as Slack's servers and clients never run on the bot's machine
(``bench.cores``). Each run and load pattern is one sequence of
clicks from one load generator: ``--warmup`` clicks per app (not counted), then ``--n`` per
app in turns of ``--block`` clicks (20: a fifth of a second at 100/s), the apps' order
rotating from turn to turn. The machine's speed drifts over seconds (on a shared 2-core VM the
floor's own p50 moved 1.26-1.80 ms within an hour); taking turns puts that drift into every
app's samples alike, where one long block per app put it into the ratio (``--block 0``
measures that way). The table pools the counted samples of every run and shows each run's
median too. Targets at 100 clicks/s: the bot's p50 and a vote's within 1.5x the floor, the
bot's p99 under 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from slack_bolt.async_app import AsyncApp

from adapters.slack.provider import SlackQuestionProvider
from bench import cores
from bench.common import (
    FAST_LIMITS,
    SECRET,
    Asks,
    StandIn,
    bare_app,
    bench_store,
    bot_app,
    fmt_ms,
    machine_line,
    message_of,
    plan_review,
    print_table,
    send_paced,
    serve_bolt,
    signed,
    summarize,
    web_client,
    with_stores,
)
from bot.app.runtime import settle_heap
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

DEFAULT = "bolt default (ack only)"
FLOOR = "bolt process_before_response (ack only)"
HANDLER = "bare ack, the bot's handler"
BOT = "bot: verify, parse, authorize, apply, resolve, ack"
VOTE = "bot: team-review vote (quorum 2)"
EMBED = "embedded: the README's provider, served as docs/python.md shows"

BLOCK = 20
"""Counted clicks an app gets in a row before the next app's turn (at 100/s: 0.2 s)."""


def turns(
    apps: Sequence[str], warmup: int, n: int, block: int, *, first: int = 0
) -> list[tuple[str, int]]:
    """The order of one load pattern's clicks, as (app, index of the click in its sequence).

    First each app's ``warmup`` clicks, app after app; then the counted ``n`` in turns of
    ``block`` clicks per app (``block <= 0``: all ``n`` at once), the apps' order rotated
    each round and starting at ``apps[first % len(apps)]``, so that every app is measured
    across the same seconds of the machine.
    """
    count = len(apps)
    size = n if block <= 0 else block
    schedule = [(app, i) for app in apps for i in range(warmup)]
    for round_, start in enumerate(range(warmup, warmup + n, size)):
        shift = (first + round_) % count
        for app in [*apps[shift:], *apps[:shift]]:
            schedule.extend((app, i) for i in range(start, min(start + size, warmup + n)))
    return schedule


async def bench(n: int, runs: int, rate: float, warmup: int, block: int) -> None:
    started = time.perf_counter()
    async with StandIn() as slack:
        apps: dict[str, AsyncApp] = {
            DEFAULT: bare_app(web_client(slack.url, slack.token), process_before_response=False),
            FLOOR: bare_app(web_client(slack.url, slack.token), process_before_response=True),
            HANDLER: bare_app(web_client(slack.url, slack.token), process_before_response=True),
        }
        app = await bot_app(slack.url, slack.token)
        provider = SlackQuestionProvider(app, channel=slack.channel, store=await bench_store())
        service = UserQuestionService()
        service.register_provider(provider)
        apps[BOT] = app
        # Team reviews with a quorum of two: the first click of each review is a vote that
        # keeps it open (the tally re-rendered), the second ends it.
        team_app = await bot_app(slack.url, slack.token)
        team = SlackQuestionProvider(team_app, channel=slack.channel, store=await bench_store())
        team_service = UserQuestionService()
        team_service.register_provider(team)
        apps[VOTE] = team_app
        embed_app = AsyncApp(token=slack.token, signing_secret=SECRET, process_before_response=True)
        embed_app.client.base_url = slack.url
        embedded = SlackQuestionProvider(
            embed_app, channel=slack.channel, store=await bench_store(), limits=FAST_LIMITS
        )
        embed_service = UserQuestionService()
        embed_service.register_provider(embedded)
        apps[EMBED] = embed_app
        served = {
            name: await serve_bolt(
                app, bolts_adapter=name in (DEFAULT, FLOOR), embedded=name == EMBED
            )
            for name, app in apps.items()
        }
        settle_heap()  # as the bot does once started (python -m bot)

        patterns = [(f"{rate:g}/s paced", rate), ("closed loop", 0.0)]
        per_pattern = warmup + n
        per_run = per_pattern * len(patterns)
        asks = Asks(service)
        rids = await asks.start(per_run * runs)
        places = [await message_of(provider.store, rid) for rid in rids]
        specs = [
            {
                "channel": channel,
                "ts": ts,
                "user": slack.users[i % len(slack.users)],
                "text": "Yes" if i % 2 else "No",
            }
            for i, (channel, ts) in enumerate(places)
        ]
        payloads = []
        for first in range(0, len(specs), 500):
            payloads.extend(await slack.clicks(specs[first : first + 500]))
        embed_asks = Asks(embed_service)
        embed_rids = await embed_asks.start(per_run * runs)
        embed_places = [await message_of(embedded.store, rid) for rid in embed_rids]
        embed_payloads = []
        for first in range(0, len(specs), 500):
            embed_specs = [
                {**spec, "channel": channel, "ts": ts}
                for spec, (channel, ts) in zip(
                    specs[first : first + 500], embed_places[first : first + 500], strict=True
                )
            ]
            embed_payloads.extend(await slack.clicks(embed_specs))
        team_asks = Asks(team_service, make=plan_review, review=ReviewPolicy(approvals=2))
        team_rids = await team_asks.start((per_run * runs + 1) // 2)
        team_places = [await message_of(team.store, rid) for rid in team_rids]
        team_specs = [
            {"channel": channel, "ts": ts, "user": slack.users[n], "text": "Approve"}
            for channel, ts in team_places
            for n in (0, 1)
        ]
        votes = []
        for first in range(0, len(team_specs), 500):
            votes.extend(await slack.clicks(team_specs[first : first + 500]))

        keys = [(pattern, name) for pattern, _ in patterns for name in apps]
        counted: dict[tuple[str, str], list[float]] = {key: [] for key in keys}
        medians: dict[tuple[str, str], list[float]] = {key: [] for key in keys}
        order = list(apps)
        used = 0
        for r in range(runs):
            for pattern, pace in patterns:
                chunk = payloads[used : used + per_pattern]
                chunk_ids = rids[used : used + per_pattern]
                vote_chunk = votes[used : used + per_pattern]
                embed_chunk = embed_payloads[used : used + per_pattern]
                embed_ids = embed_rids[used : used + per_pattern]
                chunks = {VOTE: vote_chunk, EMBED: embed_chunk}
                used += per_pattern
                schedule = turns(order, warmup, n, block, first=r)
                requests = [
                    signed(served[name].url, chunks.get(name, chunk)[i]) for name, i in schedule
                ]
                samples = await send_paced(requests, pace)
                latencies: dict[str, list[float]] = {name: [] for name in order}
                for (name, i), sample in zip(schedule, samples, strict=True):
                    if sample.status != 200:
                        raise RuntimeError(f"{name}: click {i} answered {sample.status}")
                    if i >= warmup:
                        latencies[name].append(sample.latency)
                for name in order:
                    counted[(pattern, name)].extend(latencies[name])
                    medians[(pattern, name)].append(summarize(latencies[name]).p50)
                await asks.wait_returned(chunk_ids)
                await embed_asks.wait_returned(embed_ids)

        answered = sum(1 for t in asks.tasks.values() if t.done() and not t.exception())
        decided = sum(1 for t in team_asks.tasks.values() if t.done() and not t.exception())
        embed_answered = sum(1 for t in embed_asks.tasks.values() if t.done() and not t.exception())
        await embedded.aclose(grace=10)
        await provider.aclose(grace=10)
        await team.aclose(grace=10)
        for server in served.values():
            await server.close()
        stats = await slack.stats()

    rows: list[Sequence[str]] = []
    for pattern, _ in patterns:
        floor = summarize(counted[(pattern, FLOOR)])
        for name in (DEFAULT, FLOOR, HANDLER, BOT, VOTE, EMBED):
            s = summarize(counted[(pattern, name)])
            rows.append(
                [
                    f"{pattern}: {name}",
                    str(s.n),
                    fmt_ms(s.p50),
                    fmt_ms(s.p99),
                    fmt_ms(s.mean),
                    fmt_ms(s.max),
                    f"{s.p50 / floor.p50:.2f}x",
                    " / ".join(fmt_ms(m) for m in medians[(pattern, name)]),
                ]
            )
    print_table(
        f"Interaction cost: signed block_actions click -> ack; {runs} runs x {n} counted "
        f"(+{warmup} warm-up) per app and load pattern; times in ms",
        ["what", "n", "p50", "p99", "mean", "max", "p50 vs floor", "p50 per run"],
        rows,
    )
    paced = patterns[0][0]
    floor = summarize(counted[(paced, FLOOR)])
    bot = summarize(counted[(paced, BOT)])
    default = summarize(counted[(paced, DEFAULT)])
    print()
    print(
        f"target bot p50 <= 1.5x floor: {bot.p50 / floor.p50:.2f}x "
        f"({fmt_ms(bot.p50)} ms vs {fmt_ms(floor.p50)} ms) -> "
        f"{'met' if bot.p50 <= 1.5 * floor.p50 else 'MISSED'}"
    )
    print(
        f"target bot p99 < 5 ms: {fmt_ms(bot.p99)} ms -> {'met' if bot.p99 < 0.005 else 'MISSED'}"
    )
    vote = summarize(counted[(paced, VOTE)])
    print(
        f"target vote p50 <= 1.5x floor: {vote.p50 / floor.p50:.2f}x "
        f"({fmt_ms(vote.p50)} ms; p99 {fmt_ms(vote.p99)} ms) -> "
        f"{'met' if vote.p50 <= 1.5 * floor.p50 else 'MISSED'}"
    )
    embed = summarize(counted[(paced, EMBED)])
    print(
        f"target embedded p50 <= 2x floor (goal 1.5x) and <= bot's: "
        f"{embed.p50 / floor.p50:.2f}x ({fmt_ms(embed.p50)} ms; p99 {fmt_ms(embed.p99)} ms; "
        f"bot {fmt_ms(bot.p50)} ms) -> "
        f"{'met' if embed.p50 <= 2 * floor.p50 and embed.p50 <= bot.p50 else 'MISSED'}"
    )
    print(f"bolt default p50 / bot p50: {default.p50 / bot.p50:.1f}x")
    closed_floor = summarize(counted[("closed loop", FLOOR)])
    closed_bot = summarize(counted[("closed loop", BOT)])
    print(
        f"closed loop (no idle wake-ups): bot p50 {fmt_ms(closed_bot.p50)} ms = "
        f"{closed_bot.p50 / closed_floor.p50:.2f}x the floor's {fmt_ms(closed_floor.p50)} ms"
    )
    print(
        f"checks: {answered}/{len(rids)} asks (embedded: {embed_answered}/{len(embed_rids)}) "
        f"answered by their click, {decided}/"
        f"{len(team_rids)} team reviews decided by their second vote; Web API calls "
        f"{stats['calls']}; messages still showing buttons: {stats['with_buttons']}"
    )
    print(machine_line())
    print(f"(took {time.perf_counter() - started:.0f} s)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="counted clicks per app per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=100.0, help="clicks per second")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument(
        "--block",
        type=int,
        default=BLOCK,
        help="counted clicks per app per turn (0: each app's n in one go, app after app)",
    )
    cores.add_option(parser)
    args = parser.parse_args(argv)
    cores.place(args.cores)
    asyncio.run(with_stores(bench(args.n, args.runs, args.rate, args.warmup, args.block)))


if __name__ == "__main__":
    main()
