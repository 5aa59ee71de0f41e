"""Answers pushed to agents: click -> webhook received, and click -> ``bot.client.ask`` returns.

``python -m bench.reach [--n 100] [--warmup 10] [--rate 50]``

The bot runs in this process as ``python -m bot`` runs it (HTTP mode, SQLite store in a
file); the agent is a process of its own (``python -m bench.reach agent URL TOKEN``): it
serves a webhook receiver on loopback and runs ``bot.client.ask`` calls, noting
``time.time()`` as each delivery arrives and each ``ask`` returns. Clicks come from the load
generator (``bench.common.send_paced``), signed as Slack sends them. Beside them, in the same
run, ``bench.longpoll``: click -> a bare ``GET ?wait=`` long-poll returns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from bench import longpoll
from bench.common import (
    SECRET,
    StandIn,
    fmt_ms,
    machine_line,
    print_table,
    send_paced,
    signed,
    spawn,
    summarize,
)
from bench.longpoll import QUESTION, SPEC, TOKEN
from bot.app.runtime import start
from bot.client import ask
from bot.settings.config import Settings


async def _agent_main(url: str, token: str) -> None:
    """The agent: a webhook receiver, and one ``ask`` per key read from stdin."""

    async def hook(request: web.Request) -> web.Response:
        print(json.dumps({"hook": request.headers["X-Webhook-Id"], "at": time.time()}), flush=True)
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(json.dumps({"url": f"http://127.0.0.1:{runner.addresses[0][1]}/hook"}), flush=True)

    async def asking(key: str) -> None:
        await ask(QUESTION["questions"], url=url, token=token, key=key)
        print(json.dumps({"returned": key, "at": time.time()}), flush=True)

    tasks = []
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        tasks += [asyncio.ensure_future(asking(key)) for key in json.loads(line)]
    await asyncio.gather(*tasks, return_exceptions=True)
    await runner.cleanup()


async def _measure(slack: StandIn, n: int, warmup: int, rate: float) -> dict[str, list[float]]:
    """Click -> webhook received, and click -> ``ask`` returned, ``n`` each after ``warmup``."""
    took: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(
            mode="http",
            slack_bot_token=slack.token,
            slack_signing_secret=SECRET,
            slack_channel=slack.channel,
            slack_api_url=slack.url,
            port=0,
            bot_api_token=TOKEN,
            store_path=str(Path(folder) / "store.db"),
            slack_rate_scale=1000.0,
            max_polls_per_token=10_000,  # one agent holds every long-poll
            webhook_hosts=("127.0.0.1",),
            webhook_allow_private=True,
        )
        runtime = await start(settings)
        agent = await spawn("-m", "bench.reach", "agent", runtime.url, TOKEN)
        seen: dict[str, float] = {}
        arrived = asyncio.Event()

        async def read() -> None:
            while line := await agent.stdout.readline():
                message = json.loads(line)
                if "at" in message:
                    seen[message.get("hook") or message["returned"]] = message["at"]
                    arrived.set()

        hook_url = json.loads(await agent.stdout.readline())["url"]
        reading = asyncio.ensure_future(read())
        try:
            for way in ("webhook", "client"):
                count = warmup + n
                keys = [f"{way}-{i}-{time.time_ns()}" for i in range(count)]
                ids = [runtime.provider.request_id_for(f"api:{key}") for key in keys]
                if way == "webhook":
                    body = {**QUESTION, "callback": hook_url}
                    await asyncio.gather(*(_post(runtime.url, body, key) for key in keys))
                else:
                    agent.stdin.write(json.dumps(keys).encode() + b"\n")
                    await agent.stdin.drain()
                asked = [await _posted(runtime, rid) for rid in ids]
                for _ in range(1200):  # every ask long-polling before the first click
                    if way == "webhook" or runtime.gateway.polls.count >= count:
                        break
                    await asyncio.sleep(0.05)
                specs = [
                    {"channel": m[0], "ts": m[1], "user": slack.users[i % len(slack.users)]}
                    for i, m in enumerate(asked)
                ]
                clicks = [{**s, "text": "Yes"} for s in specs]
                payloads = await slack.clicks([{k: c[k] for k in SPEC} for c in clicks])
                url = f"{runtime.url}/slack/events"
                samples = await send_paced([signed(url, p) for p in payloads], rate)
                mark = keys if way == "client" else ids
                async with asyncio.timeout(60):
                    while not all(k in seen for k in mark):
                        arrived.clear()
                        await arrived.wait()
                times = [seen[k] - s.sent_at for k, s in zip(mark, samples, strict=True)]
                took[way] = times[warmup:]
        finally:
            agent.stdin.close()
            await asyncio.wait_for(agent.wait(), 20)
            reading.cancel()
            await runtime.stop()
    return took


async def _post(url: str, body: dict[str, Any], key: str) -> None:
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": key}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/questions", json=body, headers=headers) as response,
    ):
        assert response.status == 201, await response.text()


async def _posted(runtime: Any, request_id: str) -> tuple[str, str]:
    """Where question ``request_id``'s message is, once it is posted."""
    async with asyncio.timeout(60):
        while True:
            status = await runtime.provider.status(request_id)
            if status is not None and status.message is not None:
                return status.message.channel, status.message.ts
            await asyncio.sleep(0.05)


async def _main(n: int, warmup: int, rate: float) -> None:
    async with StandIn() as slack:
        took = await _measure(slack, n, warmup, rate)
        polled, _ = await longpoll.measure(slack, n, warmup, rate)
    rows = []
    for what, samples in (
        ("click -> webhook received", took["webhook"]),
        ("click -> bot.client.ask returns", took["client"]),
        ("click -> GET ?wait= returns (baseline)", polled),
    ):
        s = summarize(samples)
        rows.append([what, str(s.n), fmt_ms(s.p50), fmt_ms(s.p99), fmt_ms(s.mean), fmt_ms(s.max)])
    print_table("reach (ms)", ["what", "n", "p50", "p99", "mean", "max"], rows)
    print(machine_line("sqlite"))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", nargs="?", choices=["agent"])
    parser.add_argument("url", nargs="?")
    parser.add_argument("token", nargs="?")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args(argv)
    if args.role == "agent":
        asyncio.run(_agent_main(args.url, args.token))
    else:
        asyncio.run(_main(args.n, args.warmup, args.rate))


if __name__ == "__main__":
    main()
