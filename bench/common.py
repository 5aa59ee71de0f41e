"""Shared bench machinery: the machine line, percentiles, tables, and the processes a bench runs.

Every bench measures the bot against a baseline taken in the same run (absolute times drift on
a shared machine) and prints a table of n, p50, p99, mean and max per row. The moving parts:

- ``StandIn``: the Slack Web API stand-in (``SlackStandIn``) in a subprocess of its own, so the
  work Slack does (storing and checking messages) never runs on the bot's event loop nor counts
  in its memory. Two bench routes are added to it: ``POST /bench/clicks`` (the signed-payload
  material of people clicking posted messages, built by ``SlackStandIn.click``) and
  ``GET /bench/stats`` (call counts and whether every message ended without buttons).
- ``send_paced``: a load generator in a subprocess of its own that POSTs prebuilt signed,
  form-encoded interaction requests at a fixed rate over one keep-alive ``aiohttp`` session and
  reports, per request, the wall-clock send time (``time.time()``, comparable across processes
  on one machine), the time to the response (the ack) and the status.
- ``Asks``: many ``service.ask`` calls in flight, each with its own request id, recording when
  each was posted and when each ``ask()`` returned.

``python -m bench.common standin`` and ``python -m bench.common send`` are those subprocesses'
entry points; the benches start them, nobody else needs to.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import slack_bolt
import slack_sdk
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_server import AsyncSlackAppServer
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.clicks.bolt_app import (
    build_app,
    close_web_client,
    events_handler,
    to_bolt_request,
)
from adapters.slack.clicks.bolt_app import web_client as slack_web_client
from adapters.slack.pacing.budget import Budget
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.sandbox.signing import build_interaction_request
from adapters.slack.stores import PendingStore, SqlitePendingStore
from bench import cores
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from bot.questions.review import ReviewPolicy
from bot.questions.service import UserQuestionService

__all__ = [
    "FAST_LIMITS",
    "ROOT",
    "SECRET",
    "Asks",
    "Sample",
    "StandIn",
    "Stats",
    "bare_app",
    "bot_app",
    "close_clients",
    "fmt_ms",
    "gather_limited",
    "machine_line",
    "message_of",
    "percentile",
    "print_table",
    "question",
    "rss_kib",
    "send_paced",
    "serve_bolt",
    "settled_rss_kib",
    "signed",
    "spawn",
    "summarize",
    "web_client",
]

ROOT: Final = Path(__file__).resolve().parent.parent
SECRET: Final = "bench-signing-secret"


# -- the machine ----------------------------------------------------------------------------


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


_STORES: list[PendingStore] = []


def store_kind() -> str:
    """The in-process bot's store: ``BENCH_STORE`` (``memory``, the default, or ``sqlite``)."""
    kind = os.environ.get("BENCH_STORE", "memory")
    if kind not in ("memory", "sqlite"):
        raise SystemExit(f"BENCH_STORE={kind!r}: use memory or sqlite")
    return kind


async def bench_store() -> PendingStore | None:
    """A started store of ``store_kind()`` for a benchmark's bot (``None``: the default, memory).

    SQLite lives in a fresh temporary file (WAL, as ``python -m bot`` runs it);
    ``close_bench_stores`` closes every store made.
    """
    if store_kind() == "memory":
        return None
    path = Path(tempfile.mkdtemp(prefix="bench-store-")) / "questions.db"
    store = SqlitePendingStore(path)
    await store.start()
    _STORES.append(store)
    return store


async def close_bench_stores() -> None:
    """Close the stores ``bench_store`` made."""
    while _STORES:
        await _STORES.pop().close()


async def with_stores(run: Awaitable[None]) -> None:
    """Run a benchmark, then close the stores it made."""
    try:
        await run
    finally:
        await close_bench_stores()


def machine_line(store: str | None = None) -> str:
    """Cores, CPU, Python, slack_bolt/slack_sdk/aiohttp versions: printed under every table
    (``store``: what the bench ran on, when not ``store_kind()``)."""
    placed = cores.placement()
    return (
        f"store: {store or store_kind()}; "
        f"machine: {len(placed.usable)} cores usable ({os.cpu_count()} online, {_cpu_model()}; "
        f"{placed.describe()}), "
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"slack_bolt {slack_bolt.version.__version__}, slack_sdk {slack_sdk.version.__version__}, "
        f"aiohttp {aiohttp.__version__}, {platform.system()} {platform.release()}; "
        f"load average {_load()}"
    )


