"""Interaction cost: a signed ``block_actions`` click, from the HTTP request to the ack.

``python -m bench.interaction [--n 500] [--runs 3] [--rate 100] [--warmup 50]``

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
- ``bot``: ``SlackQuestionProvider`` on an app with ``process_before_response=True`` (memory
  store): verify, parse, authorize, compare-and-set, resolve the waiting ``ask()``, ack. The
  bot first asks one question per click, so every click really answers a pending question.
- ``team-review vote``: the same for plan reviews under a policy of two approvals: every
  click is a vote (the first keeps the review open and re-renders its tally, the second
  decides it).

The Web API stand-in runs in its own process. Each run sends ``--warmup`` clicks (not counted)
then ``--n`` to each app, in a rotating order; the table pools the counted samples of every
run and shows each run's median too. Targets at 100 clicks/s: the bot's p50 and a vote's within
1.5x the floor, the bot's p99 under 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from slack_bolt.async_app import AsyncApp

from adapters.slack.provider import SlackQuestionProvider
from bench.common import (
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
from bot import heap
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

DEFAULT = "bolt default (ack only)"
FLOOR = "bolt process_before_response (ack only)"
HANDLER = "bare ack, the bot's handler"
BOT = "bot: verify, parse, authorize, apply, resolve, ack"
VOTE = "bot: team-review vote (quorum 2)"


async def bench(n: int, runs: int, rate: float, warmup: int) -> None:
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
        served = {
            name: await serve_bolt(app, bolts_adapter=name in (DEFAULT, FLOOR))
            for name, app in apps.items()
        }
        heap.settle()  # as the bot does once started (python -m bot)

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
            rotated = order[r % len(order) :] + order[: r % len(order)]
            for pattern, pace in patterns:
                chunk = payloads[used : used + per_pattern]
                chunk_ids = rids[used : used + per_pattern]
                used += per_pattern
                vote_chunk = votes[used - per_pattern : used]
                for name in rotated:
                    sent = vote_chunk if name == VOTE else chunk
                    requests = [signed(served[name].url, p) for p in sent]
                    samples = await send_paced(requests, pace)
                    bad = [s.status for s in samples if s.status != 200]
                    if bad:
                        raise RuntimeError(f"{name}: {len(bad)} requests answered {bad[:5]}")
                    latencies = [s.latency for s in samples[warmup:]]
                    counted[(pattern, name)].extend(latencies)
                    medians[(pattern, name)].append(summarize(latencies).p50)
                    if name == BOT:
                        await asks.wait_returned(chunk_ids)

        answered = sum(1 for t in asks.tasks.values() if t.done() and not t.exception())
        decided = sum(1 for t in team_asks.tasks.values() if t.done() and not t.exception())
        await provider.aclose(grace=10)
        await team.aclose(grace=10)
        for server in served.values():
            await server.close()
        stats = await slack.stats()

    rows: list[Sequence[str]] = []
    for pattern, _ in patterns:
        floor = summarize(counted[(pattern, FLOOR)])
        for name in (DEFAULT, FLOOR, HANDLER, BOT, VOTE):
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
    print(f"bolt default p50 / bot p50: {default.p50 / bot.p50:.1f}x")
    closed_floor = summarize(counted[("closed loop", FLOOR)])
    closed_bot = summarize(counted[("closed loop", BOT)])
    print(
        f"closed loop (no idle wake-ups): bot p50 {fmt_ms(closed_bot.p50)} ms = "
        f"{closed_bot.p50 / closed_floor.p50:.2f}x the floor's {fmt_ms(closed_floor.p50)} ms"
    )
    print(
        f"checks: {answered}/{len(rids)} asks answered by their click, {decided}/"
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
    args = parser.parse_args(argv)
    asyncio.run(with_stores(bench(args.n, args.runs, args.rate, args.warmup)))


if __name__ == "__main__":
    main()
