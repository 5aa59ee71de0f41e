"""Hardening: forged requests, Web API faults, races and aborts at volume, random requests.

Every test drives the real bolt app through ``SlackHarness`` (signed, form-encoded HTTP on
127.0.0.1, the Slack stand-in for the Web API), or the real bot process for one of them, is
bounded with ``asyncio.timeout`` and uses seeded randomness (hypothesis derandomized), so it
neither hangs nor flakes on a small machine.
"""

from __future__ import annotations

import asyncio
import random
import string
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from adapters.slack.model import ids
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import TERMINAL_STATES, PendingRecord
from adapters.slack.sandbox.blockcheck import check_message
from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.signing import build_interaction_request, send_interaction
from adapters.slack.sandbox.webapi import SlackStandIn
from adapters.slack.stores import MemoryPendingStore, PendingStore
from bot.questions.abort import AbortController
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionAnswer
from tests.bot_process import BotProcess
from tests.slack_harness import SECRET, SlackHarness, all_text, interactive_elements, until

PHASES = (Phase.explicit, Phase.generate, Phase.shrink)
"""No ``explain`` phase: it imports libcst, whose import warns (and warnings are errors)."""


def one(question: str, options: list[str]) -> dict[str, Any]:
    return {
        "questions": [{"id": "q", "question": question, "options": [{"label": o} for o in options]}]
    }


def count_endings(store: MemoryPendingStore) -> Counter[str]:
    """Count, per request, the writes that moved it from pending to an ending."""
    endings: Counter[str] = Counter()
    get = store.get
    compare_and_set = store.compare_and_set

    async def counted(record: PendingRecord, event: AuditEvent | None = None) -> bool:
        before = await get(record.id)  # the memory store never suspends: get + set is atomic
        won = await compare_and_set(record, event)
        if won and record.state in TERMINAL_STATES and before is not None and before.is_open:
            endings[record.id] += 1
        return won

    store.compare_and_set = counted  # type: ignore[method-assign]
    return endings


class Posted:
    """``AskOptions.on_posted`` for many asks: an event per request id."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}

    def options(self, rid: str) -> AskOptions:
        self.events[rid] = asyncio.Event()
        return AskOptions(request_id=rid, on_posted=lambda r: self.events[r].set())

    async def wait(self, rid: str, task: asyncio.Task[Any]) -> bool:
        """Wait until the request is in Slack (True) or its ask has ended first (False)."""
        posted = asyncio.ensure_future(self.events[rid].wait())
        try:
            await asyncio.wait({posted, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            posted.cancel()
        return self.events[rid].is_set()


async def message_of(h: SlackHarness, store: PendingStore, rid: str) -> Message:
    record = await store.get(rid)
    assert record is not None and record.message_ts is not None
    return h.slack.workspace.message(record.message_channel or record.channel, record.message_ts)


async def settle(h: SlackHarness, within: float = 20.0) -> None:
    """Wait until the provider's background Web API work is done."""
    await until(lambda: h.provider.background_count == 0, within=within, what="background tasks")


async def outcomes(
    tasks: list[asyncio.Task[AskUserQuestionAnswer]],
) -> list[AskUserQuestionAnswer | BaseException]:
    return list(await asyncio.gather(*tasks, return_exceptions=True))


# -- forged requests ------------------------------------------------------------------------


async def _post(url: str, body: str, headers: dict[str, str]) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body.encode(), headers=headers) as response,
    ):
        await response.read()
        return response.status


async def _assert_untouched(h: SlackHarness, rid: str, version: int, before: int) -> None:
    await asyncio.sleep(0.05)  # anything a listener started would have reached the stand-in
    assert [c.method for c in h.slack.calls][before:] == []
    assert h.provider.background_count == 0
    record = await h.provider.store.get(rid)
    assert record is not None and record.state == "pending" and record.version == version
    assert h.provider.pending_count == 1


async def ask_one(h: SlackHarness, question: str) -> tuple[str, asyncio.Task[Any], Message]:
    """Ask one question and wait until the provider knows its message (posted and stored)."""
    posted = Posted()
    rid = ids.new_request_id()
    task = h.ask(one(question, ["Yes", "No"]), options=posted.options(rid))
    assert await posted.wait(rid, task)
    return rid, task, await message_of(h, h.provider.store, rid)