def _load() -> str:
    """The 1/5/15-minute load averages (other work on a shared machine skews the figures)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def rss_kib() -> int:
    """This process's resident set size in KiB (``VmRSS`` of ``/proc/self/status``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def settled_rss_kib() -> int:
    """RSS after a full garbage collection (what the live objects hold)."""
    gc.collect()
    return rss_kib()


# -- statistics and tables ------------------------------------------------------------------


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted ``ordered``, interpolated linearly (numpy's default)."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of samples, in seconds."""

    n: int
    p50: float
    p99: float
    mean: float
    max: float


def summarize(samples: Iterable[float]) -> Stats:
    """n, median, p99, mean and max of ``samples`` (seconds)."""
    ordered = sorted(samples)
    if not ordered:
        return Stats(0, math.nan, math.nan, math.nan, math.nan)
    return Stats(
        len(ordered),
        percentile(ordered, 0.5),
        percentile(ordered, 0.99),
        sum(ordered) / len(ordered),
        ordered[-1],
    )


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with three significant figures."""
    if math.isnan(seconds):
        return "-"
    ms = seconds * 1000
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain aligned table (first column left-aligned, the rest right-aligned)."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    print()
    print(title)
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


# -- serving bolt apps ----------------------------------------------------------------------


_CLIENTS: list[AsyncWebClient] = []


FAST_LIMITS: Final = SlackLimits(time_scale=1000.0)
"""Slack's limits a thousand times faster: the scheduler runs, its waits do not show."""


def web_client(
    url: str,
    token: str,
    *,
    timeout: int = 10,
    limits: SlackLimits = FAST_LIMITS,
    pace: bool = True,
    budget: Budget | None = None,
) -> AsyncWebClient:
    """A Web API client on the stand-in, made as ``bot/app/runtime.py`` makes the bot's (one kept
    aiohttp session, calls paced by the scheduler within ``limits``; ``pace=False`` for
    benches of the bot's own memory and speed); ``close_clients`` closes them all."""
    client = slack_web_client(
        token, base_url=url, timeout=timeout, limits=limits, pace=pace, budget=budget
    )
    _CLIENTS.append(client)
    return client


async def close_clients() -> None:
    """Close the sessions of every client ``web_client`` made."""
    while _CLIENTS:
        await close_web_client(_CLIENTS.pop())


def bare_app(client: AsyncWebClient, *, process_before_response: bool) -> AsyncApp:
    """A bolt app whose only listener acks every block action: the baseline."""
    app = AsyncApp(
        client=client, signing_secret=SECRET, process_before_response=process_before_response
    )

    async def only_ack(ack: AsyncAck) -> None:
        await ack()

    app.action(re.compile(".*"))(only_ack)
    return app


async def bot_app(url: str, token: str, *, http_timeout: int = 10, **client: Any) -> AsyncApp:
    """The bot's bolt app (``build_app``: ``process_before_response=True``, identity resolved
    at start) on a client made as ``bot/app/runtime.py`` makes it (``client``: ``web_client``'s
    options)."""
    return await build_app(
        web_client(url, token, timeout=http_timeout, **client), signing_secret=SECRET
    )


@dataclass(slots=True)
class Served:
    """A bolt app served by aiohttp on 127.0.0.1 at ``url`` (``/slack/events``)."""

    url: str
    runner: web.AppRunner

    async def close(self) -> None:
        """Stop serving."""
        await self.runner.cleanup()


async def serve_bolt(
    app: AsyncApp, *, bolts_adapter: bool = False, embedded: bool = False
) -> Served:
    """Serve ``app`` as the bot does in HTTP mode (``bot/app/runtime.py``): aiohttp,
    ``/slack/events``,
    the bot's handler (``events_handler``: verify the signature, build the request bolt
    would, dispatch). ``bolts_adapter``: serve it as bolt itself serves an app on aiohttp
    instead (bolt's ``AsyncSlackAppServer``: its ``to_bolt_request``, its own parsing and
    signature check): bare bolt. ``embedded``: as docs/python.md serves an embedded
    provider (bolt's dispatch and signature check, ``adapters.slack.to_bolt_request``)."""
    if bolts_adapter:
        web_app = AsyncSlackAppServer(port=0, path="/slack/events", app=app).web_app
    elif embedded:

        async def events(request: web.Request) -> web.StreamResponse:
            return await to_aiohttp_response(
                await app.async_dispatch(await to_bolt_request(request))
            )

        web_app = web.Application()
        web_app.router.add_post("/slack/events", events)
    else:
        web_app = web.Application(client_max_size=4 * 1024 * 1024)
        web_app.router.add_post("/slack/events", events_handler(app, SECRET))
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return Served(f"http://127.0.0.1:{port}/slack/events", runner)


# -- requests -------------------------------------------------------------------------------


def signed(url: str, payload: str) -> dict[str, Any]:
    """A signed, form-encoded interaction request for the load generator (``payload``: JSON)."""
    body, headers = build_interaction_request(payload, SECRET)
    return {"url": url, "body": body, "headers": headers}


def plan_review(i: int) -> dict[str, Any]:
    """A plan review: the plan, Approve and Keep planning."""
    return {
        "questions": [
            {
                "id": "plan",
                "question": f"Approve plan {i}?",
                "detail": f"1. Build {i}\n2. Deploy {i}",
                "options": [{"label": "Approve"}, {"label": "Keep planning"}],
                "intent": {"kind": "plan-review", "approve": "Approve"},
            }
        ]
    }


def question(i: int) -> dict[str, Any]:
    """The bench's question: one single-select question with two buttons."""
    return {
        "questions": [
            {
                "id": "deploy",
                "question": f"Deploy build {i} to production?",
                "options": [{"label": "Yes"}, {"label": "No"}],
            }
        ]
    }


# -- subprocesses ---------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def spawn(*args: str, stdin: int | None = asyncio.subprocess.PIPE) -> Any:
    """``python ARGS`` in this tree, with pipes, on the stand-ins' cores (``cores``)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        cwd=ROOT,
        env=_child_env(),
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
        limit=64 * 1024 * 1024,
    )
    cores.placement().adopt(proc.pid)
    return proc


@dataclass(frozen=True, slots=True)
class Sample:
    """One request the load generator sent: when (wall clock), how long to the ack, status."""

    sent_at: float
    """When the load generator began the request (before aiohttp builds it)."""
    latency: float
    status: int
    written_at: float
    """When its bytes went to the socket (aiohttp's ``on_request_chunk_sent``, just before
    the write): ``written_at - sent_at`` is the load generator's own work on it (building
    it, taking a connection from the pool, or opening one when none is free)."""


async def send_paced(requests: Sequence[Mapping[str, Any]], rate: float) -> list[Sample]:
    """POST ``requests`` (see ``signed``) at ``rate`` per second from a separate process.

    ``rate <= 0`` sends them back to back instead (closed loop: one in flight at a time).
    """
    proc = await spawn("-m", "bench.common", "send")
    spec = json.dumps({"rate": rate, "requests": list(requests)}).encode()
    out, _ = await proc.communicate(spec)
    if proc.returncode != 0:
        raise RuntimeError(f"the load generator exited with {proc.returncode}")
    return [Sample(*row) for row in json.loads(out)]


async def _send_main() -> None:
    spec = json.loads(sys.stdin.buffer.read())
    rate = float(spec["rate"])
    requests = [(r["url"], r["body"].encode(), r["headers"]) for r in spec["requests"]]
    results: list[list[float] | None] = [None] * len(requests)
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    tracing = aiohttp.TraceConfig()

    async def written(_: object, context: Any, __: object) -> None:
        if not context.trace_request_ctx:  # the body's first chunk: the write itself
            context.trace_request_ctx.append(time.time())

    tracing.on_request_chunk_sent.append(written)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[tracing]) as session:

        async def one(i: int) -> None:
            url, body, headers = requests[i]
            written_at: list[float] = []
            sent_at = time.time()
            started = time.perf_counter()
            async with session.post(
                url, data=body, headers=headers, trace_request_ctx=written_at
            ) as response:
                await response.read()
                status = response.status
            results[i] = [sent_at, time.perf_counter() - started, status, written_at[0]]

        if rate <= 0:  # closed loop: each request as soon as the previous one is answered
            for i in range(len(requests)):
                await one(i)
            sys.stdout.write(json.dumps(results))
            sys.stdout.flush()
            return
        tasks: list[asyncio.Task[None]] = []
        start = loop.time() + 0.02
        for i in range(len(requests)):
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.gather(*tasks)
    sys.stdout.write(json.dumps(results))
    sys.stdout.flush()


class StandIn:
    """``SlackStandIn`` running in a subprocess (``python -m bench.common standin``)."""

    def __init__(self, *, scale: float | None = None) -> None:
        self.scale = scale
        """With a scale the stand-in enforces Slack's limits, that many times faster."""
        self.proc: Any = None
        self.url = ""
        self.token = ""
        self.channel = ""
        self.users: list[str] = []
        self._root = ""
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> StandIn:
        extra = [] if self.scale is None else [f"{self.scale:g}"]
        self.proc = await spawn("-m", "bench.common", "standin", *extra)
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        info = json.loads(line)
        self.url, self.token = info["url"], info["token"]
        self.channel, self.users = info["channel"], info["users"]
        self._root = self.url.removesuffix("api/")
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await close_clients()
        if self._session is not None:
            await self._session.close()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    async def clicks(self, specs: Sequence[Mapping[str, str]]) -> list[str]:
        """Payloads of people clicking, as JSON text: each spec ``{channel, ts, user, text}``.

        Text, not parsed dicts: thousands of nested payloads held in the bot's process would
        be walked by every full garbage collection there, which no real bot's heap holds.
        """
        assert self._session is not None
        async with self._session.post(
            f"{self._root}bench/clicks", json={"clicks": list(specs)}
        ) as response:
            response.raise_for_status()
            payloads: list[str] = (await response.json())["payloads"]
            return payloads

    async def stats(self) -> dict[str, Any]:
        """Call counts per method (``calls``, ``failed``, ``limited``: 429s), messages posted,
        how many still show buttons, each message's text (``texts``, by ts), each method's
        most accepted calls in any window of Slack's (``busiest``) and when the first and
        the last accepted post arrived (``posts_at``)."""
        assert self._session is not None
        async with self._session.get(f"{self._root}bench/stats") as response:
            response.raise_for_status()
            stats: dict[str, Any] = await response.json()
            return stats


