"""Click -> the agent's HTTP long-poll returns, on the bot's default store (SQLite).

Part of ``python -m bench.resume``. The bot runs in this process as ``python -m bot`` runs
it in HTTP mode (``bot.app.runtime.start``, the SQLite store in a file); the agent is a
process of its own (``python -m bench.longpoll agent``) holding one
``GET /v1/questions/{id}?wait=60`` per question and noting ``time.time()`` as each returns;
the clicks come from the load generator,
signed as Slack (or the sandbox) delivers them to ``/slack/events``. The time splits in two:
click -> ack (the bot's click path: verify, parse, authorize, the compare-and-set in SQLite)
and ack -> long-poll answered (the waiter's wake, the trail read, the JSON, the agent's read).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import SECRET, StandIn, send_paced, signed, spawn
from bot.app.runtime import start
from bot.settings.config import Settings

TOKEN = "bench-long-poll-token-0123456789"
QUESTION = {
    "questions": [
        {"id": "go", "question": "Go ahead?", "options": [{"label": "Yes"}, {"label": "No"}]}
    ]
}


async def _agent_main(url: str, token: str) -> None:
    """The agent: long-polls each id read from stdin (a JSON list per line) until it ends."""
    headers = {"Authorization": f"Bearer {token}"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(url, headers=headers, connector=connector) as http:

        async def poll(rid: str) -> None:
            while True:
                async with http.get(f"/v1/questions/{rid}", params={"wait": "60"}) as response:
                    state = (await response.json())["state"]
                if state not in ("queued", "pending"):
                    print(json.dumps({"returned": rid, "at": time.time()}), flush=True)
                    return

        tasks: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            tasks += [asyncio.ensure_future(poll(rid)) for rid in json.loads(line)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Agent:
    """This process's handle on the agent's."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.returned: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            self.returned[message["returned"]] = message["at"]
            self._changed.set()

    async def poll(self, rids: Sequence[str]) -> None:
        self.proc.stdin.write(json.dumps(list(rids)).encode() + b"\n")
        await self.proc.stdin.drain()

    async def wait_returned(self, rids: Sequence[str], within: float = 60) -> None:
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


async def measure(
    slack: StandIn, n: int, warmup: int, rate: float
) -> tuple[list[float], list[float]]:
    """``n`` clicks (after ``warmup``): click -> long-poll returned, and click -> ack (s)."""
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
        )
        runtime = await start(settings)
        # One token holds every long-poll here: past its cap (64) they would be refused.
        runtime.gateway.polls_per_token = runtime.gateway.polls_total = 1_000_000
        url = runtime.url
        agent = _Agent(await spawn("-m", "bench.longpoll", "agent", url, TOKEN))
        try:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with aiohttp.ClientSession(url, headers=headers) as http:
                asked = []
                for _ in range(warmup + n):
                    async with http.post("/v1/questions", json=QUESTION) as response:
                        asked.append(await response.json())
            rids = [q["id"] for q in asked]
            await agent.poll(rids)
            for _ in range(600):  # every long-poll parked before the first click (30 s at most)
                if runtime.gateway.polls.count >= len(rids):
                    break
                await asyncio.sleep(0.05)
            specs = [
                {**q["message"], "user": slack.users[i % len(slack.users)], "text": "Yes"}
                for i, q in enumerate(asked)
            ]
            payloads = await slack.clicks([{k: s[k] for k in SPEC} for s in specs])
            samples = await send_paced([signed(f"{url}/slack/events", p) for p in payloads], rate)
            await agent.wait_returned(rids)
        finally:
            await agent.close()
            await runtime.stop()
    took = [agent.returned[r] - s.sent_at for r, s in zip(rids, samples, strict=True)]
    return took[warmup:], [s.latency for s in samples[warmup:]]


SPEC = ("channel", "ts", "user", "text")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["agent"])
    parser.add_argument("url")
    parser.add_argument("token")
    args = parser.parse_args(argv)
    asyncio.run(_agent_main(args.url, args.token))


if __name__ == "__main__":
    main()