async def test_forged_requests_get_401_and_change_nothing() -> None:
    async with asyncio.timeout(20), SlackHarness() as h:
        rid, task, message = await ask_one(h, "Deploy?")
        record = await h.provider.store.get(rid)
        assert record is not None
        payload = h.slack.click(message, user=h.alice, text="Yes")
        now = int(time.time())
        body, headers = build_interaction_request(payload, SECRET)
        other = h.slack.click(message, user=h.bob, text="No")
        other_body, _ = build_interaction_request(other, SECRET)
        stale_body, stale_headers = build_interaction_request(payload, SECRET, timestamp=now - 400)
        forged = {
            "wrong secret": build_interaction_request(payload, "not-the-secret"),
            "stale timestamp": (stale_body, stale_headers),
            "future timestamp": build_interaction_request(payload, SECRET, timestamp=now + 400),
            "replayed body, fresh timestamp": (
                stale_body,
                {**stale_headers, "X-Slack-Request-Timestamp": str(now)},
            ),
            "another body under this signature": (other_body, headers),
            "no signature": (body, {k: v for k, v in headers.items() if k != "X-Slack-Signature"}),
            "no timestamp": (
                body,
                {k: v for k, v in headers.items() if k != "X-Slack-Request-Timestamp"},
            ),
            "garbage signature": (body, {**headers, "X-Slack-Signature": "v0=" + "0" * 64}),
        }
        before = len(h.slack.calls)
        for name, (forged_body, forged_headers) in forged.items():
            status = await _post(h.events_url, forged_body, forged_headers)
            assert status == 401, name
        await _assert_untouched(h, rid, record.version, before)
        assert not task.done()
        # the genuine request still works
        assert await _post(h.events_url, body, headers) == 200
        assert (await task).answers[0].selected == ["Yes"]


_MUTATION = st.one_of(
    st.tuples(st.just("replace"), st.integers(0, 10**6), st.characters(codec="ascii")),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.text(string.printable, min_size=1)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 40)),
    st.tuples(
        st.just("field"),
        st.sampled_from(["user", "value", "block_id", "action_id", "ts", "team"]),
        st.text(string.ascii_letters + string.digits + ":._", min_size=1, max_size=30),
    ),
)


def _tamper(body: str, payload: dict[str, Any], mutation: tuple[Any, ...]) -> str:
    kind = mutation[0]
    if kind == "field":
        field, value = mutation[1], mutation[2]
        changed = {**payload, "actions": [dict(payload["actions"][0])]}
        if field == "user":
            changed["user"] = {**payload["user"], "id": value}
        elif field == "team":
            changed["team"] = {**payload["team"], "id": value}
        elif field == "ts":
            changed["container"] = {**payload["container"], "message_ts": value}
        else:
            changed["actions"][0][field] = value
        tampered, _ = build_interaction_request(changed, SECRET)
        return tampered
    position = int(mutation[1]) % (len(body) + 1)
    if kind == "replace":
        position = min(position, len(body) - 1)
        return body[:position] + str(mutation[2]) + body[position + 1 :]
    if kind == "insert":
        return body[:position] + str(mutation[2]) + body[position:]
    return body[:position] + body[position + int(mutation[2]) :]


@pytest.mark.slow
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutation=_MUTATION)
async def test_tampered_payloads_get_401_and_change_nothing(mutation: tuple[Any, ...]) -> None:
    async with asyncio.timeout(10), SlackHarness() as h:
        rid, task, message = await ask_one(h, "Ship?")
        record = await h.provider.store.get(rid)
        assert record is not None
        payload = h.slack.click(message, user=h.alice, text="Yes")
        body, headers = build_interaction_request(payload, SECRET)
        tampered = _tamper(body, payload, mutation)
        assume(tampered != body)  # a no-op replacement is no tampering
        before = len(h.slack.calls)
        assert await _post(h.events_url, tampered, headers) == 401
        await _assert_untouched(h, rid, record.version, before)
        assert not task.done()


UNPARSEABLE: dict[str, bytes] = {
    "truncated payload JSON": b"payload=%7B%22type%22%3A%22block_actions%22%2C",
    "a payload that is not JSON": b"payload=not-json",
    "a JSON body cut short": b'{"type": "block_actions", ',
    "bytes that are not UTF-8": b"payload=\xff\xfe",
}


