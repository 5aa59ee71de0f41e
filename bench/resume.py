"""Click-to-resume: from the click's HTTP request to the awaiting ``ask()`` returning.

``python -m bench.resume [--n 300] [--runs 3] [--rate 100] [--warmup 30] [--redis URL]
[--cores split|shared]``

Clicks are signed ``block_actions`` requests POSTed at ``--rate`` per second by a load
generator in its own process, which notes ``time.time()`` as it sends each; the process
holding the ``ask()`` notes ``time.time()`` as each returns (same machine, same clock). Two
ways:

- ``in process``: one bot process (memory store) owns the asks and receives the clicks;
- ``through Redis``: process A (a real subprocess, ``python -m bench.resume asker``) owns the
  asks; process B (this one) serves the bolt app that receives the clicks. Both use
  ``RedisPendingStore`` with one fresh key prefix and post to one Web API stand-in (its own
  process); B's compare-and-set publishes the ending, A's subscriber resolves its waiter.

With ``--cores split`` (the default on two or more cores) this process runs on one core and
every process it starts (the stand-in, the load generator, process A) on the others
(``bench.cores``); Redis is not moved.

``over HTTP`` (``bench.longpoll``): the bot as ``python -m bot`` runs it (HTTP mode, its
default SQLite store) in this process, the agent's ``GET ?wait=`` long-polls from a process of
its own; click -> the long-poll returns, split at the bot's ack. Target: p50 <= 4 ms.

Baselines from the same run: the ack of a bare bolt app with ``process_before_response=True``,
served as bolt serves itself on aiohttp (its own ``to_bolt_request``),
(the same payloads: nothing can resume before its click is even acked) and a Redis ``PING``
round trip. Targets: p50 under 2 ms in process, under 10 ms through Redis.

The rows "from the request written" time the same clicks from when the load generator
wrote each request's bytes to its socket (aiohttp's ``on_request_chunk_sent``) instead of
when it began the request: they leave out its own work before the write (building the
request and taking a kept-alive connection from its pool: about a third of a millisecond on
a 2-core machine, where it competes with the bot for a core), which no click from Slack
costs the bot. The floor's row there is its round trip (``perf_counter``) less that work
(``time.time``: the same rate, so the difference holds). The targets are judged on the
first rows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from slack_bolt.async_app import AsyncApp

from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.stores import PendingStore
from bench import cores, longpoll
from bench.common import (
    Asks,
    StandIn,
    Stats,
    bare_app,
    bench_store,
    bot_app,
    close_clients,
    fmt_ms,
    machine_line,
    message_of,
    print_table,
    send_paced,
    serve_bolt,
    signed,
    spawn,
    summarize,
    web_client,
    with_stores,
)
from bot.questions.service import UserQuestionService

DEFAULT_REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


async def _provider(
    url: str, token: str, channel: str, store: PendingStore | None
) -> tuple[AsyncApp, SlackQuestionProvider, UserQuestionService]:
    app = await bot_app(url, token, pace=False)
    provider = SlackQuestionProvider(app, channel=channel, store=store, paced=False)
    service = UserQuestionService()
    service.register_provider(provider)
    return app, provider, service


async def _clicks(slack: StandIn, store: PendingStore, rids: Sequence[str]) -> list[str]:
    places = [await message_of(store, rid) for rid in rids]
    specs = [
        {"channel": c, "ts": ts, "user": slack.users[i % len(slack.users)], "text": "Yes"}
        for i, (c, ts) in enumerate(places)
    ]
    payloads: list[str] = []
    for first in range(0, len(specs), 500):
        payloads.extend(await slack.clicks(specs[first : first + 500]))
    return payloads


# -- process A: owns the asks (``python -m bench.resume asker ...``) -------------------------


async def _asker_main(args: argparse.Namespace) -> None:
    from adapters.slack.stores.redis import RedisPendingStore

    store = RedisPendingStore(args.redis, prefix=args.prefix, process_id="bench-asker")
    await store.start()
    _, provider, service = await _provider(args.url, args.token, args.channel, store)

    def report(rid: str, at: float) -> None:
        sys.stdout.write(json.dumps({"returned": rid, "at": at}) + "\n")
        sys.stdout.flush()

    asks = Asks(service, on_return=report)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:  # each line from B: how many asks to start; EOF: shut down
        line = await reader.readline()
        if not line:
            break
        rids = await asks.start(int(line))
        sys.stdout.write(json.dumps({"rids": rids}) + "\n")
        sys.stdout.flush()
    await asks.cancel_all()
    await provider.aclose(grace=5)
    await store.close()
    await close_clients()


class _Asker:
    """B's handle on process A."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.returned: dict[str, float] = {}
        self._batches: asyncio.Queue[list[str]] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                return
            message = json.loads(line)
            if "rids" in message:
                self._batches.put_nowait(message["rids"])
            else:
                self.returned[message["returned"]] = message["at"]
                self._changed.set()

    async def start(self, count: int) -> list[str]:
        self.proc.stdin.write(f"{count}\n".encode())
        await self.proc.stdin.drain()
        return await asyncio.wait_for(self._batches.get(), 120)

    async def wait_returned(self, rids: Sequence[str], within: float = 30) -> None:
        async with asyncio.timeout(within):
            while not all(rid in self.returned for rid in rids):
                self._changed.clear()
                await self._changed.wait()

    async def close(self) -> None:
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 20)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


