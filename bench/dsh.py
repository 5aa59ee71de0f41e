"""The bot against the real dsh host (``dsh web`` 0.2 from its wheel, a scripted model).

``python -m bench.dsh [--n 60] [--drops 50]``

``python -m bot`` runs as users run it (HTTP mode, SQLite store, ``DSH_HOST_URL`` = the URL
the host printed, through a TCP relay this process can cut); the Slack stand-in and a
test-side client of the host (``tests.dsh_driver``: it starts the turns, watches ``$events``
and follows the session log) run here, on one clock (``time.time``). Figures, p50/p99:

- host frame → Slack post: a waterfall frame seen by the watching client → the stand-in
  recording the bot's ``chat.postMessage`` of it;
- click → host log: a signed click sent to the bot → the ``tool/result`` of that answer
  in the host's session log (the host records the answer; it sends no receipt);
- reconnect after a drop: the relay cut (every socket dropped, connections refused) for
  ``--down`` seconds, then open again → the bot's ``/healthz`` says ``dsh: connected``;
- first post once the host is back: a question asked the moment the relay opens again →
  its post (the bot is still reconnecting when the frame comes).

Baseline in the same run: the watching client's own round trip (``session/create``).
Goals: post ≤ 20 ms, click → host ≤ 100 ms, reconnect ≤ 2 s after the host is back.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from adapters.slack.sandbox import SlackStandIn
from adapters.slack.sandbox.calllog import Call
from bench.common import fmt_ms, machine_line, print_table, summarize
from tests.bot_process import BotProcess
from tests.dsh_driver import HostDriver
from tests.dsh_model import ask, call_id
from tests.dsh_real import DSH_VERSION, RealHost, started_host
from tests.slack.stores.test_store_contract import _Proxy

TOKEN, SECRET = "xoxb-bench-dsh", "bench-dsh-signing-secret"
PACE = 1.1
"""Seconds between questions: Slack takes one post a second per channel (the bot paces its
posts to match), so questions asked faster would time the pacing, not the bot."""
GOALS = {"post": 0.020, "click": 0.100, "reconnect": 2.0}


async def until(check: Callable[[], Awaitable[bool]], within: float = 60.0) -> None:
    """Poll ``check`` every 5 ms until it holds (the bot says its state only when asked)."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


def question(n: int) -> dict[str, Any]:
    return {"id": "pick", "question": f"Question {n}?", "options": [{"label": "A"}, {"label": "B"}]}