@pytest.mark.slow
async def test_the_bot_refuses_unparseable_forged_bodies_with_401(tmp_path: Path) -> None:
    """The real bot (``python -m bot``, HTTP mode): bolt parses a body before it checks the
    signature, so a forged body that does not parse used to get a 500 and a traceback."""
    secret = "hardening-signing-secret"
    slack = SlackStandIn(signing_secret=secret)
    channel = slack.workspace.add_channel("agents").id
    await slack.start()
    env = {
        "SLACK_BOT_TOKEN": slack.token,
        "SLACK_SIGNING_SECRET": secret,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "BOT_API_TOKEN": "hardening-api-token",
    }
    try:
        async with asyncio.timeout(40), BotProcess.start(env, cwd=tmp_path) as bot:
            statuses: dict[str, int] = {}
            for name, body in UNPARSEABLE.items():
                headers = {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Slack-Request-Timestamp": str(int(time.time())),
                    "X-Slack-Signature": "v0=" + "ab" * 32,
                }
                async with (
                    aiohttp.ClientSession() as session,
                    session.post(f"{bot.url}/slack/events", data=body, headers=headers) as r,
                ):
                    statuses[name] = r.status
            assert statuses == dict.fromkeys(UNPARSEABLE, 401)
            assert slack.calls.count("chat.postMessage") == 0
    finally:
        await slack.stop()


# -- faults on the Web API ------------------------------------------------------------------


@pytest.mark.slow
async def test_web_api_faults_on_every_method_while_100_questions_are_asked_and_answered() -> None:
    store = MemoryPendingStore(process_id="faults")
    endings = count_endings(store)
    n = 100
    async with asyncio.timeout(60), SlackHarness(store=store) as h:
        h.client.timeout = 1  # seconds per HTTP attempt: the slow answers below time out
        faults = h.slack.faults
        faults.add(kind="ratelimit", rate=0.06, retry_after=0)
        faults.add(kind="server_error", status=500, rate=0.04)
        faults.add(kind="server_error", status=503, rate=0.04)
        faults.add(kind="drop", rate=0.04)
        faults.add(kind="delay", rate=0.05, delay=0.05)
        faults.add(kind="delay", rate=0.02, delay=1.5)
        posted = Posted()
        rids = [ids.new_request_id() for _ in range(n)]
        labels = [("Yes", "No")[i % 2] for i in range(n)]
        tasks = [
            h.ask(one(f"Release {i}?", ["Yes", "No"]), options=posted.options(rid))
            for i, rid in enumerate(rids)
        ]
        async with aiohttp.ClientSession() as session:

            async def answer(i: int) -> None:
                if not await posted.wait(rids[i], tasks[i]):
                    return  # the ask failed before Slack took the question
                message = await message_of(h, store, rids[i])
                payload = h.slack.click(message, user=(h.alice, h.bob)[i % 2], text=labels[i])
                # the click's path makes no Web API call: it is acked whatever Slack's API does
                acked = await send_interaction(session, h.events_url, payload, SECRET)
                assert acked == (200, "")

            await asyncio.gather(*(answer(i) for i in range(n)))
        results = await outcomes(tasks)
        answered = 0
        for rid, label, result in zip(rids, labels, results, strict=True):
            if isinstance(result, AskUserQuestionAnswer):
                answered += 1
                assert result.to_wire() == {"answers": [{"id": "q", "selected": [label]}]}
                record = await store.get(rid)
                assert record is not None and record.state == "answered"
                assert record.answer == result
            else:
                assert isinstance(result, UserQuestionError), repr(result)
                assert result.code == "DELIVERY_FAILED", result
                assert result.message
        assert all(endings[rid] == 1 for rid in rids), {r: endings[r] for r in rids}
        assert answered >= n * 0.8, answered  # the retries get most questions through
        fired = Counter(c.fault for c in h.slack.calls if c.fault is not None)
        assert set(fired) >= {"ratelimit", "server_error", "drop", "delay"}, fired
        assert h.provider.pending_count == 0
        assert await store.open_records() == []
        await settle(h)


