"""Memory per pending question asked over the HTTP API: with no waiter, and with a long-poll each.

Part of ``python -m bench.scale``. The bot runs in this process as ``python -m bot`` runs it
in HTTP mode (``bot.app.start``, its default SQLite store in a file, the heap settled as at
start); the stand-in and the agents holding the long-polls (``bench.longpoll``'s agent) run in
processes of their own, so only the bot's memory counts. After a warm-up, ``count`` questions
are POSTed (``batch`` at a time) and the RSS growth per question is taken after a full
collection and the heap trimmed as the bot trims it every minute (``keep_heap``); then every
one gets a ``GET ?wait=60`` and the growth is taken again. The warm-up asks ``batch`` at once,
so the connections the load opens are in the baseline.
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
from pathlib import Path

import aiohttp

from bench.common import SECRET, StandIn, rss_kib, spawn
from bench.longpoll import QUESTION, TOKEN, _Agent
from bot.app.runtime import settle_heap, start, trim_heap
from bot.settings.config import Settings

WARMUP = 50


def kept_kib() -> int:
    """RSS after a full collection and ``trim_heap``, as ``python -m bot`` trims every minute."""
    gc.collect()
    trim_heap()
    return rss_kib()


async def measure(slack: StandIn, count: int, batch: int) -> tuple[float, float]:
    """KiB of RSS per pending API question: with no waiter, and with a long-poll each."""
    warmup = max(WARMUP, batch)
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
            max_open_per_token=count + warmup,
        )
        runtime = await start(settings)
        # One token holds every long-poll here: past its cap (64) they would be refused.
        runtime.gateway.polls_per_token = runtime.gateway.polls_total = 1_000_000
        headers = {"Authorization": f"Bearer {TOKEN}"}
        connector = aiohttp.TCPConnector(limit=batch)
        agent = None
        try:
            async with aiohttp.ClientSession(
                runtime.url, headers=headers, connector=connector
            ) as http:

                async def ask() -> str:
                    async with http.post("/v1/questions", json=QUESTION) as response:
                        if response.status != 201:
                            raise RuntimeError(f"POST answered {response.status}")
                        return str((await response.json())["id"])

                await asyncio.gather(*(ask() for _ in range(warmup)))
                settle_heap()  # as python -m bot does once started
                base = kept_kib()
                rids: list[str] = []
                for _ in range(0, count, batch):
                    rids += await asyncio.gather(*(ask() for _ in range(batch)))
            waiting = (kept_kib() - base) / len(rids)
            agent = _Agent(await spawn("-m", "bench.longpoll", "agent", runtime.url, TOKEN))
            await agent.poll(rids)
            for _ in range(1200):  # every long-poll parked (60 s at most)
                if runtime.gateway.polls.count >= len(rids):
                    break
                await asyncio.sleep(0.05)
            polled = (kept_kib() - base) / len(rids)
        finally:
            if agent is not None:
                await agent.close()
            await runtime.stop()
    return waiting, polled
