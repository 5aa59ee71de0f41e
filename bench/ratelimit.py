"""The bot under Slack's real rate limits, time-scaled: posting, updating, two processes.

``python -m bench.ratelimit [--scale 20] [--posts 500] [--messages 50] [--clicks 2000]``

The Web API stand-in (its own process) enforces Slack's published limits ``--scale`` times
faster (a Slack minute lasts 60/scale real seconds): Tier 3 50 ``chat.update`` a minute,
``chat.postMessage`` one a second per channel (a burst of 3) under 300 a minute for the
workspace; over a limit it answers 429 with ``Retry-After``. The bot's client paces its
calls by the same table at the same scale.

1. ``--posts`` questions asked at once into one channel, then all answered: how many were
   posted, how many failed (``DELIVERY_FAILED``), 429s, and the posting time against the
   limit's minimum ((posts - burst) seconds, scaled).
2. ``--clicks`` clicks and form ticks within one Slack minute on ``--messages`` forms (each
   form: ticks of a multi-select question, then Submit), at ``--click-scale``: ``chat.update``
   calls against Tier 3's budget, and whether every message's last revision is its final
   state.
3. Two processes sharing Redis (``--redis``), each posting and updating in the same channel
   through its own scheduler with the Redis budget; then the same with a budget each (no
   Redis) for contrast: the combined rate against one app's budget.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import secrets
import sys
import time
from collections.abc import Sequence
from typing import Any

from adapters.slack.clicks.bolt_app import close_web_client
from adapters.slack.pacing.budget import Budget, RedisBudget
from adapters.slack.pacing.paced import PacedWebClient
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.render.blocks.message import render_final
from bench.common import (
    Asks,
    StandIn,
    bot_app,
    machine_line,
    message_of,
    print_table,
    send_paced,
    serve_bolt,
    signed,
    spawn,
    web_client,
)
from bot.questions.errors import DELIVERY_FAILED, UserQuestionError
from bot.questions.service import UserQuestionService


def _form(i: int) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "regions",
                "question": f"Which regions get build {i}?",
                "multiSelect": True,
                "options": [{"label": f"region {k}"} for k in range(5)],
            },
            {"id": "notify", "question": "Notify the team?", "options": [{"label": "Yes"}]},
        ]
    }


async def _bot(slack: StandIn, limits: SlackLimits) -> tuple[Any, SlackQuestionProvider, Any]:
    app = await bot_app(slack.url, slack.token, limits=limits)
    provider = SlackQuestionProvider(app, channel=slack.channel)
    service = UserQuestionService()
    service.register_provider(provider)
    served = await serve_bolt(app)
    return service, provider, served


async def _until_final(slack: StandIn, within: float) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        stats = await slack.stats()
        if stats["with_buttons"] == 0 or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.25)


async def posting(scale: float, count: int) -> list[list[str]]:
    """Row 1: ``count`` questions at once into one channel, then all answered."""
    limits = SlackLimits(time_scale=scale)
    async with StandIn(scale=scale) as slack:
        service, provider, served = await _bot(slack, limits)
        asks = Asks(service)
        began = time.time()
        rids = await asks.start(count, batch=count, within=10 * count / scale + 60)
        stats = await slack.stats()
        posting_time = stats["posts_at"][1] - began
        minimum = limits.real((count - limits.post_burst) * limits.post_interval)
        places = [await message_of(provider.store, rid) for rid in rids]
        specs = [
            {"channel": c, "ts": ts, "user": slack.users[i % 3], "text": "Yes"}
            for i, (c, ts) in enumerate(places)
        ]
        payloads = await slack.clicks(specs)
        samples = await send_paced([signed(served.url, p) for p in payloads], 200.0)
        await asyncio.gather(*asks.tasks.values(), return_exceptions=True)
        failed = [
            t.exception()
            for t in asks.tasks.values()
            if isinstance(t.exception(), UserQuestionError)
            and t.exception().code == DELIVERY_FAILED  # type: ignore[union-attr]
        ]
        stats = await _until_final(slack, 20 * count / scale + 60)
        await provider.aclose(grace=5)
        await served.close()
    calls = sum(stats["calls"].values())
    limited = sum(stats["limited"].values())
    posted = stats["calls"].get("chat.postMessage", 0) - stats["limited"].get("chat.postMessage", 0)
    return [
        [
            f"{count} questions at once into one channel, answered",
            f"{posted} posted, {len(failed)} DELIVERY_FAILED, "
            f"{sum(1 for s in samples if s.status == 200)} clicks acked",
            f"429s {limited} of {calls} calls ({100 * limited / calls:.2f} %)",
            f"posting {posting_time:.2f} s vs minimum {minimum:.2f} s "
            f"({posting_time / minimum:.2f}x)",
            f"messages still with buttons: {stats['with_buttons']}",
        ]
    ]


async def updating(scale: float, messages: int, clicks: int) -> list[list[str]]:
    """Row 2: ``clicks`` ticks and submits within one Slack minute on ``messages`` forms."""
    limits = SlackLimits(time_scale=scale)
    async with StandIn(scale=scale) as slack:
        service, provider, served = await _bot(slack, limits)
        asks = Asks(service, make=_form)
        rids = await asks.start(messages, batch=messages, within=10 * messages / scale + 60)
        places = [await message_of(provider.store, rid) for rid in rids]
        rounds = max(0, clicks // messages - 1)
        specs = [
            {"channel": c, "ts": ts, "user": slack.users[i % 3], "text": f"region {r % 5}"}
            for r in range(rounds)
            for i, (c, ts) in enumerate(places)
        ]
        # Each form is submitted by the person who ticked it: Submit takes the submitter's
        # own choices (an empty Submit opens a confirmation instead).
        specs += [
            {"channel": c, "ts": ts, "user": slack.users[i % 3], "text": "Submit"}
            for i, (c, ts) in enumerate(places)
        ]
        payloads: list[str] = []
        for first in range(0, len(specs), 500):
            payloads.extend(await slack.clicks(specs[first : first + 500]))
        minute = limits.real(limits.window)
        began = time.monotonic()
        samples = await send_paced([signed(served.url, p) for p in payloads], len(specs) / minute)
        sent_in = time.monotonic() - began
        await asyncio.gather(*asks.tasks.values(), return_exceptions=True)
        answered = sum(1 for t in asks.tasks.values() if t.exception() is None)
        stats = await _until_final(slack, 4 * minute + 60)
        elapsed = time.monotonic() - began
        finals = 0
        for rid, (_, ts) in zip(rids, places, strict=True):
            record = await provider.store.get(rid)
            if record is not None and not record.is_open:
                finals += stats["texts"].get(ts) == render_final(record).text
        await provider.aclose(grace=5)
        await served.close()
    updates = stats["calls"].get("chat.update", 0) - stats["limited"].get("chat.update", 0)
    budget = 50 * math.ceil(elapsed / minute)
    return [
        [
            f"{len(specs)} clicks and ticks in {sent_in:.2f} s "
            f"({sent_in / minute:.2f} Slack minutes) on {messages} forms",
            f"{answered}/{messages} answered, "
            f"{sum(1 for s in samples if s.status == 200)} clicks acked",
            f"chat.update {updates} (busiest Slack minute {stats['busiest'].get('chat.update', 0)}"
            f" of 50; Tier 3 budget over {elapsed:.1f} s: {budget}); "
            f"429s {sum(stats['limited'].values())}",
            f"last revision = final state: {finals}/{messages}",
            f"messages still with buttons: {stats['with_buttons']}",
        ]
    ]


async def sharing(scale: float, redis_url: str, per_process: int) -> list[list[str]]:
    """Row 3: two processes posting and updating in one channel, with and without Redis."""
    rows = []
    for shared in (True, False):
        async with StandIn(scale=scale) as slack:
            prefix = f"bench-{secrets.token_hex(4)}"
            args = [slack.url, slack.token, slack.channel, f"{scale:g}", str(per_process)]
            budget = [redis_url, prefix] if shared else ["-", "-"]
            peers = [await spawn("-m", "bench.ratelimit", "peer", *args, *budget) for _ in "ab"]
            outputs = [json.loads((await p.communicate())[0]) for p in peers]
            stats = await slack.stats()
            if shared:
                await _forget(redis_url, prefix)
        busiest = stats["busiest"]
        rows.append(
            [
                f"two processes, {per_process} posts + {3 * per_process} updates each, "
                + ("one Redis budget" if shared else "a budget each (no Redis)"),
                f"429s {sum(stats['limited'].values())} of {sum(stats['calls'].values())}",
                f"busiest Slack minute: chat.update {busiest.get('chat.update', 0)} of 50, "
                f"chat.postMessage {busiest.get('chat.postMessage', 0)} of 60",
                f"{sum(o['sent'] for o in outputs)} sent, "
                f"{sum(o['ratelimited'] for o in outputs)} retried after 429",
                f"took {max(o['elapsed'] for o in outputs):.1f} s",
            ]
        )
    return rows


async def _forget(redis_url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    admin = aioredis.Redis.from_url(redis_url)
    try:
        keys = [k async for k in admin.scan_iter(f"{prefix}:*")]
        if keys:
            await admin.delete(*keys)
    finally:
        await admin.aclose()


async def _peer(argv: Sequence[str]) -> None:
    """One process of row 3: posts, then updates every message three times, in rounds."""
    url, token, channel, scale, count, redis_url, prefix = argv
    budget: Budget | None = None
    if redis_url != "-":
        budget = RedisBudget(redis_url, prefix=prefix)
    limits = SlackLimits(time_scale=float(scale))
    client = web_client(url, token, limits=limits, budget=budget)
    assert isinstance(client, PacedWebClient)
    began = time.monotonic()
    try:
        posted = await asyncio.gather(
            *(client.chat_postMessage(channel=channel, text=f"{i}") for i in range(int(count)))
        )
        for v in range(3):  # three rounds: each message's versions in order
            await asyncio.gather(
                *(client.chat_update(channel=channel, ts=p["ts"], text=f"v{v}") for p in posted)
            )
    finally:
        elapsed = time.monotonic() - began
        scheduler = client.scheduler
        await close_web_client(client)
    print(
        json.dumps(
            {"sent": scheduler.sent, "ratelimited": scheduler.ratelimited, "elapsed": elapsed}
        )
    )


async def bench(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    rows: list[list[str]] = []
    if "1" in args.rows:
        rows += await posting(args.scale, args.posts)
    if "2" in args.rows:
        rows += await updating(args.click_scale, args.messages, args.clicks)
    if "3" in args.rows:
        rows += await sharing(args.scale, args.redis, args.per_process)
    print_table(
        f"Slack's rate limits enforced by the stand-in, {args.scale:g}x faster than real time",
        ["workload", "outcome", "limits", "time / budget", "final"],
        rows,
    )
    print(machine_line())
    print(f"(took {time.perf_counter() - started:.0f} s)")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["peer"]:
        asyncio.run(_peer(argv[1:]))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scale", type=float, default=20.0, help="time scale of Slack's limits")
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--clicks", type=int, default=2000)
    parser.add_argument(
        "--click-scale",
        type=float,
        default=3.0,
        help="time scale of the clicks row (its Slack minute of clicks must fit this machine)",
    )
    parser.add_argument("--per-process", type=int, default=100)
    parser.add_argument("--rows", default="123", help="which rows to run, e.g. 12")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    asyncio.run(bench(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