async def test_a_click_is_acked_and_answers_while_auth_test_fails() -> None:
    """bolt's default authorization calls auth.test on the first request and refuses clicks
    while it fails ("please reinstall this app"); the bot resolves its identity at start."""
    async with asyncio.timeout(30), SlackHarness() as h:
        _, task, message = await ask_one(h, "Roll back?")
        # three failures in a row: the first call and both of slack_sdk's 5xx retries
        h.slack.faults.add(kind="server_error", method="auth.test", status=503, count=3)
        payload = h.slack.click(message, user=h.alice, text="Yes")
        assert await h.slack.deliver(payload) == (200, "")  # acked by our listener
        assert (await asyncio.wait_for(task, 5)).answers[0].selected == ["Yes"]


# -- races at volume ------------------------------------------------------------------------


@pytest.mark.slow
async def test_500_questions_each_clicked_twice_at_once_resolve_once_and_tell_the_loser() -> None:
    store = MemoryPendingStore(process_id="races")
    endings = count_endings(store)
    n = 500
    async with asyncio.timeout(60), SlackHarness(store=store) as h:
        posted = Posted()
        rids = [ids.new_request_id() for _ in range(n)]
        tasks = [
            h.ask(one(f"Merge PR {i}?", ["Yes", "No"]), options=posted.options(rid))
            for i, rid in enumerate(rids)
        ]
        for rid, task in zip(rids, tasks, strict=True):
            assert await posted.wait(rid, task)
        messages = [await message_of(h, store, rid) for rid in rids]
        gate = asyncio.Semaphore(40)
        connector = aiohttp.TCPConnector(limit=100)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def both(message: Message) -> None:
                pair = [
                    h.slack.click(message, user=h.alice, text="Yes"),
                    h.slack.click(message, user=h.bob, text="No"),
                ]
                async with gate:
                    answers = await asyncio.gather(
                        *(send_interaction(session, h.events_url, p, SECRET) for p in pair)
                    )
                assert [status for status, _ in answers] == [200, 200]

            await asyncio.gather(*(both(m) for m in messages))
        results = await outcomes(tasks)
        won = Counter[str]()
        for result in results:
            assert isinstance(result, AskUserQuestionAnswer), repr(result)
            (chosen,) = result.answers[0].selected
            won["alice" if chosen == "Yes" else "bob"] += 1
        assert won["alice"] + won["bob"] == n
        assert all(endings[rid] == 1 for rid in rids)
        await settle(h)

        def notes() -> tuple[int, int]:
            return len(h.ephemerals(h.alice)), len(h.ephemerals(h.bob))

        await until(lambda: sum(notes()) >= n, within=20, what=f"{n} private notes")
        await asyncio.sleep(0.1)
        assert notes() == (won["bob"], won["alice"])  # each loser told once, privately
        for note in h.ephemerals(h.alice) + h.ephemerals(h.bob):
            assert "already answered by" in note.text
        for message, result in zip(messages, results, strict=True):
            assert isinstance(result, AskUserQuestionAnswer)
            final = h.current(message)
            winner = h.alice if result.answers[0].selected == ["Yes"] else h.bob
            assert interactive_elements(final.blocks) == []
            assert f"<@{winner}>" in all_text(final.blocks)
        assert h.provider.pending_count == 0
        assert await store.open_records() == []


