"""Two real ``python -m bot`` processes sharing one Redis pending store and one Slack.

Slack hands each interaction to any one of a team's bot processes. Here two bot
subprocesses, A and B, run in HTTP mode with the same signing secret, API token, channel,
Slack Web API stand-in (in this test process) and Redis (the shared test Redis with a key
prefix of the test's own, or a private ``redis-server`` for the restart tests). Each click is
a signed ``block_actions`` payload POSTed to the ``/slack/events`` of the process the test
chooses, never to "whichever is configured":

- asked through A, clicked through B: A's waiter and long-poll get the answer;
- 200 concurrent asks over both, each click sent to the other process: every ask gets
  exactly its own answer;
- two people racing on different processes: exactly one outcome, one private note;
- B killed (SIGKILL) mid-run: A carries on and serves B's questions too (questions asked
  over the API are owned by no process, so no orphan sweep fails them);
- the process that asked killed: its questions stay open, are answered through the other
  process, and a click after the answer gets a polite "already answered" note;
- Redis restarted mid-run (append-only file on): no answer is lost, also when it stays
  down longer than a heartbeat key lives;
- Redis lost while running: a waiting ask ends with ``STORE_UNAVAILABLE``, new asks are
  refused in bounded time, the API says ``STORE_UNAVAILABLE``, and work resumes after;
- Redis unreachable at start: a clear error naming ``REDIS_URL``, no password shown.

The tests that stop Redis use a private ``redis-server`` (tests/redis_server.py), never the
shared one.

Every wait is bounded, and conditions are awaited, not slept on (the one sleep is the
length of an outage).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import secrets
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.signing import send_interaction
from adapters.slack.sandbox.webapi import SlackStandIn
from adapters.slack.stores.contract import OWNER_LOST_NOTE
from tests.bot_process import BotProcess, run_bot_command
from tests.redis_server import RedisServer, free_port
from tests.slack_harness import all_text, interactive_elements

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
SIGNING_SECRET = secrets.token_hex(16)
API_TOKEN = f"api-{secrets.token_hex(16)}"
SECRETS = (BOT_TOKEN, SIGNING_SECRET, API_TOKEN)

HEARTBEAT_INTERVAL = 2.0
"""How often a process beats and then sweeps (the store's default; no setting changes it)."""
HEARTBEAT_TTL = 6.0
"""How long a heartbeat key lives (the store's default; no setting changes it)."""
OWNER_LOST_WITHIN = 30.0
"""Upper bound for a dead owner's questions to be failed (expected: about 6–8 s)."""

NO_LONGER_OPEN = "This question is no longer open."
ANSWERED_LINE = ":white_check_mark: Answered"

T = TypeVar("T")


def question(name: str, *labels: str) -> dict[str, Any]:
    """A one-question request whose options are ``labels``."""
    return {
        "questions": [
            {
                "id": name,
                "question": f"Question {name}?",
                "options": [{"label": label} for label in labels],
            }
        ]
    }


DEPLOY = question("deploy", "Deploy", "Wait")


async def eventually(
    check: Callable[[], Any], *, within: float = 10.0, what: str = "", every: float = 0.02
) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; fail after ``within``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what or check}")
        await asyncio.sleep(every)


_CONNECTED = re.compile(r"pending store connected to Redis at \S+ \(prefix (\S+), process (\S+)\)")


