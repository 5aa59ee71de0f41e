"""The ``/v1`` API's answers to a reviewer's findings: what it reads before the token, what
``revises`` lets one token see of another's, what a store outage tells a client, and what
``Idempotency-Key`` retries get.

The bot runs in process (``bot.app.runtime.start``) in HTTP mode against the Slack stand-in, on a
real store (SQLite, or a private ``redis-server`` for the outage); requests that must stop
after their head go over a raw socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack import QuestionStatus
from adapters.slack.render.messages import unknown_revised
from bot.api.access import ApiTokens
from bot.api.answers import view_of
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError
from tests.api.test_gateway import API_TOKEN, DEPLOY, Bed, running
from tests.attack_tools import LogTap
from tests.redis_server import RedisServer
from tests.slack_harness import all_text

pytestmark = pytest.mark.timeout(90)

BIG = 1_000_000
"""A ``Content-Length`` far over the tests' ``MAX_BODY_BYTES`` (1024), never sent."""


# -- 1: the token and MAX_BODY_BYTES come before the body ----------------------------------


@contextlib.asynccontextmanager
async def connection(bed: Bed) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    host, port = bed.runtime.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def head(bed: Bed, path: str = "/v1/questions", *lines: str, method: str = "POST") -> bytes:
    """A request head for ``path`` on ``bed`` (the extra header ``lines`` included)."""
    host = bed.runtime.url.removeprefix("http://")
    shown = "".join(f"{line}\r\n" for line in lines)
    return (
        f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{shown}\r\n"
    ).encode()