# -- abort storm ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_abort_storm_500_asks_aborted_at_random_moments_end_exactly_once() -> None:
    store = MemoryPendingStore(process_id="aborts")
    endings = count_endings(store)
    rng = random.Random(20240611)
    n = 500
    async with asyncio.timeout(60), SlackHarness(store=store) as h:
        posted = Posted()
        rids = [ids.new_request_id() for _ in range(n)]
        controllers = [AbortController() for _ in range(n)]
        # early: abort while the question may still be on its way to Slack; late: after it
        # is posted; racing: while a click on it is in flight (after a random number of
        # event-loop turns, so "a random moment" scales with the machine's speed);
        # clicked: once the click is acked (the answer must win).
        plans = [rng.choice(["early", "late", "racing", "racing", "clicked"]) for _ in range(n)]
        delays = [rng.uniform(0, 0.02) for _ in range(n)]
        turns = [rng.randrange(0, 60) for _ in range(n)]
        tasks = [
            h.ask(
                one(f"Rotate key {i}?", ["Yes", "No"]),
                options=posted.options(rid),
                signal=controllers[i].signal,
            )
            for i, rid in enumerate(rids)
        ]
        clicks: list[asyncio.Task[tuple[int, str]]] = []
        in_flight = 0
        async with aiohttp.ClientSession() as session:

            async def storm(i: int) -> None:
                nonlocal in_flight
                if plans[i] == "early":
                    await asyncio.sleep(delays[i])
                    controllers[i].abort("early")
                    return
                if not await posted.wait(rids[i], tasks[i]):
                    return
                if plans[i] == "late":
                    await asyncio.sleep(delays[i])
                    controllers[i].abort("late")
                    return
                message = await message_of(h, store, rids[i])
                payload = h.slack.click(message, user=h.carol, text="Yes")
                click = asyncio.ensure_future(
                    send_interaction(session, h.events_url, payload, SECRET)
                )
                clicks.append(click)
                if plans[i] == "clicked":
                    await click
                else:
                    for _ in range(turns[i]):
                        await asyncio.sleep(0)
                    in_flight += not click.done()
                controllers[i].abort(plans[i])

            await asyncio.gather(*(storm(i) for i in range(n)))
            statuses = await asyncio.gather(*clicks)
        assert all(status == 200 for status, _ in statuses)
        results = await outcomes(tasks)
        kinds = Counter[str]()
        for plan, result in zip(plans, results, strict=True):
            if isinstance(result, AskUserQuestionAnswer):
                assert plan in ("racing", "clicked")
                assert result.answers[0].selected == ["Yes"]
                kinds[f"{plan}: answered"] += 1
            else:
                assert isinstance(result, UserQuestionError), repr(result)
                assert result.code == "ASK_ABORTED", result.message
                assert plan != "clicked"  # an acked click has won: the later abort is moot
                kinds[f"{plan}: aborted"] += 1
        assert kinds["racing: aborted"] > 0 and kinds["late: aborted"] > 0
        assert in_flight > 0  # some aborts really landed while their click was in flight
        for rid in rids:
            assert endings[rid] <= 1  # ``== 0`` only if aborted before it was even stored
            record = await store.get(rid)
            assert record is None or not record.is_open
            assert (record is None) == (endings[rid] == 0)
        await settle(h)
        for message in h.top_messages():
            assert interactive_elements(h.current(message).blocks) == [], all_text(message.blocks)
        assert h.provider.pending_count == 0
        assert h.provider.background_count == 0
        assert await store.open_records() == []


# -- random requests ------------------------------------------------------------------------

_SPECIALS = [
    "*bold*", "_it_", "~gone~", "`code`", "```block```", "> quote", "<!channel>", "<!here>",
    "<@U0123ABC>", "<#C0123|general>", "<https://evil.example|docs>", "&amp;", "&", "<", ">",
    ":smile:", "\n", "\n\n", "  ", "\t", "😀", "🚀", "👍🏽", "🇺🇸", "👩‍👩‍👧", "é", "中文", "\u200b",
    "# Heading", "- item", "1. step", "|", "\\",
]  # fmt: skip
_PIECE = st.one_of(
    st.sampled_from(_SPECIALS),
    st.text(string.ascii_letters + string.digits + " .,-", min_size=0, max_size=12),
)
_SHORT = st.lists(_PIECE, min_size=0, max_size=5).map("".join)
_LONG = st.tuples(_SHORT, st.integers(1, 800)).map(lambda t: t[0] * t[1])
_TEXT = st.one_of(_SHORT, _SHORT, _SHORT, _LONG)