async def _standin_main(scale: float | None) -> None:
    from adapters.slack.sandbox.clicks import Values, find_target, targets, with_choice
    from adapters.slack.sandbox.ratelimits import RateLimiter
    from adapters.slack.sandbox.webapi import SlackStandIn

    limits = SlackLimits(time_scale=scale or 1.0)
    enforced = RateLimiter(limits) if scale is not None else None
    slack = SlackStandIn(signing_secret=SECRET, rate_limits=enforced)
    ws = slack.workspace
    users = [ws.add_user(name).id for name in ("alice", "bob", "carol")]
    channel = ws.add_channel("agents").id
    index: dict[tuple[str, str], Any] = {}

    def message(channel_id: str, ts: str) -> Any:
        found = index.get((channel_id, ts))
        if found is None:  # index lazily; the workspace searches a list
            for m in ws.history(channel_id):
                index[(m.channel, m.ts)] = m
            found = index[(channel_id, ts)]
        return found

    # What each person has ticked on each message, as their Slack client keeps it: their
    # later clicks (a form's Submit) carry it in ``state.values``.
    ticked: dict[tuple[str, str, str], Values] = {}

    async def clicks_route(request: web.Request) -> web.Response:
        body = await request.json()
        payloads = []
        for c in body["clicks"]:
            found, mine = message(c["channel"], c["ts"]), (c["channel"], c["ts"], c["user"])
            values = ticked.get(mine, {})
            click = slack.click(found, user=c["user"], text=c["text"], values=values)
            payloads.append(json.dumps(click, separators=(",", ":")))
            ticked[mine] = with_choice(*find_target(found.blocks, text=c["text"]), values)
        return web.json_response({"payloads": payloads})

    async def stats_route(request: web.Request) -> web.Response:
        calls: dict[str, int] = {}
        failed: dict[str, int] = {}
        limited: dict[str, int] = {}
        accepted: dict[str, list[float]] = {}
        for call in slack.calls:
            calls[call.method] = calls.get(call.method, 0) + 1
            if call.status == 429:
                limited[call.method] = limited.get(call.method, 0) + 1
            if not call.ok:
                failed[call.method] = failed.get(call.method, 0) + 1
            else:
                accepted.setdefault(call.method, []).append(call.at)
        window = limits.real(limits.window)
        busiest = {m: _busiest(times, window) for m, times in accepted.items()}
        posts = accepted.get("chat.postMessage") or [0.0]
        top = [m for m in ws.all_messages() if m.thread_ts is None or m.thread_ts == m.ts]
        live = sum(1 for m in top if any(True for _ in targets(m.blocks)))
        return web.json_response(
            {
                "calls": calls,
                "failed": failed,
                "limited": limited,
                "busiest": busiest,
                "posts_at": [min(posts), max(posts)],
                "messages": len(top),
                "with_buttons": live,
                "texts": {m.ts: m.text for m in top},
            }
        )

    slack.app.router.add_post("/bench/clicks", clicks_route)
    slack.app.router.add_get("/bench/stats", stats_route)
    url = await slack.start()
    print(json.dumps({"url": url, "token": slack.token, "channel": channel, "users": users}))
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # until the bench closes our stdin
    await slack.stop()