@dataclass
class Bot:
    """One bot subprocess and clients for its API and its ``/slack/events``."""

    name: str
    process: BotProcess
    api: aiohttp.ClientSession
    web: aiohttp.ClientSession
    process_id: str = ""

    @property
    def url(self) -> str:
        """The bot's base URL."""
        return self.process.url

    async def ask(self, body: Any = DEPLOY) -> tuple[int, dict[str, Any]]:
        """POST /v1/questions on this process; returns (status, JSON)."""
        async with self.api.post(f"{self.url}/v1/questions", json=body) as response:
            return response.status, await self.json_of(response)

    async def get(self, request_id: str, wait: float = 0) -> tuple[int, dict[str, Any]]:
        """GET /v1/questions/{id}?wait=… on this process; returns (status, JSON)."""
        url = f"{self.url}/v1/questions/{request_id}"
        async with self.api.get(url, params={"wait": f"{wait:g}"}) as response:
            return response.status, await self.json_of(response)

    async def json_of(self, response: aiohttp.ClientResponse) -> dict[str, Any]:
        """The JSON body; anything else fails with the body and the end of the bot's log."""
        if response.content_type != "application/json":
            text = await response.text()
            tail = "\n".join(self.process.stderr[-400:])
            raise AssertionError(
                f"{self.name} answered {response.status} {text!r}; its log ends with:\n{tail}"
            )
        body: dict[str, Any] = await response.json()
        return body

    async def health(self) -> dict[str, Any]:
        """GET /healthz."""
        async with self.web.get(f"{self.url}/healthz") as response:
            body: dict[str, Any] = await response.json()
            # 503 and ok: false exactly while the store is unreachable.
            assert response.status == (200 if body["ok"] else 503)
            return body

    async def pending(self) -> int:
        """The waiters (asks and long-polls) this process holds."""
        count: int = (await self.health())["waiters"]
        return count

    async def send(self, payload: dict[str, Any]) -> int:
        """Deliver a signed interaction to this process's ``/slack/events``; returns the status."""
        status, _ = await send_interaction(
            self.web, f"{self.url}/slack/events", payload, SIGNING_SECRET
        )
        return status

    def alive(self) -> bool:
        """Whether the subprocess still runs."""
        return self.process.returncode is None

    def logged(self, *parts: str) -> list[str]:
        """The log lines that contain every one of ``parts``."""
        return [line for line in self.process.stderr if all(part in line for part in parts)]