@st.composite
def _question(draw: Callable[[Any], Any], index: int) -> dict[str, Any]:
    count = draw(st.one_of(st.integers(0, 6), st.integers(0, 150)))
    label = draw(_TEXT)
    numbered = draw(st.booleans())
    description = draw(st.none() | _TEXT)
    options = [
        {
            "label": f"{label}{i}" if numbered else label,
            **({"description": description} if description is not None else {}),
        }
        for i in range(count)
    ]
    # An empty question text has its own test (test_an_empty_question_still_has_a_...).
    item: dict[str, Any] = {"id": f"q{index}", "question": draw(_TEXT.filter(bool))}
    if options or draw(st.booleans()):
        item["options"] = options
    header = draw(st.none() | _SHORT)
    if header is not None:
        item["header"] = header
    detail = draw(st.none() | _TEXT)
    if detail is not None:
        item["detail"] = detail
    multi = draw(st.none() | st.booleans())
    if multi is not None:
        item["multiSelect"] = multi
    if options and detail is not None and draw(st.booleans()):
        item["intent"] = {"kind": "plan-review", "approve": options[0]["label"]}
    return item


@st.composite
def _request(draw: Callable[[Any], Any]) -> dict[str, Any]:
    count = draw(st.one_of(st.integers(1, 3), st.integers(1, 30)))
    return {"questions": [draw(_question(i)) for i in range(count)]}


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(wire=_request())
async def test_random_requests_post_valid_block_kit_or_fail_naming_the_limit(
    wire: dict[str, Any],
) -> None:
    async with asyncio.timeout(20), SlackHarness() as h:
        controller = AbortController()
        posted = asyncio.Event()
        task = h.ask(
            wire, options=AskOptions(on_posted=lambda _: posted.set()), signal=controller.signal
        )
        waiting = asyncio.ensure_future(posted.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        posts = h.slack.calls("chat.postMessage")
        if task.done():
            error = task.exception()
            assert isinstance(error, UserQuestionError), repr(error)
            assert error.code == "SLACK_LIMIT", error
            assert "at most" in error.message or "limit" in error.message, error.message
            assert posts == []  # nothing half-posted
            assert h.provider.pending_count == 0
            return
        assert posts and all(call.ok for call in posts), [c.response for c in posts]
        for message in h.slack.workspace.all_messages():
            assert check_message(message.blocks, message.text) == []
        controller.abort()
        with pytest.raises(UserQuestionError) as aborted:
            await task
        assert aborted.value.code == "ASK_ABORTED"
        await settle(h)
        updates = h.slack.calls("chat.update")
        assert updates and all(call.ok for call in updates), [c.response for c in updates]
        for message in h.top_messages():
            final = h.current(message)
            assert check_message(final.blocks, final.text) == []
            assert interactive_elements(final.blocks) == []


async def test_an_empty_question_still_has_a_notification_text() -> None:
    """The message's top-level text (notifications, screen readers) is never empty."""
    async with asyncio.timeout(10), SlackHarness() as h:
        posted = Posted()
        rid = ids.new_request_id()
        wire = {"questions": [{"id": "q", "question": "", "options": [{"label": "Yes"}]}]}
        task = h.ask(wire, options=posted.options(rid))
        assert await posted.wait(rid, task), repr(task.exception())
        assert h.slack.calls.last("chat.postMessage").params["text"].strip()
        task.cancel()


# -- the shared store under a burst ---------------------------------------------------------
# (redis-py's default async pool raised "Too many connections" past 100 connections, failing
# asks with STORE_UNAVAILABLE under a burst; the store now waits for a pooled connection.)


@pytest.mark.slow
async def test_150_asks_at_once_through_the_redis_store_are_all_posted_and_answered(
    redis_store_factory: Callable[..., Awaitable[PendingStore]],
) -> None:
    store = await redis_store_factory()
    n = 150
    async with asyncio.timeout(30), SlackHarness(store=store) as h:
        posted = Posted()
        rids = [ids.new_request_id() for _ in range(n)]
        tasks = [
            h.ask(one(f"Scale shard {i}?", ["Yes", "No"]), options=posted.options(rid))
            for i, rid in enumerate(rids)
        ]
        async with aiohttp.ClientSession() as session:

            async def answer(i: int) -> None:
                if not await posted.wait(rids[i], tasks[i]):
                    return
                message = await message_of(h, store, rids[i])
                payload = h.slack.click(message, user=h.alice, text="Yes")
                await send_interaction(session, h.events_url, payload, SECRET)

            await asyncio.gather(*(answer(i) for i in range(n)))
        results = await outcomes(tasks)
        failed = [r for r in results if not isinstance(r, AskUserQuestionAnswer)]
        assert failed == []
        assert h.provider.pending_count == 0
        assert await store.open_records() == []