class Bench:
    """The host, the relay, the Slack stand-in, the bot process and the watching client."""

    def __init__(self, host: RealHost, slack: SlackStandIn, proxy: _Proxy, alice: str) -> None:
        self.host, self.slack, self.proxy, self.alice = host, slack, proxy, alice
        self.driver = HostDriver(host)
        self.bot_url = ""
        self.asked = 0
        self.store = "sqlite"
        self.waiting: dict[str, asyncio.Future[Call]] = {}
        self.last_post = 0.0
        self.watch_posts()

    def watch_posts(self) -> None:
        """Resolve ``self.waiting`` futures as the stand-in records their ``chat.postMessage``."""
        record = self.slack.calls.record

        def recorded(call: Call) -> None:
            record(call)
            text = str(call.params.get("text", ""))
            if call.method == "chat.postMessage" and call.ok:
                for key, future in self.waiting.items():
                    if key in text and not future.done():
                        future.set_result(call)

        self.slack.calls.record = recorded  # type: ignore[method-assign]

    async def posted(self, text: str, within: float = 30.0) -> Call:
        """The ``chat.postMessage`` call whose text names ``text`` (once the stand-in has it)."""
        future = self.waiting.setdefault(text, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(future, within)
        finally:
            self.waiting.pop(text, None)

    async def _asked(self) -> tuple[str, str, float, Call]:
        """A new session whose turn asks one question: its id, its call id, when the
        watching client saw the frame, and the bot's post of it (paced as Slack allows)."""
        self.asked += 1
        await asyncio.sleep(self.last_post + PACE - time.time())  # Slack: 1 post/s a channel
        sid = await self.driver.create_session()
        await self.driver.follow(sid)
        tag = self.host.model.script(ask(question(self.asked)))
        posting = asyncio.ensure_future(self.posted(f"Question {self.asked}?"))
        await self.driver.prompt(sid, f"go {tag}")
        frame = await self.driver.waterfall(sid, within=30)
        events = self.driver.streams["$events"]
        seen = events.received[events.items.index(frame)]
        post = await posting
        self.last_post = post.at
        return sid, call_id(tag), seen, post

    async def answer_directly(self) -> float:
        """The floor of click → log: the watching client answers itself (``$events/result``)
        → the ``tool/result`` in the log it follows."""
        sid, call, _, _ = await self._asked()
        frame = await self.driver.waterfall(sid)
        value = {"answers": [{"id": "pick", "selected": ["A"]}]}
        began = time.time()
        await self.driver.answer(frame["eventId"], {"kind": "result", "value": value})
        await self.driver.tool_result(sid, call, within=30)
        return self._logged(sid) - began

    async def ask_one(self) -> tuple[float, float]:
        """One question answered in Slack: (frame → post, click → log) seconds."""
        sid, call, seen, post = await self._asked()
        channel = post.params["channel"]
        message = next(
            m for m in self.slack.workspace.history(channel) if m.ts == post.response["ts"]
        )
        clicked = time.time()
        status, _ = await self.slack.deliver(self.slack.click(message, user=self.alice, text="B"))
        assert status == 200
        await self.driver.tool_result(sid, call, within=30)
        return post.at - seen, self._logged(sid) - clicked

    def _logged(self, sid: str) -> float:
        """When the driver received ``sid``'s ``tool/result`` (the answer in the host's log)."""
        stream = self.driver.streams[f"log-{sid}"]
        for item, at in zip(stream.items, stream.received, strict=True):
            if item.get("type") == "event" and item["event"]["type"] == "tool/result":
                return at
        raise AssertionError("no tool/result")

    async def connected(self, http: aiohttp.ClientSession) -> bool:
        async with http.get(f"{self.bot_url}/healthz") as reply:
            return (await reply.json()).get("dsh") == "connected"

    async def disconnected(self, http: aiohttp.ClientSession) -> bool:
        return not await self.connected(http)

    async def drop(self, http: aiohttp.ClientSession, down: float) -> tuple[float, float]:
        """Cut the relay for ``down`` s, open it: (back → connected, frame → post) seconds."""
        await self.proxy.cut()
        await until(lambda: self.disconnected(http))
        await asyncio.sleep(down)
        await self.proxy.restore()
        back = time.time()
        asking = asyncio.ensure_future(self.ask_one())
        await until(lambda: self.connected(http))
        reconnect = time.time() - back
        return reconnect, (await asking)[0]


async def run(n: int, drops: int, down: float, store: str) -> None:
    slack = SlackStandIn(token=TOKEN, signing_secret=SECRET)
    await slack.start()
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    root = Path(tempfile.mkdtemp(prefix="bench-dsh-"))
    try:
        with started_host(root / "host") as host:
            proxy = _Proxy("127.0.0.1", host.port)
            await proxy.start()
            bench = Bench(host, slack, proxy, alice)
            bench.store = store
            url = host.launch_url.replace(f":{host.port}/", f":{proxy.port}/")
            env = {
                "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "SLACK_CHANNEL": channel,
                "SLACK_API_URL": slack.url, "PORT": "0", "DSH_HOST_URL": url,
                "STORE": store, "STORE_PATH": str(root / "questions.db"),
            }  # fmt: skip
            (root / "bot").mkdir()
            async with (
                BotProcess.start(env, cwd=root / "bot") as bot,
                aiohttp.ClientSession() as http,
            ):
                bench.bot_url = bot.url
                slack.interactivity_url = f"{bot.url}/slack/events"
                await bench.driver.login()
                await bench.driver.listen()
                await until(lambda: bench.connected(http))
                await report(bench, http, n, drops, down)
            await bench.driver.close()
            await proxy.cut()
    finally:
        await slack.stop()


async def report(
    bench: Bench, http: aiohttp.ClientSession, n: int, drops: int, down: float
) -> None:
    await bench.ask_one()  # warm-up: the first session and post
    direct = [await bench.answer_directly() for _ in range(n)]
    posts, clicks = zip(*[await bench.ask_one() for _ in range(n)], strict=True)
    reconnects, firsts = zip(*[await bench.drop(http, down) for _ in range(drops)], strict=True)
    rows = [
        ("host frame → Slack post", posts, GOALS["post"]),
        ("click → answer in the host's log", clicks, GOALS["click"]),
        (f"reconnect once the host is back ({down:g} s away)", reconnects, GOALS["reconnect"]),
        ("frame → post of a question asked as it came back", firsts, GOALS["post"]),
        ("floor: a client answers itself → host's log", direct, None),
    ]
    table = []
    for name, samples, goal in rows:
        stats = summarize(samples)
        met = "-" if goal is None else ("yes" if stats.p50 <= goal else "no")
        goal_text = "-" if goal is None else f"≤ {fmt_ms(goal)}"
        cells = [fmt_ms(stats.p50), fmt_ms(stats.p99), fmt_ms(stats.max), goal_text, met]
        table.append([name, str(stats.n), *cells])
    print_table(
        f"python -m bot against dsh web {DSH_VERSION}, ms (goal judged at p50)",
        ["figure", "n", "p50", "p99", "max", "goal", "met"],
        table,
    )
    print(machine_line(bench.store))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="questions asked and answered")
    parser.add_argument("--drops", type=int, default=50, help="drops of the bot's socket")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--down", type=float, default=1.0, help="seconds the host stays away")
    args = parser.parse_args(argv)
    asyncio.run(run(args.n, args.drops, args.down, args.store))


if __name__ == "__main__":
    main()