@dataclass
class Pair:
    """The Slack stand-in, bots A and B, Redis (an admin client) and the people."""

    slack: SlackStandIn
    a: Bot
    b: Bot
    redis: aioredis.Redis
    prefix: str
    channel: str
    alice: str
    bob: str
    carol: str
    tasks: list[asyncio.Future[Any]] = field(default_factory=list)

    def message(self, record: dict[str, Any]) -> Message:
        """The question's Slack message as it is now."""
        where = record["message"]
        return self.slack.workspace.message(where["channel"], where["ts"])

    def click(self, record: dict[str, Any], user: str, text: str) -> dict[str, Any]:
        """The payload of ``user`` clicking ``text`` on the question's message as it is now."""
        return self.slack.click(self.message(record), user=user, text=text)

    def later(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Run ``awaitable`` in the background (cancelled at teardown if still running)."""
        task = asyncio.ensure_future(awaitable)
        self.tasks.append(task)
        return task

    async def stored(self, request_id: str) -> dict[str, Any]:
        """The record as it is stored in Redis."""
        raw = await self.redis.get(f"{self.prefix}:req:{request_id}")
        assert raw is not None, f"no record {request_id} in Redis"
        record: dict[str, Any] = json.loads(raw)
        return record

    async def open_ids(self) -> set[str]:
        """The ids in the store's index of open records."""
        return {str(member) for member in await self.redis.smembers(f"{self.prefix}:open")}

    def final(self, record: dict[str, Any]) -> str | None:
        """The message's text once it has no buttons left (``None`` while it has)."""
        message = self.message(record)
        if interactive_elements(message.blocks):
            return None
        return all_text(message.blocks)

    def notes_for(self, user: str) -> list[str]:
        """The private (ephemeral) notes ``user`` got."""
        return [e.text for e in self.slack.workspace.ephemerals_for(user)]

    async def beat_of(self, bot: Bot) -> float | None:
        """When ``bot`` last refreshed its heartbeat key (``None`` while it has none)."""
        raw = await self.redis.get(f"{self.prefix}:alive:{bot.process_id}")
        return None if raw is None else float(raw)

    async def past_the_sweep_of(self, bot: Bot, *, dead: Bot) -> None:
        """Wait until ``dead``'s heartbeat has lapsed and ``bot`` has swept for orphans since
        (it sweeps right after each beat: two beats after the lapse, one sweep is over)."""

        async def lapsed() -> bool:
            return not await self.redis.exists(f"{self.prefix}:alive:{dead.process_id}")

        await eventually(lapsed, within=OWNER_LOST_WITHIN, every=0.1, what="the lapse")
        seen: set[float] = set()

        async def swept() -> bool:
            beat = await self.beat_of(bot)
            if beat is not None:
                seen.add(beat)
            return len(seen) >= 3

        await eventually(swept, within=OWNER_LOST_WITHIN, every=0.05, what=f"{bot.name}'s sweep")

    async def beats_after(self, moment: float, beats: int, *, within: float) -> None:
        """Wait until both bots have refreshed their heartbeats ``beats`` times after ``moment``.

        Each process sweeps for orphans right after each beat, so after its second beat
        its first sweep is over.
        """
        seen: dict[str, set[float]] = {self.a.name: set(), self.b.name: set()}

        async def enough() -> bool:
            for bot in (self.a, self.b):
                with contextlib.suppress(RedisError):
                    beat = await self.beat_of(bot)
                    if beat is not None and beat > moment:
                        seen[bot.name].add(beat)
            return all(len(found) >= beats for found in seen.values())

        await eventually(enough, within=within, every=0.05, what=f"{beats} heartbeats each")


async def _start_bot(
    stack: contextlib.AsyncExitStack, name: str, env: dict[str, str], cwd: Path
) -> Bot:
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    process = await stack.enter_async_context(BotProcess.start(env, cwd=cwd))
    connector = aiohttp.TCPConnector(limit=0)
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    api = await stack.enter_async_context(
        aiohttp.ClientSession(headers=headers, connector=connector)
    )
    web = await stack.enter_async_context(
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    )
    bot = Bot(name, process, api, web)

    def connected() -> str | None:
        for line in process.stderr:
            found = _CONNECTED.search(line)
            if found:
                return found.group(2)
        return None

    bot.process_id = await eventually(connected, within=5, what=f"bot {name}'s store log line")
    return bot


@contextlib.asynccontextmanager
async def two_bots(
    tmp_path: Path,
    redis_url: str,
    prefix: str,
    *,
    one_by_one: bool = False,
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[Pair]:
    """The Slack stand-in, and bots A and B sharing it and the Redis at ``redis_url``.

    They start together, or with ``one_by_one`` B only once A listens (so their heartbeat
    ticks are apart by about a process start-up, not in step).
    """
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET)
    ws = slack.workspace
    alice, bob, carol = (ws.add_user(name).id for name in ("alice", "bob", "carol"))
    channel = ws.add_channel("agents").id
    await slack.start()
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "BOT_API_TOKEN": API_TOKEN,
        "REDIS_URL": redis_url,
        "REDIS_PREFIX": prefix,
        "SHUTDOWN_GRACE": "2",
        # Slack's rate limits at the stand-in's speed (it enforces none here).
        "SLACK_RATE_SCALE": "1000",
        **(extra_env or {}),
    }
    admin = aioredis.from_url(redis_url, decode_responses=True)
    try:
        async with contextlib.AsyncExitStack() as stack:
            if one_by_one:
                a = await _start_bot(stack, "A", env, tmp_path / "a")
                b = await _start_bot(stack, "B", env, tmp_path / "b")
            else:
                async with asyncio.TaskGroup() as starting:  # one fails: the other stops
                    first = starting.create_task(_start_bot(stack, "A", env, tmp_path / "a"))
                    second = starting.create_task(_start_bot(stack, "B", env, tmp_path / "b"))
                a, b = first.result(), second.result()
            assert a.process_id != b.process_id
            pair = Pair(slack, a, b, admin, prefix, channel, alice, bob, carol)
            try:
                yield pair
            finally:
                for task in pair.tasks:
                    task.cancel()
                await asyncio.gather(*pair.tasks, return_exceptions=True)
        # Both processes are gone (killed by BotProcess.start) and their output is complete.
        for bot in (a, b):
            for secret in SECRETS:
                assert secret not in bot.process.output, f"a secret reached {bot.name}'s output"
    finally:
        await admin.aclose()
        await slack.stop()


def _elapsed_since(start: float) -> float:
    return round(time.monotonic() - start, 2)


# -- one question, two processes --------------------------------------------------------------