async def answer_to(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The status of the next (non-1xx) answer, and its head. The bound is far under the
    tests' 60 s BODY_TIMEOUT: an answer that waits for the body never sent fails here."""
    while True:
        block = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
        status = int(block.split(b" ", 2)[1])
        if status >= 200:
            return status, block


async def head_only(bed: Bed, request: bytes) -> tuple[int, bytes]:
    """Send ``request``'s head alone (the body it announces never follows); the answer."""
    async with connection(bed) as (reader, writer):
        writer.write(request)
        await writer.drain()
        return await answer_to(reader)


TOKEN = f"Authorization: Bearer {API_TOKEN}"
LONG = f"Content-Length: {BIG}"


async def test_a_request_without_a_token_is_401_before_any_of_its_body_is_sent() -> None:
    async with running(max_body_bytes=1024, body_timeout=60.0) as bed:
        status, answer = await head_only(bed, head(bed, "/v1/questions", LONG))
        assert status == 401, answer
        assert b"WWW-Authenticate: Bearer" in answer
        # a wrong token, and every other route, alike
        some = "/v1/questions/0123456789abcdef0123"
        for request in (
            head(bed, "/v1/questions", "Authorization: Bearer wrong-token", LONG),
            head(bed, some, LONG, method="GET"),
            head(bed, some, LONG, method="DELETE"),
            head(bed, "/v1/audit?since=1h", LONG, method="GET"),
            head(bed, "/v1/openapi.json", LONG, method="GET"),
        ):
            status, answer = await head_only(bed, request)
            assert status == 401, (request, answer)
        assert "slow_body" not in bed.runtime.gateway.refusals.counts
        assert bed.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
async def test_a_content_length_over_max_body_bytes_is_413_before_the_body_is_sent() -> None:
    async with running(max_body_bytes=1024, body_timeout=60.0) as bed:
        status, answer = await head_only(bed, head(bed, "/v1/questions", TOKEN, LONG))
        assert status == 413, answer
        # with no token at all, the 401 comes first
        status, answer = await head_only(bed, head(bed, "/v1/questions", LONG))
        assert status == 401, answer
        # a body within the limit is read and asked
        status, posted = await bed.ask()
        assert status == 201, posted


async def test_a_chunked_body_is_cut_at_max_body_bytes_not_read_to_its_end() -> None:
    async with running(max_body_bytes=1024, body_timeout=60.0) as bed:
        async with connection(bed) as (reader, writer):
            writer.write(head(bed, "/v1/questions", TOKEN, "Transfer-Encoding: chunked"))
            chunk = b" " * 512
            for _ in range(4):  # 2 KiB, and the body never ends
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            status, answer = await answer_to(reader)
        assert status == 413, answer
        assert bed.runtime.gateway.refusals.counts.get("too_large") == 1


@pytest.mark.slow
async def test_expect_100_continue_is_answered_only_when_the_body_will_be_read() -> None:
    async with running(max_body_bytes=1024, body_timeout=60.0) as bed:
        # no token: the 401, and never a 100 Continue asking for the body
        async with connection(bed) as (reader, writer):
            lines = ["Expect: 100-continue", LONG]
            writer.write(head(bed, "/v1/questions", *lines))
            await writer.drain()
            first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
        assert first.startswith(b"HTTP/1.1 401"), first
        # a token, but over the limit: the 413, no 100 either
        async with connection(bed) as (reader, writer):
            writer.write(head(bed, "/v1/questions", TOKEN, *lines))
            await writer.drain()
            first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
        assert first.startswith(b"HTTP/1.1 413"), first
        # a token and a body within the limit: 100 Continue, then the question is asked
        body = (
            b'{"questions": [{"id": "q", "question": "Ship it?", "options": [{"label": "Yes"}]}]}'
        )
        async with connection(bed) as (reader, writer):
            lines = ["Expect: 100-continue", f"Content-Length: {len(body)}"]
            writer.write(head(bed, "/v1/questions", TOKEN, *lines))
            await writer.drain()
            first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
            assert first.startswith(b"HTTP/1.1 100"), first
            writer.write(body)
            await writer.drain()
            status, answer = await answer_to(reader)
        assert status == 201, answer
        assert bed.slack.calls.count("chat.postMessage") == 1


@pytest.mark.slow
async def test_a_request_no_route_takes_is_answered_without_its_body() -> None:
    async with running(max_body_bytes=1024, body_timeout=60.0) as bed:
        for path, expected in (("/v1/nothing-here", 404), ("/healthz", 405)):
            status, answer = await head_only(bed, head(bed, path, LONG))
            assert status == expected, (path, answer)


# -- 2: ``revises`` names only the asking token's own reviews ------------------------------

ALPHA = f"alpha-{uuid.uuid4().hex}"
BETA = f"beta-{uuid.uuid4().hex}"
TWO_TOKENS = {"bot_api_token": None, "bot_api_tokens": (("alpha", ALPHA), ("beta", BETA))}
SECRET_PLAN = "1. Rotate the prod DB password to hunter2\n2. Switch reads"


def plan(detail: str, **extra: Any) -> dict[str, Any]:
    question = {
        "id": "plan",
        "question": "Approve the migration plan?",
        "detail": detail,
        "options": [{"label": "Approve"}, {"label": "Decline"}],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }
    return {"questions": [question], **extra}


async def ask_as(bed: Bed, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"}
    async with bed.http.post("/v1/questions", json=body, headers=headers) as response:
        return response.status, await response.json()


def shown_everywhere(bed: Bed) -> str:
    """Every text the stand-in's workspace holds (messages and thread replies)."""
    return "\n".join(
        all_text(message.blocks) + (message.text or "")
        for messages in bed.slack.workspace.messages.values()
        for message in messages
    )


@pytest.mark.slow
async def test_revises_naming_another_tokens_review_is_answered_as_an_unknown_id() -> None:
    async with running(**TWO_TOKENS) as bed:
        status, alphas = await ask_as(bed, ALPHA, plan(SECRET_PLAN))
        assert status == 201, alphas
        messages = len(bed.messages())
        mine = plan("1. Something else")
        # an id beta owns but that names no question: the provider's own BAD_REVIEW
        unknown = ApiTokens({"alpha": ALPHA, "beta": BETA}).tagged_id("beta", None)
        assert unknown is not None
        answers = {}
        for revised in (alphas["id"], unknown, "f" * 32):
            status, problem = await ask_as(bed, BETA, {**mine, "revises": revised})
            answers[revised] = (status, problem)
        expected = {
            revised: (422, {"name": "UserQuestionError", "code": "BAD_REVIEW", "message": text})
            for revised, text in ((r, unknown_revised(r)) for r in answers)
        }
        assert answers == expected
        assert len(bed.messages()) == messages  # nothing posted for beta
        assert "hunter2" in shown_everywhere(bed)  # alpha's own message shows it ...
        assert len([m for m in bed.messages() if "hunter2" in all_text(m.blocks)]) == 1
        # ... and alpha may revise its own review, beta its own
        status, revised = await ask_as(bed, ALPHA, plan("1. Rotate later", revises=alphas["id"]))
        assert status == 201, revised
        status, betas = await ask_as(bed, BETA, plan("1. Beta's plan"))
        assert status == 201, betas
        status, again = await ask_as(bed, BETA, plan("1. Beta's plan, v2", revises=betas["id"]))
        assert status == 201, again
        text = all_text(bed.messages()[-1].blocks)
        assert "previous review" in text and "hunter2" not in text


# -- 3: STORE_UNAVAILABLE tells a client no path or address ---------------------------------


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """The SQLite file held by another program (a backup, a tool) for a while."""
    blocker = sqlite3.connect(path, timeout=0)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        blocker.rollback()
        blocker.close()


async def every_route(bed: Bed, request_id: str) -> list[tuple[str, int, dict[str, Any]]]:
    """POST, GET, DELETE and the audit trail's answers while the store fails."""
    answers = []
    for method, path, body in (
        ("POST", "/v1/questions", DEPLOY),
        ("GET", f"/v1/questions/{request_id}", None),
        ("DELETE", f"/v1/questions/{request_id}", None),
        ("GET", "/v1/audit?since=1h", None),
    ):
        async with bed.http.request(method, path, json=body) as response:
            answers.append((f"{method} {path}", response.status, await response.json()))
    return answers


STORE_DOWN = "the pending store is unavailable; retry"
STORE_DOWN_PROBLEM = {"name": "UserQuestionError", "code": STORE_UNAVAILABLE, "message": STORE_DOWN}


@pytest.mark.slow
async def test_a_sqlite_failure_tells_the_client_no_file_path() -> None:
    async with running() as bed:
        path = bed.runtime.settings.store_path
        _, posted = await bed.ask()
        with LogTap() as tap, locked(Path(path)):
            async with bed.http.delete(f"/v1/questions/{posted['id']}") as response:
                status, problem = response.status, await response.json()
        assert (status, problem) == (503, STORE_DOWN_PROBLEM)
        # the operator still learns what failed, from the log
        logged = tap.refusals("store_unavailable")
        assert logged and str(path) in str(logged[0].__dict__.get("error")), logged


@pytest.mark.slow
async def test_a_redis_outage_tells_the_client_no_address_on_any_route(tmp_path: Path) -> None:
    prefix = f"h-{uuid.uuid4().hex}"
    async with (
        RedisServer.start(tmp_path) as server,
        running(redis_url=server.url, redis_prefix=prefix) as bed,
    ):
        _, posted = await bed.ask()
        await server.stop()
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        answers = await every_route(bed, posted["id"])
        for route, status, problem in answers:
            assert (status, problem) == (503, STORE_DOWN_PROBLEM), (route, problem)
            assert port not in problem["message"]


def test_a_question_failed_by_the_store_shows_the_fixed_words_too() -> None:
    error = UserQuestionError(
        "the pending store could not settle the question: SQLite at /srv/bot/q.db is locked",
        STORE_UNAVAILABLE,
    )
    status = QuestionStatus(
        id="0123456789abcdef0123", state="failed", version=2, created_at=1.0, error=error
    )
    assert view_of(status)["error"] == STORE_DOWN_PROBLEM


# -- 4: a keyed question Slack refused is not a 200 on retry --------------------------------
@pytest.mark.slow
async def test_a_keyed_question_posted_while_the_store_was_held_lives_on() -> None:
    """Its Slack post landed while another program held the SQLite file past the busy
    timeout. The question used to end failed (STORE_UNAVAILABLE) with its message left live
    and unrecorded; its place is now written once the store is back, so the question goes on
    and a retry with its key gets it, never a 503 "retry"."""
    async with running() as bed:
        path = Path(bed.runtime.settings.store_path)
        key = {"Idempotency-Key": "deploy-outage"}
        bed.slack.faults.add(method="chat.postMessage", kind="delay", delay=1.0)
        held = asyncio.Event()
        release = asyncio.Event()

        async def hold() -> None:
            blocker = sqlite3.connect(path, timeout=10)  # waits for the bot's own writes
            blocker.execute("BEGIN IMMEDIATE")
            try:
                held.set()
                await asyncio.wait_for(release.wait(), 30)
            finally:
                blocker.rollback()
                blocker.close()

        asking = asyncio.ensure_future(bed.ask(headers=key))
        await asyncio.sleep(0.5)  # the post is on its way to Slack
        holder = asyncio.ensure_future(hold())
        await held.wait()
        await asyncio.sleep(7)  # past the store's 5 s busy timeout
        release.set()
        await holder
        first_status, first = await asking
        assert first_status == 201 and first["message"]["ts"], first
        status, again = await bed.ask(headers=key)
        assert not (status == 503 and again.get("message") == STORE_DOWN), again
        assert status == 200 and again["state"] == "pending", (status, again)
        assert (again["id"], again["message"]) == (first["id"], first["message"])
        assert len(bed.messages()) == 1


@pytest.mark.slow
async def test_a_retry_after_a_502_gets_the_502_again_never_a_200() -> None:
    async with running() as bed:
        key = {"Idempotency-Key": "deploy-2.3.1"}
        bed.slack.faults.add(method="chat.postMessage", kind="server_error", count=10)
        first_status, first = await bed.ask(headers=key)
        assert (first_status, first["code"]) == (502, "DELIVERY_FAILED"), first
        bed.slack.faults.clear()  # Slack is back
        status, again = await bed.ask(headers=key)
        assert (status, again) == (first_status, first)
        assert bed.messages() == []  # the key's question is failed: nothing posted
        # another body under the key is still a misuse of it ...
        other = copy.deepcopy(DEPLOY)
        other["questions"][0]["question"] = "Deploy 2.3.2 to production?"
        status, problem = await bed.ask(other, headers=key)
        assert (status, problem["code"]) == (409, "IDEMPOTENCY_KEY_REUSED")
        # ... and a new key asks again
        status, posted = await bed.ask(headers={"Idempotency-Key": "deploy-2.3.1-again"})
        assert status == 201, posted
        assert len(bed.messages()) == 1


@pytest.mark.slow
async def test_a_retry_of_a_question_that_was_shown_is_still_200() -> None:
    async with running() as bed:
        key = {"Idempotency-Key": "shown"}
        status, posted = await bed.ask(headers=key)
        assert status == 201
        await bed.click(posted, "Deploy")
        status, again = await bed.ask(headers=key)
        assert status == 200 and again["id"] == posted["id"], again


# -- 5: defaults said explicitly are the same request ---------------------------------------


def with_defaults_said(body: dict[str, Any], **question: Any) -> dict[str, Any]:
    said = copy.deepcopy(body)
    said["questions"][0].update(question)
    return said


@pytest.mark.slow
@pytest.mark.parametrize(
    "said",
    [
        {"multiSelect": False},
        {"multiSelect": None},
        {"detail": None, "header": None, "intent": None},
        {"options": [{"label": "Deploy", "description": None}, {"label": "Wait"}]},
    ],
    ids=["multiSelect-false", "multiSelect-null", "nulls", "option-description-null"],
)
async def test_a_retry_stating_a_default_is_the_same_request(said: dict[str, Any]) -> None:
    async with running() as bed:
        key = {"Idempotency-Key": f"said-{uuid.uuid4().hex}"}
        status, first = await bed.ask(DEPLOY, headers=key)
        assert status == 201
        body = with_defaults_said(DEPLOY, **said)
        body.update(label=None, link=None, revises=None, review=None, reminders=[])
        body["destination"] = {"channel": bed.channel, "threadTs": None}
        status, again = await bed.ask(body, headers=key)
        assert (status, again["id"]) == (200, first["id"]), again
        assert len(bed.messages()) == 1


@pytest.mark.slow
async def test_explicit_empty_options_are_the_same_as_none_and_true_is_not_false() -> None:
    async with running() as bed:
        free = {"questions": [{"id": "why", "question": "Why did the deploy fail?"}]}
        key = {"Idempotency-Key": "free-text"}
        status, first = await bed.ask(free, headers=key)
        assert status == 201, first
        status, again = await bed.ask(with_defaults_said(free, options=[]), headers=key)
        assert (status, again["id"]) == (200, first["id"]), again
        # the default said the other way is another request
        key = {"Idempotency-Key": "multi"}
        status, first = await bed.ask(DEPLOY, headers=key)
        assert status == 201
        status, problem = await bed.ask(with_defaults_said(DEPLOY, multiSelect=True), headers=key)
        assert (status, problem["code"]) == (409, "IDEMPOTENCY_KEY_REUSED")


async def test_an_id_of_the_right_length_with_non_ascii_characters_is_an_unknown_id() -> None:
    """Ids are compared as bytes: a 32-character id with non-ASCII characters is a 404,
    as any id the token does not own, not a failure of the comparison."""
    assert not ApiTokens({"alpha": ALPHA, "beta": BETA}).owns("alpha", "é" * 32)
    async with running(**TWO_TOKENS) as bed:
        headers = {"Authorization": f"Bearer {ALPHA}"}
        for rid in ("é" * 32, "f" * 32):
            async with bed.http.get(f"/v1/questions/{rid}", headers=headers) as response:
                problem = await response.json()
                assert response.status == 404, problem
                assert problem["code"] == "NOT_FOUND", problem