# -- process B: the bench --------------------------------------------------------------------


async def _phase(
    payloads: Sequence[Any], url: str, rate: float, warmup: int
) -> tuple[list[Any], list[float]]:
    samples = await send_paced([signed(url, p) for p in payloads], rate)
    bad = [s.status for s in samples if s.status != 200]
    if bad:
        raise RuntimeError(f"{len(bad)} clicks answered {bad[:5]}")
    return samples, [s.latency for s in samples[warmup:]]


async def bench(n: int, runs: int, rate: float, warmup: int, redis_url: str) -> None:
    from adapters.slack.stores.redis import RedisPendingStore

    started = time.perf_counter()
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    per_run = warmup + n
    resume: dict[str, list[float]] = {"in process": [], "through Redis": []}
    from_written: dict[str, list[float]] = {"in process": [], "through Redis": [], "floor": []}
    acks: dict[str, list[float]] = {"in process": [], "through Redis": [], "floor": []}
    medians: dict[str, list[float]] = {"in process": [], "through Redis": []}
    pings: list[float] = []
    polls: list[float] = []
    poll_acks: list[float] = []
    admin = aioredis.from_url(redis_url)
    async with StandIn() as slack:
        floor = await serve_bolt(
            bare_app(web_client(slack.url, slack.token), process_before_response=True),
            bolts_adapter=True,
        )
        # in process
        app, provider, service = await _provider(
            slack.url, slack.token, slack.channel, await bench_store()
        )
        local = await serve_bolt(app)
        asks = Asks(service)
        # through Redis: B serves the clicks, A (a subprocess) owns the asks
        store_b = RedisPendingStore(redis_url, prefix=prefix, process_id="bench-clicks")
        await store_b.start()
        app_b, provider_b, _ = await _provider(slack.url, slack.token, slack.channel, store_b)
        remote = await serve_bolt(app_b)
        asker = _Asker(
            await spawn(
                "-m", "bench.resume", "asker", "--url", slack.url, "--token", slack.token,
                "--channel", slack.channel, "--redis", redis_url, "--prefix", prefix,
            )
        )  # fmt: skip
        try:
            for _ in range(runs):
                rids = await asks.start(per_run)
                payloads = await _clicks(slack, provider.store, rids)
                floor_samples, floor_acks = await _phase(payloads, floor.url, rate, warmup)
                acks["floor"].extend(floor_acks)
                from_written["floor"].extend(
                    s.latency - (s.written_at - s.sent_at) for s in floor_samples[warmup:]
                )

                samples, ack = await _phase(payloads, local.url, rate, warmup)
                await asks.wait_returned(rids)
                took = [asks.returned[r] - s.sent_at for r, s in zip(rids, samples, strict=True)]
                resume["in process"].extend(took[warmup:])
                from_written["in process"].extend(
                    asks.returned[r] - s.written_at
                    for r, s in zip(rids[warmup:], samples[warmup:], strict=True)
                )
                medians["in process"].append(summarize(took[warmup:]).p50)
                acks["in process"].extend(ack)

                rids = await asker.start(per_run)
                payloads = await _clicks(slack, store_b, rids)
                samples, ack = await _phase(payloads, remote.url, rate, warmup)
                await asker.wait_returned(rids)
                took = [asker.returned[r] - s.sent_at for r, s in zip(rids, samples, strict=True)]
                resume["through Redis"].extend(took[warmup:])
                from_written["through Redis"].extend(
                    asker.returned[r] - s.written_at
                    for r, s in zip(rids[warmup:], samples[warmup:], strict=True)
                )
                medians["through Redis"].append(summarize(took[warmup:]).p50)
                acks["through Redis"].extend(ack)

                took, ack = await longpoll.measure(slack, n, warmup, rate)
                polls.extend(took)
                poll_acks.extend(ack)

                for _ in range(200):
                    t0 = time.perf_counter()
                    await admin.ping()
                    pings.append(time.perf_counter() - t0)
        finally:
            await asker.close()
            await provider.aclose(grace=10)
            await provider_b.aclose(grace=10)
            await store_b.close()
            for served in (floor, local, remote):
                await served.close()
            keys = [k async for k in admin.scan_iter(match=f"{prefix}:*", count=500)]
            if keys:
                await admin.delete(*keys)
            await admin.aclose()
        stats = await slack.stats()

    floor_stats = summarize(acks["floor"])
    ping = summarize(pings)

    def row(what: str, s: Stats, base: Stats, base_name: str, per_run: str = "") -> list[str]:
        return [
            what, str(s.n), fmt_ms(s.p50), fmt_ms(s.p99), fmt_ms(s.mean), fmt_ms(s.max),
            f"{s.p50 / base.p50:.1f}x {base_name}", per_run,
        ]  # fmt: skip

    rows = [
        row("baseline: bare bolt ack (process_before_response)", floor_stats, floor_stats, "ack"),
        row("baseline: Redis PING round trip", ping, ping, "PING"),
    ]
    for way in ("in process", "through Redis"):
        rows.append(
            row(
                f"click -> ask() returns, {way}",
                summarize(resume[way]),
                floor_stats,
                "ack",
                " / ".join(fmt_ms(m) for m in medians[way]),
            )
        )
        rows.append(row(f"  (the bot's ack of those clicks, {way})", summarize(acks[way]),
                        floor_stats, "ack"))  # fmt: skip
    poll, poll_ack = summarize(polls), summarize(poll_acks)
    rows.append(row("click -> HTTP long-poll returns (SQLite)", poll, floor_stats, "ack"))
    rows.append(row("  (the bot's ack of those clicks)", poll_ack, floor_stats, "ack"))
    written_floor = summarize(from_written["floor"])
    rows.append(row("from the request written: bare bolt ack", written_floor, written_floor, "ack"))
    for way in ("in process", "through Redis"):
        rows.append(
            row(f"from the request written: ask() returns, {way}",
                summarize(from_written[way]), written_floor, "ack")
        )  # fmt: skip
    print_table(
        f"Click-to-resume: {runs} runs x {n} counted clicks (+{warmup} warm-up) per way, "
        f"{rate:g} clicks/s; times in ms",
        ["what", "n", "p50", "p99", "mean", "max", "p50 vs", "p50 per run"],
        rows,
    )
    local_p50 = summarize(resume["in process"]).p50
    redis_p50 = summarize(resume["through Redis"]).p50
    print()
    print(
        f"target in process p50 < 2 ms: {fmt_ms(local_p50)} ms -> "
        f"{'met' if local_p50 < 0.002 else 'MISSED'}"
    )
    print(
        f"target through Redis p50 < 10 ms: {fmt_ms(redis_p50)} ms -> "
        f"{'met' if redis_p50 < 0.010 else 'MISSED'}"
    )
    print(
        f"target click -> HTTP long-poll p50 <= 4 ms: {fmt_ms(poll.p50)} ms -> "
        f"{'met' if poll.p50 <= 0.004 else 'MISSED'}; where it goes: click -> ack "
        f"{fmt_ms(poll_ack.p50)} ms (verify, parse, authorize, the SQLite compare-and-set), "
        f"ack -> long-poll answered {fmt_ms(poll.p50 - poll_ack.p50)} ms (the waiter's wake, "
        f"the trail read inline, the JSON, the agent's read)"
    )
    building = summarize([a - w for a, w in zip(acks["floor"], from_written["floor"], strict=True)])
    print(
        f"the load generator's own work before each write: p50 {fmt_ms(building.p50)} ms; "
        f"from the write, ask() returns in process at p50 "
        f"{fmt_ms(summarize(from_written['in process']).p50)} ms"
    )
    print(
        f"checks: Web API calls {stats['calls']}; messages still showing buttons: "
        f"{stats['with_buttons']}"
    )
    print(machine_line())
    print(f"(took {time.perf_counter() - started:.0f} s)")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["asker"]:
        parser = argparse.ArgumentParser()
        for name in ("--url", "--token", "--channel", "--redis", "--prefix"):
            parser.add_argument(name, required=True)
        asyncio.run(_asker_main(parser.parse_args(argv[1:])))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="counted clicks per way per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=100.0, help="clicks per second")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--redis", default=DEFAULT_REDIS, help="Redis URL (REDIS_URL)")
    cores.add_option(parser)
    args = parser.parse_args(argv)
    cores.place(args.cores)
    asyncio.run(with_stores(bench(args.n, args.runs, args.rate, args.warmup, args.redis)))


if __name__ == "__main__":
    main()