@pytest.mark.slow
async def test_asked_through_a_and_clicked_through_b_resolves_in_a(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    async with asyncio.timeout(60), two_bots(tmp_path, redis_url, store_prefix) as s:
        status, posted = await s.a.ask()
        assert (status, posted["state"]) == (201, "pending")
        # Asked over the API: owned by no process (A's end would not end it).
        assert "owner" not in await s.stored(posted["id"])
        assert s.slack.calls.count("chat.postMessage") == 1
        # Both serve it, so both report it: one question open in all, owned by neither.
        for bot in (s.a, s.b):
            health = await bot.health()
            counts = [health[key] for key in ("pending", "owned", "unowned", "open")]
            assert counts == [1, 0, 1, 1]

        polling = s.later(s.a.get(posted["id"], wait=30))
        # A holds two waiters now: the ask's and the long-poll's.
        await eventually(lambda: _equals(s.a.pending(), 2), what="A's two waiters")
        assert await s.b.pending() == 0

        assert await s.b.send(s.click(posted, s.alice, "Deploy")) == 200

        status, answered = await polling
        assert status == 200
        assert answered["state"] == "answered"
        assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
        assert answered["answeredBy"] == s.alice
        # A's ask ended too: no waiter is left in either process.
        await eventually(lambda: _equals(s.a.pending(), 0), what="A's waiters to end")
        assert await s.b.pending() == 0
        # Either process reads the same outcome.
        _, through_b = await s.b.get(posted["id"])
        assert through_b == answered
        assert posted["id"] not in await s.open_ids()

        text = await eventually(lambda: s.final(posted), what="the answered message")
        assert ANSWERED_LINE in text and f"by <@{s.alice}>" in text
        assert "→ Deploy" in text
        assert s.slack.calls.count("chat.postMessage") == 1
        assert s.notes_for(s.alice) == []
        assert s.a.alive() and s.b.alive()


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def _has_waiters(bot: Bot, count: int) -> bool:
    return await bot.pending() == count


# -- 200 concurrent asks, every click to the other process -------------------------------------


@pytest.mark.slow
async def test_200_concurrent_asks_over_both_each_get_exactly_their_own_answer(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    count = 200
    # One API token long-polls all 200: lift its per-token cap (64) above them.
    polls = {"MAX_POLLS_PER_TOKEN": "256"}
    async with two_bots(tmp_path, redis_url, store_prefix, extra_env=polls) as s:
        people = (s.alice, s.bob, s.carol)

        def plan(i: int) -> tuple[Bot, Bot, str, str]:
            """Who asks question i, who gets its click, the label clicked, and by whom."""
            asker, other = (s.a, s.b) if i % 2 == 0 else (s.b, s.a)
            label = f"Yes {i}" if i % 4 < 2 else f"No {i}"
            return asker, other, label, people[i % 3]

        began = time.monotonic()
        async with asyncio.timeout(60):
            # 100 asks through each process at once ...
            asked = await asyncio.gather(
                *(plan(i)[0].ask(question(f"q{i}", f"Yes {i}", f"No {i}")) for i in range(count))
            )
            assert [status for status, _ in asked] == [201] * count, asked
            posted = [record for _, record in asked]
            # ... each asker long-polls its own questions, and every click goes to the other
            # process, all at once.
            polls = [s.later(plan(i)[0].get(posted[i]["id"], wait=55)) for i in range(count)]
            clicks = [s.click(posted[i], plan(i)[3], plan(i)[2]) for i in range(count)]
            statuses = await asyncio.gather(*(plan(i)[1].send(clicks[i]) for i in range(count)))
            assert statuses == [200] * count
            answered = await asyncio.gather(*polls)
        elapsed = _elapsed_since(began)
        print(f"\n{count} concurrent asks over two processes answered in {elapsed} s")

        assert len({record["id"] for record in posted}) == count
        for i, (status, answer) in enumerate(answered):
            _, _, label, person = plan(i)
            assert status == 200
            assert answer["id"] == posted[i]["id"]
            assert answer["state"] == "answered", answer
            assert answer["answer"] == {"answers": [{"id": f"q{i}", "selected": [label]}]}
            assert answer["answeredBy"] == person
        assert s.slack.calls.count("chat.postMessage") == count

        async with asyncio.timeout(30):
            for i, record in enumerate(posted):
                _, _, label, person = plan(i)
                text = await eventually(functools.partial(s.final, record), what=f"message q{i}")
                assert f"→ {label}" in text and f"by <@{person}>" in text
                assert text.count(ANSWERED_LINE) == 1
            await eventually(lambda: _equals(s.a.pending(), 0), what="A's waiters to end")
            await eventually(lambda: _equals(s.b.pending(), 0), what="B's waiters to end")
        assert await s.open_ids() == set()
        assert all(not s.notes_for(person) for person in people)
        assert s.a.alive() and s.b.alive()


# -- two people racing on different processes --------------------------------------------------


@pytest.mark.slow
async def test_two_people_racing_on_different_processes_get_exactly_one_outcome(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    rounds = 10
    async with asyncio.timeout(60), two_bots(tmp_path, redis_url, store_prefix) as s:
        other = {s.alice: s.bob, s.bob: s.alice}

        async def race(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
            asker = s.a if i % 2 == 0 else s.b
            status, posted = await asker.ask(question(f"r{i}", f"Ship {i}", f"Hold {i}"))
            assert status == 201
            polling = asyncio.ensure_future(asker.get(posted["id"], wait=30))
            try:
                # Both see the open message; alice clicks through A, bob through B, at once.
                alice_click = s.click(posted, s.alice, f"Ship {i}")
                bob_click = s.click(posted, s.bob, f"Hold {i}")
                statuses = await asyncio.gather(s.a.send(alice_click), s.b.send(bob_click))
                assert list(statuses) == [200, 200]
                _, answered = await polling
            finally:
                polling.cancel()
            return posted, answered

        outcomes = await asyncio.gather(*(race(i) for i in range(rounds)))

        losers: Counter[str] = Counter()
        for i, (posted, answered) in enumerate(outcomes):
            assert answered["state"] == "answered"
            winner = answered["answeredBy"]
            assert winner in other
            chosen = f"Ship {i}" if winner == s.alice else f"Hold {i}"
            assert answered["answer"] == {"answers": [{"id": f"r{i}", "selected": [chosen]}]}
            losers[other[winner]] += 1
            for bot in (s.a, s.b):  # both processes read the one outcome
                _, seen = await bot.get(posted["id"])
                assert (seen["answeredBy"], seen["answer"]) == (winner, answered["answer"])
            text = await eventually(functools.partial(s.final, posted), what=f"message r{i}")
            assert text.count(ANSWERED_LINE) == 1
            assert f"by <@{winner}>" in text and f"<@{other[winner]}>" not in text
            assert f"→ {chosen}" in text

        # Every loser got exactly one private note naming the winner; winners got none.
        def notes_arrived() -> bool:
            return all(len(s.notes_for(user)) == losers[user] for user in other)

        await eventually(notes_arrived, what="the losers' private notes")
        for user in other:
            for note in s.notes_for(user):
                assert note == f"This question was already answered by <@{other[user]}>."
        assert s.slack.calls.count("chat.postMessage") == rounds
        await eventually(lambda: _equals(s.a.pending(), 0), what="A's waiters to end")
        await eventually(lambda: _equals(s.b.pending(), 0), what="B's waiters to end")


# -- a process dies --------------------------------------------------------------------------


@pytest.mark.slow
async def test_sigkill_b_mid_run_and_a_keeps_working(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    async with asyncio.timeout(90), two_bots(tmp_path, redis_url, store_prefix) as s:
        mine = []
        for i in range(3):
            status, posted = await s.a.ask(question(f"a{i}", f"Go {i}", f"Stop {i}"))
            assert status == 201
            mine.append(posted)
        status, theirs = await s.b.ask(question("b0", "Go b", "Stop b"))
        assert status == 201
        assert "owner" not in await s.stored(theirs["id"])  # owned by no process
        polling = s.later(s.a.get(mine[0]["id"], wait=60))
        b_polling = s.later(s.b.get(mine[1]["id"], wait=60))  # cut off by the kill
        await eventually(lambda: _equals(s.a.pending(), 4), what="A's waiters")
        await eventually(lambda: _equals(s.b.pending(), 2), what="B's waiters")

        assert await s.b.process.stop(signal.SIGKILL) == -signal.SIGKILL
        with pytest.raises(aiohttp.ClientError):
            await b_polling

        # A answers straight away: a click through A on A's question.
        assert await s.a.send(s.click(mine[0], s.alice, "Go 0")) == 200
        _, answered = await polling
        assert answered["state"] == "answered"
        assert answered["answer"] == {"answers": [{"id": "a0", "selected": ["Go 0"]}]}

        # B's heartbeat lapses and A sweeps for orphans: B's question is nobody's orphan.
        await s.past_the_sweep_of(s.a, dead=s.b)
        _, seen = await s.a.get(theirs["id"])
        assert seen["state"] == "pending"
        assert interactive_elements(s.message(theirs).blocks)
        polling = s.later(s.a.get(theirs["id"], wait=30))
        assert await s.a.send(s.click(theirs, s.bob, "Go b")) == 200
        _, answered = await polling
        assert answered["answer"] == {"answers": [{"id": "b0", "selected": ["Go b"]}]}

        # A's other questions, and new ones, are answered through A.
        for i, posted in enumerate(mine[1:], start=1):
            assert await s.a.send(s.click(posted, s.bob, f"Stop {i}")) == 200
            _, answered = await s.a.get(posted["id"], wait=10)
            assert answered["answer"] == {"answers": [{"id": f"a{i}", "selected": [f"Stop {i}"]}]}
        for i in range(5):
            status, posted = await s.a.ask(question(f"n{i}", f"Yes {i}", f"No {i}"))
            assert status == 201
            polling = s.later(s.a.get(posted["id"], wait=10))
            assert await s.a.send(s.click(posted, s.carol, f"No {i}")) == 200
            _, answered = await polling
            assert answered["answer"] == {"answers": [{"id": f"n{i}", "selected": [f"No {i}"]}]}
            assert answered["answeredBy"] == s.carol
        await eventually(lambda: _equals(s.a.pending(), 0), what="A's waiters to end")
        assert (await s.a.health())["ok"] is True
        assert s.a.alive()
        assert await s.open_ids() == set()
        assert s.slack.calls.count("chat.postMessage") == 9
        assert not s.a.logged("OWNER_LOST")


@pytest.mark.slow
async def test_sigkill_the_asking_process_and_its_questions_live_on_in_the_other(
    tmp_path: Path, redis_admin: aioredis.Redis, store_prefix: str, redis_url: str
) -> None:
    async with asyncio.timeout(90), two_bots(tmp_path, redis_url, store_prefix) as s:
        asked = []
        for i in range(3):
            status, posted = await s.a.ask(question(f"o{i}", f"Go {i}", f"Stop {i}"))
            assert status == 201
            asked.append(posted)
        # Carol clicks on the message as her Slack client still shows it, after the end.
        late_click = s.click(asked[2], s.carol, "Go 2")
        polling = s.later(s.b.get(asked[0]["id"], wait=60))
        await eventually(lambda: _equals(s.b.pending(), 1), what="B's long-poll")

        assert await s.a.process.stop(signal.SIGKILL) == -signal.SIGKILL
        await s.past_the_sweep_of(s.b, dead=s.a)
        assert not polling.done()  # nothing ended it
        assert await s.open_ids() == {posted["id"] for posted in asked}

        for i, posted in enumerate(asked):
            _, seen = await s.b.get(posted["id"])
            assert seen["state"] == "pending"
            assert interactive_elements(s.message(posted).blocks)
            assert await s.b.send(s.click(posted, s.alice, f"Stop {i}")) == 200
            _, answered = await s.b.get(posted["id"], wait=10)
            assert answered["answer"] == {"answers": [{"id": f"o{i}", "selected": [f"Stop {i}"]}]}
        status, ended = await asyncio.wait_for(polling, 10)
        assert (status, ended["state"]) == (200, "answered")
        for posted in asked:
            text = await eventually(functools.partial(s.final, posted), what="the answer")
            assert ANSWERED_LINE in text and OWNER_LOST_NOTE not in text

        # A click after the end gets a polite private note, never silence.
        assert await s.b.send(late_click) == 200
        notes = await eventually(lambda: s.notes_for(s.carol), what="carol's note")
        assert notes == [f"This question was already answered by <@{s.alice}>."]
        assert s.slack.calls.count("chat.postMessage") == 3
        await eventually(lambda: _equals(s.b.pending(), 0), what="B's waiters to end")
        assert s.b.alive()
        assert await s.open_ids() == set()


# -- Redis itself goes away -------------------------------------------------------------------


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[RedisServer]:
    """A ``redis-server`` of this test's own (append-only file on), killed afterwards."""
    async with RedisServer.start(tmp_path / "redis") as server:
        yield server


@pytest.mark.slow
async def test_redis_restarted_mid_run_loses_no_answer(
    tmp_path: Path, private_redis: RedisServer, store_prefix: str
) -> None:
    async with asyncio.timeout(60), two_bots(tmp_path, private_redis.url, store_prefix) as s:
        status, posted = await s.a.ask()
        assert status == 201
        polling = s.later(s.a.get(posted["id"], wait=45))
        await eventually(lambda: _equals(s.a.pending(), 2), what="A's two waiters")

        began = time.monotonic()
        await private_redis.restart()
        print(f"\nRedis restarted in {_elapsed_since(began)} s")
        assert private_redis.starts == 2
        assert (await s.stored(posted["id"]))["state"] == "pending"  # the AOF kept it

        assert await s.b.send(s.click(posted, s.bob, "Wait")) == 200
        status, answered = await polling
        print(f"answer read through A {_elapsed_since(began)} s after the restart began")
        assert status == 200
        assert answered["state"] == "answered"
        assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Wait"]}]}
        assert answered["answeredBy"] == s.bob
        await eventually(lambda: _equals(s.a.pending(), 0), what="A's waiters to end")
        text = await eventually(lambda: s.final(posted), what="the answered message")
        assert f"by <@{s.bob}>" in text and "→ Wait" in text

        # Both processes are healthy and work both ways after the restart.
        for asker, clicker, label in ((s.b, s.a, "Deploy"), (s.a, s.b, "Wait")):
            assert (await asker.health())["ok"] is True
            status, again = await asker.ask()
            assert status == 201
            assert await clicker.send(s.click(again, s.alice, label)) == 200
            _, answered = await asker.get(again["id"], wait=10)
            assert answered["answer"] == {"answers": [{"id": "deploy", "selected": [label]}]}
        assert s.a.alive() and s.b.alive()
        assert await s.open_ids() == set()


@pytest.mark.slow
async def test_redis_down_longer_than_a_heartbeat_lives_loses_no_answer(
    tmp_path: Path, private_redis: RedisServer, store_prefix: str
) -> None:
    outage = HEARTBEAT_TTL + 2.0
    async with (
        asyncio.timeout(90),
        two_bots(tmp_path, private_redis.url, store_prefix, one_by_one=True) as s,
    ):
        asked: dict[str, dict[str, Any]] = {}
        for asker in (s.a, s.b):
            status, posted = await asker.ask(question(f"by-{asker.name}", "Keep", "Drop"))
            assert status == 201
            asked[asker.name] = posted
        polls = {bot.name: s.later(bot.get(asked[bot.name]["id"], wait=60)) for bot in (s.a, s.b)}
        for bot in (s.a, s.b):
            await eventually(functools.partial(_has_waiters, bot, 2), what=f"{bot.name}'s waiters")

        await private_redis.stop()
        for bot in (s.a, s.b):
            await eventually(
                functools.partial(bot.logged, "pending store lost Redis"), what="the loss"
            )
        await asyncio.sleep(outage)  # the outage itself: longer than a heartbeat key lives
        back = time.time()
        await private_redis.start_again()
        # Both processes beat twice, so every sweep after the outage has run.
        await s.beats_after(back, 2, within=20)

        # Both owners were alive all along: each question is open and gets its answer.
        for owner, clicker in ((s.a, s.b), (s.b, s.a)):
            assert await clicker.send(s.click(asked[owner.name], s.alice, "Keep")) == 200
        for owner in (s.a, s.b):
            status, answered = await polls[owner.name]
            assert (status, answered["state"]) == (200, "answered"), answered
            label = answered["answer"]["answers"][0]["selected"]
            assert label == ["Keep"]
        assert s.a.alive() and s.b.alive()


@pytest.mark.slow
async def test_redis_lost_while_running_ends_waiting_asks_with_a_clear_code(
    tmp_path: Path, private_redis: RedisServer, store_prefix: str
) -> None:
    # The outage stays shorter than a heartbeat key can live (at least TTL - interval
    # = 4 s after the last beat), so no process is taken for dead on the way.
    timeout = 2.0
    env = {"QUESTION_TIMEOUT": f"{timeout:g}"}
    async with (
        asyncio.timeout(90),
        two_bots(tmp_path, private_redis.url, store_prefix, extra_env=env) as s,
    ):
        status, posted = await s.a.ask()
        assert status == 201
        await private_redis.stop()
        lost = time.monotonic()

        async def refused() -> int:
            """A new ask during the outage: refused within a bounded time, never hanging."""
            async with s.b.api.post(f"{s.b.url}/v1/questions", json=DEPLOY) as response:
                print(f"\nan ask during the outage was refused after {_elapsed_since(lost)} s")
                return response.status

        refusal = s.later(refused())
        # The waiting ask ends when its timeout passes, and says the store is why.
        ended = await eventually(
            lambda: s.a.logged("question ended", f"request={posted['id']}"),
            within=timeout + 10,
            what="the ask to end",
        )
        print(f"the waiting ask ended {_elapsed_since(lost)} s after Redis went away")
        assert "code=STORE_UNAVAILABLE" in ended[0]
        assert await s.a.pending() == 0
        assert await asyncio.wait_for(refusal, 10) >= 500
        for bot in (s.a, s.b):
            health = await bot.health()  # alive, and saying the store is gone
            assert (health["ok"], health["store"]) == (False, "unreachable")
            assert bot.alive()
        assert s.slack.calls.count("chat.postMessage") == 1

        # Redis comes back: both reconnect (with backoff) ...
        back = time.time()
        await private_redis.start_again()
        await s.beats_after(back, 1, within=20)

        # ... A records the failure its ask ended with, and the message says so ...
        async def recorded() -> dict[str, Any] | None:
            _, seen = await s.b.get(posted["id"])
            return seen if seen["state"] != "pending" else None

        failed = await eventually(recorded, within=40, every=0.2, what="the failure recorded")
        print(f"the failure was recorded {_elapsed_since(lost)} s after Redis went away")
        assert failed["state"] == "failed"
        assert failed["error"]["code"] == "STORE_UNAVAILABLE"
        text = await eventually(lambda: s.final(posted), what="the failed message")
        assert ":warning: Failed" in text

        # ... and work resumes both ways.
        for asker, clicker, label in ((s.b, s.a, "Deploy"), (s.a, s.b, "Wait")):
            status, again = await asker.ask()
            assert status == 201
            polling = s.later(asker.get(again["id"], wait=10))
            assert await clicker.send(s.click(again, s.carol, label)) == 200
            _, answered = await polling
            assert answered["answer"] == {"answers": [{"id": "deploy", "selected": [label]}]}
        for bot in (s.a, s.b):
            assert bot.logged("pending store reconnected to Redis")
        assert await s.open_ids() == set()


@pytest.mark.slow
async def test_while_redis_is_down_the_api_answers_store_unavailable(
    tmp_path: Path, private_redis: RedisServer, store_prefix: str
) -> None:
    async with asyncio.timeout(60), two_bots(tmp_path, private_redis.url, store_prefix) as s:
        status, posted = await s.a.ask()
        assert status == 201
        await private_redis.stop()
        url = f"/v1/questions/{posted['id']}"
        for bot, method, path in (
            (s.a, "POST", "/v1/questions"),
            (s.b, "GET", url),
            (s.b, "DELETE", url),
        ):
            body = DEPLOY if method == "POST" else None
            began = time.monotonic()
            async with bot.api.request(method, f"{bot.url}{path}", json=body) as response:
                problem = await bot.json_of(response)
                assert response.status in (500, 503), (method, response.status, problem)
            assert time.monotonic() - began < 15
            assert problem["code"] == "STORE_UNAVAILABLE", (method, problem)


@pytest.mark.slow
async def test_redis_unreachable_at_start_is_a_clear_error_naming_redis_url(
    tmp_path: Path,
) -> None:
    password = f"pw-{secrets.token_hex(8)}"
    url = f"redis://:{password}@127.0.0.1:{free_port()}/0"  # nothing listens there
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": "C0AGENTS",
        "SLACK_API_URL": "http://127.0.0.1:9/api/",
        "PORT": "0",
        "BOT_API_TOKEN": API_TOKEN,
        "REDIS_URL": url,
    }
    began = time.monotonic()
    code, out, err = await run_bot_command([], env, cwd=tmp_path, within=20)
    elapsed = _elapsed_since(began)
    assert code != 0 and code == 1, err
    assert elapsed < 10, f"took {elapsed} s to give up"
    assert "REDIS_URL" in err
    assert "cannot reach the Redis pending store" in err
    assert "127.0.0.1" in err
    assert password not in out + err
    assert "Traceback" not in err
    assert "bot listening on" not in out