def _busiest(times: Sequence[float], window: float) -> int:
    """The most of ``times`` (sorted) inside any half-open window of ``window`` seconds."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while times[first] <= at - window:
            first += 1
        most = max(most, last - first + 1)
    return most


# -- many asks in flight --------------------------------------------------------------------


@dataclass(slots=True)
class Asks:
    """``service.ask`` calls in flight, each with a request id of ours."""

    service: UserQuestionService
    on_return: Callable[[str, float], None] | None = None
    make: Callable[[int], dict[str, Any]] = question
    """The wire request of the n-th ask."""
    review: ReviewPolicy | None = None
    """A team-review policy for every ask (``make`` must then make plan reviews)."""
    tasks: dict[str, asyncio.Task[AskUserQuestionAnswer]] = field(default_factory=dict)
    returned: dict[str, float] = field(default_factory=dict)
    """Request id -> ``time.time()`` when its ``ask()`` returned."""
    returned_perf: dict[str, float] = field(default_factory=dict)
    """Request id -> ``time.perf_counter()`` when its ``ask()`` returned."""
    _posted: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    _serial: int = 0

    async def start(self, count: int, *, batch: int = 100, within: float = 120.0) -> list[str]:
        """Start ``count`` asks, ``batch`` at a time; return their ids once all are posted."""
        from adapters.slack.model import ids

        started: list[str] = []
        async with asyncio.timeout(within):
            for first in range(0, count, batch):
                round_ids = [ids.new_request_id() for _ in range(min(batch, count - first))]
                for rid in round_ids:
                    self._launch(rid)
                try:
                    await asyncio.gather(*(self._posted[rid] for rid in round_ids))
                finally:
                    for rid in round_ids:
                        self._posted.pop(rid, None)
                started.extend(round_ids)
        return started

    def _launch(self, rid: str) -> None:
        loop = asyncio.get_running_loop()
        self._posted[rid] = loop.create_future()
        self._serial += 1
        request = AskUserQuestionRequest.model_validate(self.make(self._serial))

        def posted(request_id: str) -> None:
            future = self._posted.get(request_id)
            if future is not None and not future.done():
                future.set_result(None)

        request.options = AskOptions(request_id=rid, on_posted=posted, review=self.review)

        async def run() -> AskUserQuestionAnswer:
            try:
                answer = await self.service.ask(request)
            except BaseException as exc:
                future = self._posted.get(rid)
                if future is not None and not future.done():
                    future.set_exception(RuntimeError(f"ask {rid} failed: {exc!r}"))
                raise
            wall, perf = time.time(), time.perf_counter()
            self.returned[rid] = wall
            self.returned_perf[rid] = perf
            if self.on_return is not None:
                self.on_return(rid, wall)
            return answer

        self.tasks[rid] = asyncio.ensure_future(run())

    async def wait_returned(self, rids: Iterable[str], *, within: float = 30.0) -> None:
        """Wait until every ask in ``rids`` has returned (raising if one failed)."""
        async with asyncio.timeout(within):
            await asyncio.gather(*(self.tasks[rid] for rid in rids))

    async def cancel_all(self) -> None:
        """Cancel every ask still waiting."""
        for task in self.tasks.values():
            if not task.done():
                task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)  # retrieve all


async def message_of(store: Any, rid: str) -> tuple[str, str]:
    """The channel and ts of a request's Slack message (from the pending store)."""
    record = await store.get(rid)
    if record is None or record.message_ts is None:
        raise RuntimeError(f"request {rid} has no message")
    return record.message_channel or record.channel, record.message_ts


async def gather_limited(coros: Iterable[Awaitable[Any]], limit: int = 50) -> list[Any]:
    """``asyncio.gather`` with at most ``limit`` running at once."""
    gate = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[Any]) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


def main(argv: Sequence[str]) -> None:
    """The subprocess entry points: ``standin`` or ``send``."""
    if argv[:1] == ["standin"]:
        asyncio.run(_standin_main(float(argv[1]) if len(argv) > 1 else None))
    elif argv[:1] == ["send"]:
        asyncio.run(_send_main())
    else:
        raise SystemExit("usage: python -m bench.common standin|send (started by the benches)")


if __name__ == "__main__":
    main(sys.argv[1:])
