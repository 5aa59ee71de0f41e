"""Issue 15: one test per finding of the outside attack, each named after what it attacks.

The bot runs in process (``bot.app.runtime.start``) against the Slack stand-in; requests whose
headers an HTTP client would refuse to send go over a raw socket (``attack_tools``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app.runtime import Runtime, start
from bot.settings.config import Settings
from tests.api.test_gateway import API_TOKEN, DEPLOY, running
from tests.attack_tools import LogTap, raw_request
from tests.redis_server import RedisServer
from tests.slack_harness import until

pytestmark = pytest.mark.timeout(60)

STAMP = str(int(time.time()))
SIGNATURE = "v0=" + "ab" * 32
FORM = "application/x-www-form-urlencoded"


# -- 4: malformed headers ------------------------------------------------------------------

MALFORMED_SLACK_HEADERS: dict[str, tuple[dict[str, bytes | str], str]] = {
    "a timestamp that is not a number": (
        {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": SIGNATURE},
        "bad_timestamp",
    ),
    "an empty timestamp": (
        {"X-Slack-Request-Timestamp": "", "X-Slack-Signature": SIGNATURE},
        "bad_timestamp",
    ),
    "a non-ASCII signature": (
        {"X-Slack-Request-Timestamp": STAMP, "X-Slack-Signature": "v0=é".encode()},
        "bad_signature_header",
    ),
    "a signature in bytes that are not UTF-8": (
        {"X-Slack-Request-Timestamp": STAMP, "X-Slack-Signature": b"v0=\xff\xfe"},
        "bad_signature_header",
    ),
    "a timestamp in bytes that are not UTF-8": (
        {"X-Slack-Request-Timestamp": b"\xff12", "X-Slack-Signature": SIGNATURE},
        "bad_timestamp",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(MALFORMED_SLACK_HEADERS))
async def test_malformed_slack_signature_headers_get_400_naming_the_header(shape: str) -> None:
    headers, cause = MALFORMED_SLACK_HEADERS[shape]
    async with running() as bed:
        with LogTap() as tap:
            status, body = await raw_request(
                bed.runtime.url,
                "POST",
                "/slack/events",
                {"Content-Type": FORM, **headers},
                b"payload=%7B%7D",
            )
        assert status == 400, body
        header = "X-Slack-Request-Timestamp" if cause == "bad_timestamp" else "X-Slack-Signature"
        assert header.encode() in body
        assert tap.tracebacks == [] and tap.errors == []
        assert len(tap.refusals(cause)) == 1


MALFORMED_API_HEADERS: dict[str, tuple[str, str, dict[str, bytes | str], int, str]] = {
    "an Authorization header that is not UTF-8": (
        "GET",
        "/v1/questions/0123456789abcdef0123",
        {"Authorization": b"Bearer \xff\xfe"},
        401,
        "UNAUTHORIZED",
    ),
    "a non-ASCII bearer token": (
        "GET",
        "/v1/questions/0123456789abcdef0123",
        {"Authorization": "Bearer jé".encode()},
        401,
        "UNAUTHORIZED",
    ),
    "an Idempotency-Key that is not UTF-8": (
        "POST",
        "/v1/questions",
        {
            "Authorization": f"Bearer {API_TOKEN}",
            "Idempotency-Key": b"k\xff\xfe",
            "Content-Type": "application/json",
        },
        400,
        "BAD_IDEMPOTENCY_KEY",
    ),
    "a non-ASCII Idempotency-Key": (
        "POST",
        "/v1/questions",
        {
            "Authorization": f"Bearer {API_TOKEN}",
            "Idempotency-Key": "clé".encode(),
            "Content-Type": "application/json",
        },
        400,
        "BAD_IDEMPOTENCY_KEY",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(MALFORMED_API_HEADERS))
async def test_malformed_api_headers_get_a_4xx_with_a_code_and_no_traceback(shape: str) -> None:
    method, path, headers, expected, code = MALFORMED_API_HEADERS[shape]
    async with running() as bed:
        with LogTap() as tap:
            status, body = await raw_request(
                bed.runtime.url, method, path, headers, json.dumps(DEPLOY).encode()
            )
        assert status == expected, body
        assert json.loads(body)["code"] == code
        assert tap.tracebacks == [] and tap.errors == []
        assert bed.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
async def test_a_flood_of_malformed_headers_is_logged_once_per_cause() -> None:
    async with running() as bed:
        with LogTap() as tap:
            for _ in range(30):
                for headers, _cause in MALFORMED_SLACK_HEADERS.values():
                    status, _ = await raw_request(
                        bed.runtime.url,
                        "POST",
                        "/slack/events",
                        {"Content-Type": FORM, **headers},
                        b"payload=%7B%7D",
                    )
                    assert status == 400
        counts: dict[str, Any] = {
            cause: len(tap.refusals(cause)) for cause in ("bad_timestamp", "bad_signature_header")
        }
        assert counts == {"bad_timestamp": 1, "bad_signature_header": 1}
        assert tap.tracebacks == []


MALFORMED_HTTP: dict[str, bytes] = {
    "control characters in a header": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Idempotency-Key: k\x01\x02\r\n\r\n",
    "a header line with no colon": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nnonsense\r\n\r\n",
    "a bad Content-Length": b"POST /v1/questions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Length: -5\r\n\r\n",
    "an invalid request line": b"GET\x00 / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
}


async def test_requests_aiohttp_cannot_parse_get_400_and_one_log_line_without_traceback() -> None:
    import asyncio

    async with running() as bed:
        host, port = bed.runtime.url.removeprefix("http://").split(":")
        with LogTap() as tap:
            for _ in range(10):
                for raw in MALFORMED_HTTP.values():
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(raw)
                    answer = await reader.read()
                    writer.close()
                    await writer.wait_closed()
                    assert answer.split(b" ", 2)[1] == b"400", answer[:60]
        assert tap.tracebacks == [] and tap.errors == []
        assert len(tap.refusals("bad_http")) == 1


def test_refusals_are_logged_once_a_minute_per_cause_with_the_count_since() -> None:
    import logging

    from adapters.httpguard import RefusalLog

    now = [1000.0]
    logger = logging.getLogger("tests.refusals")
    with LogTap() as tap:
        log = RefusalLog(logger, clock=lambda: now[0])
        for _ in range(500):
            log.refused("bad_timestamp", "x")
            log.refused("unknown_host", "y")
        now[0] += 59.9
        log.refused("bad_timestamp", "x")
        now[0] += 0.2
        log.refused("bad_timestamp", "x")
    lines = [(r.cause, r.refused) for r in tap.records if r.name == "tests.refusals"]  # type: ignore[attr-defined]
    assert lines == [("bad_timestamp", 1), ("unknown_host", 1), ("bad_timestamp", 501)]
    assert log.counts == {"bad_timestamp": 502, "unknown_host": 500}


# -- 2: DNS rebinding (foreign Host / Origin) ------------------------------------------------

FOREIGN = "rebind.evil.example"


@contextlib.asynccontextmanager
async def sandbox_bot() -> AsyncIterator[Runtime]:
    """The bot in sandbox mode (no tokens, no API token), both servers on free ports."""
    runtime = await start(Settings(mode="sandbox", port=0, sandbox_port=0, shutdown_grace=1))
    try:
        yield runtime
    finally:
        await runtime.stop()


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


async def test_dns_rebinding_a_foreign_host_cannot_ask_or_read_through_the_open_api() -> None:
    async with running(bot_api_token=None) as bed:
        url, port = bed.runtime.url, _port(bed.runtime.url)
        status, body = await raw_request(
            url,
            "POST",
            "/v1/questions",
            {"Content-Type": "application/json", "Origin": f"http://{FOREIGN}:{port}"},
            json.dumps(DEPLOY).encode(),
            host=f"{FOREIGN}:{port}",
        )
        assert status == 421, body
        assert json.loads(body)["code"] == "MISDIRECTED"
        assert bed.slack.calls.count("chat.postMessage") == 0
        status, posted = await bed.ask()
        assert status == 201
        for method, path in [
            ("GET", f"/v1/questions/{posted['id']}"),
            ("DELETE", f"/v1/questions/{posted['id']}"),
            ("GET", "/v1/openapi.json"),
            ("GET", "/healthz"),
            ("POST", "/slack/events"),
            ("GET", "/no/such/route"),
        ]:
            status, body = await raw_request(url, method, path, host=f"{FOREIGN}:{port}")
            assert status == 421, (method, path, body)
        _, polled = await bed.get(posted["id"])
        assert polled["state"] == "pending"
        for name in ("127.0.0.1", "localhost", "LOCALHOST."):
            status, _ = await raw_request(url, "GET", "/healthz", host=f"{name}:{port}")
            assert status == 200, name


async def test_dns_rebinding_a_foreign_host_cannot_read_or_answer_in_the_sandbox() -> None:
    async with sandbox_bot() as runtime:
        assert runtime.sandbox_url is not None
        sandbox = runtime.sandbox_url
        port = _port(sandbox)
        foreign = f"{FOREIGN}:{port}"
        for path in ("/sandbox/state?user=alice", "/", "/sandbox/events", "/api/auth.test"):
            status, body = await raw_request(sandbox, "GET", path, host=foreign)
            assert status == 421, (path, body)
        click = json.dumps({"user": "alice", "channel": "C0SANDBOX", "ts": "1.0", "action_id": "a"})
        status, body = await raw_request(
            sandbox,
            "POST",
            "/sandbox/action",
            {"Content-Type": "application/json", "Origin": f"http://{foreign}"},
            click.encode(),
            host=foreign,
        )
        assert status == 421, body
        # The bot's own server refuses the foreign name too.
        status, _ = await raw_request(runtime.url, "GET", "/healthz", host=foreign)
        assert status == 421


@pytest.mark.slow
@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("http://127.0.0.1:{port}", 200),
        ("http://localhost:{port}", 200),
        ("http://127.0.0.1:{other}", 403),
        ("https://127.0.0.1:{port}", 403),
        (f"http://{FOREIGN}:{{port}}", 403),
        ("null", 403),
    ],
)
async def test_the_sandbox_compares_origin_with_the_addresses_it_serves(
    origin: str, expected: int
) -> None:
    async with sandbox_bot() as runtime:
        assert runtime.sandbox_url is not None
        port = _port(runtime.sandbox_url)
        post = {"user": "alice", "channel": "C0SANDBOX", "text": "hello"}
        # The Host a rebinding page would send is its own name: make Host agree with Origin
        # where the Host check allows it, so only the Origin comparison decides.
        status, body = await raw_request(
            runtime.sandbox_url,
            "POST",
            "/sandbox/post",
            {
                "Content-Type": "application/json",
                "Origin": origin.format(port=port, other=port + 1),
            },
            json.dumps(post).encode(),
        )
        assert status == expected, body


async def test_a_configured_public_host_name_is_served_and_others_are_refused() -> None:
    async with running(host="0.0.0.0", allowed_hosts=("bot.example.com",)) as bed:
        port = _port(bed.runtime.url)
        url = f"http://127.0.0.1:{port}"
        auth = {"Authorization": f"Bearer {API_TOKEN}"}
        assert (await raw_request(url, "GET", "/healthz", host="bot.example.com"))[0] == 200
        assert (
            await raw_request(url, "GET", "/v1/openapi.json", auth, host="BOT.example.com:443")
        )[0] == 200
        assert (await raw_request(url, "GET", "/healthz", host=f"{FOREIGN}"))[0] == 421
        assert (await raw_request(url, "GET", "/healthz", host=""))[0] == 421


# -- 1: the sandbox on loopback only, with a random stand-in token -------------------------


async def test_an_exposed_sandbox_still_listens_on_loopback_only() -> None:
    runtime = await start(
        Settings(
            mode="sandbox",
            host="0.0.0.0",
            bot_api_token="t" * 32,
            port=0,
            sandbox_port=0,
            shutdown_grace=1,
        )
    )
    try:
        assert runtime.sandbox_url is not None
        assert runtime.sandbox_url.startswith("http://127.0.0.1:")
        addresses = runtime.sandbox.standin.addresses
        assert addresses and all(ipaddress.ip_address(a[0]).is_loopback for a in addresses)
    finally:
        await runtime.stop()


async def test_the_stand_in_token_is_random_per_start_and_the_old_default_is_refused() -> None:
    tokens = []
    for _ in range(2):
        async with sandbox_bot() as runtime:
            assert runtime.sandbox_url is not None
            api = runtime.sandbox_url + "api/auth.test"
            async with (
                aiohttp.ClientSession() as http,
                http.post(api, headers={"Authorization": "Bearer xoxb-sandbox-token"}) as r,
            ):
                assert (await r.json())["error"] == "invalid_auth"
            tokens.append(runtime.app.client.token)
    assert tokens[0] != tokens[1]
    assert all(t and t.startswith("xoxb-sandbox-") and len(t) > 30 for t in tokens)


async def test_the_startup_lines_say_the_sandbox_is_loopback_only() -> None:
    with LogTap() as tap:
        async with sandbox_bot():
            pass
    lines = [r.getMessage() for r in tap.records if r.name == "bot"]
    assert any("sandbox" in line and "loopback only" in line for line in lines), lines
    assert any("random token" in line for line in lines), lines


# -- 3: disguised links in markdown blocks --------------------------------------------------

DISGUISES: dict[str, tuple[str, str]] = {
    "a link whose text is another URL": (
        "[https://github.com/acme/pr/1](https://evil.example/phish)",
        "https://github.com/acme/pr/1 (https://evil.example/phish)",
    ),
    "a link whose text is a word": (
        "see [the PR](https://evil.example/phish) first",
        "see the PR (https://evil.example/phish) first",
    ),
    "a link with a title": (
        '[docs](https://evil.example/x "https://docs.example")',
        "docs (https://evil.example/x)",
    ),
    "a link in angle brackets": (
        "[ok](<https://evil.example/a b>)",
        "ok (https://evil.example/a b)",
    ),
    "a link inside a link": (
        "[[inner](https://a.example)](https://evil.example)",
        "inner (https://a.example) (https://evil.example)",
    ),
    "an image": (
        "![status: green](https://evil.example/pixel.png)",
        "status: green (https://evil.example/pixel.png)",
    ),
    "a reference link and its definition": (
        "read [the runbook][rb]\n\n[rb]: https://evil.example/rb",
        "read [the runbook][rb]\n\nrb: https://evil.example/rb",
    ),
    "raw HTML": (
        '<a href="https://evil.example">https://github.com</a>',
        '&lt;a href="https://evil.example"&gt;https://github.com&lt;/a&gt;',
    ),
}


@pytest.mark.parametrize("shape", list(DISGUISES))
def test_markdown_blocks_cannot_show_one_link_target_and_go_to_another(shape: str) -> None:
    from adapters.slack.model.record import PendingRecord
    from adapters.slack.render.blocks.message import render_open
    from bot.questions.models import AskUserQuestionItem

    detail, shown = DISGUISES[shape]
    question = AskUserQuestionItem.model_validate(
        {
            "id": "plan",
            "question": "Approve this plan?",
            "detail": f"# Plan\n\n{detail}\n",
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
    )
    record = PendingRecord(id="0123456789abcdef0123", owner="p", channel="C1", questions=[question])
    blocks = render_open(record).blocks
    (markdown,) = [b["text"] for b in blocks if b["type"] == "markdown"]
    assert shown in markdown, markdown
    assert "](" not in markdown and "<" not in markdown


def test_a_link_whose_text_is_its_url_stays_a_link() -> None:
    from adapters.slack.render.mrkdwn import markdown_text

    assert markdown_text("[https://x.example/a](https://x.example/a)") == (
        "[https://x.example/a](https://x.example/a)"
    )


# -- 7: an Idempotency-Key reused with another body ------------------------------------------


async def test_an_idempotency_key_reused_with_a_different_body_is_409() -> None:
    other = {"questions": [{"id": "drop", "question": "Drop the production database?"}]}
    async with running() as bed:
        key = {"Idempotency-Key": "deploy-2.3.1"}
        status, first = await bed.ask(headers=key)
        assert status == 201
        for body in (
            other,
            {**DEPLOY, "label": "another agent"},
            {**DEPLOY, "destination": {"channel": "C0OTHER"}},
        ):
            status, refused = await bed.ask(body, headers=key)
            assert status == 409, refused
            assert refused["code"] == "IDEMPOTENCY_KEY_REUSED"
            assert "deploy-2.3.1" in refused["message"]
        status, again = await bed.ask(headers=key)
        assert (status, again["id"]) == (200, first["id"])
        status, explicit = await bed.ask(
            {**DEPLOY, "destination": {"channel": bed.channel}}, headers=key
        )
        assert (status, explicit["id"]) == (200, first["id"])
        assert bed.slack.calls.count("chat.postMessage") == 1


# -- 8: /healthz counts questions, not waiters, and says when the store is gone --------------


@pytest.mark.slow
async def test_healthz_counts_questions_not_long_polls() -> None:
    async with running() as bed:
        ids_ = []
        for _ in range(3):
            status, posted = await bed.ask()
            assert status == 201
            ids_.append(posted["id"])
        polls = [asyncio.ensure_future(bed.get(ids_[i % 3], wait=30)) for i in range(50)]
        await until(lambda: bed.runtime.gateway.polls.count == 50, what="50 long-polls")
        async with bed.http.get("/healthz") as r:
            health = await r.json()
        assert r.status == 200
        assert health["ok"] is True
        assert health["pending"] == 3
        assert health["longPolls"] == 50
        assert health["waiters"] == 53  # three ask() waiters and fifty long-polls
        for record_id in ids_:
            async with bed.http.delete(f"/v1/questions/{record_id}") as r:
                assert r.status == 200
        await asyncio.gather(*polls)
        async with bed.http.get("/healthz") as r:
            health = await r.json()
        assert (health["pending"], health["waiters"], health["longPolls"]) == (0, 0, 0)


@pytest.mark.slow
async def test_healthz_is_503_not_ok_while_the_store_is_unreachable(tmp_path: Path) -> None:
    prefix = f"h-{uuid.uuid4().hex}"
    async with (
        RedisServer.start(tmp_path) as server,
        running(redis_url=server.url, redis_prefix=prefix) as bed,
    ):
        async with bed.http.get("/healthz") as r:
            assert r.status == 200 and (await r.json())["ok"] is True
        await server.stop()
        async with bed.http.get("/healthz") as r:
            health = await r.json()
        assert r.status == 503
        assert health["ok"] is False and health["store"] == "unreachable"
        status, body = await bed.ask()
        assert status == 503 and body["code"] == "STORE_UNAVAILABLE"
        await server.start_again()
        async with asyncio.timeout(20):
            while True:
                async with bed.http.get("/healthz") as r:
                    if r.status == 200:
                        assert (await r.json())["ok"] is True
                        break
                await asyncio.sleep(0.2)


# -- 6: open-question caps and several API tokens ---------------------------------------------

ALPHA = f"alpha-{uuid.uuid4().hex}"
BETA = f"beta-{uuid.uuid4().hex}"
TWO_TOKENS = {"bot_api_token": None, "bot_api_tokens": (("alpha", ALPHA), ("beta", BETA))}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.slow
async def test_two_tokens_neither_reads_nor_deletes_the_others_questions() -> None:
    async with running(**TWO_TOKENS) as bed:
        http = bed.http
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(ALPHA)) as r:
            assert r.status == 201
            alphas = (await r.json())["id"]
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(BETA)) as r:
            assert r.status == 201
            betas = (await r.json())["id"]
        for token, mine, theirs in ((ALPHA, alphas, betas), (BETA, betas, alphas)):
            async with http.get(f"/v1/questions/{theirs}", headers=_auth(token)) as r:
                assert r.status == 404
                assert (await r.json())["code"] == "NOT_FOUND"
            async with http.delete(f"/v1/questions/{theirs}", headers=_auth(token)) as r:
                assert r.status == 404
            async with http.get(f"/v1/questions/{mine}", headers=_auth(token)) as r:
                assert r.status == 200 and (await r.json())["state"] == "pending"
        # One Idempotency-Key, two tokens: two questions, neither a retry of the other.
        key = {"Idempotency-Key": "same-key"}
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(ALPHA) | key) as r:
            first = await r.json()
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(BETA) | key) as r:
            assert r.status == 201
            assert (await r.json())["id"] != first["id"]
        async with http.get("/v1/questions/x" * 1, headers=_auth("gamma")) as r:
            assert r.status == 401


@pytest.mark.slow
async def test_open_questions_are_capped_per_token_with_429_and_retry_after() -> None:
    async with running(**TWO_TOKENS, max_open_per_token=3) as bed:
        http = bed.http
        opened = []
        for _ in range(3):
            async with http.post("/v1/questions", json=DEPLOY, headers=_auth(ALPHA)) as r:
                assert r.status == 201
                opened.append((await r.json())["id"])
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(ALPHA)) as r:
            assert r.status == 429
            refused = await r.json()
            assert int(r.headers["Retry-After"]) >= 1
        assert refused["code"] == "TOO_MANY_QUESTIONS"
        assert refused["retryAfter"] == int(r.headers["Retry-After"])
        assert refused["name"] == "RequestError" and "3" in refused["message"]
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(BETA)) as r:
            assert r.status == 201
        async with http.delete(f"/v1/questions/{opened[0]}", headers=_auth(ALPHA)) as r:
            assert r.status == 200
        await until(lambda: bed.runtime.gateway.running == 3, what="the aborted ask to end")
        async with http.post("/v1/questions", json=DEPLOY, headers=_auth(ALPHA)) as r:
            assert r.status == 201
        assert bed.slack.calls.count("chat.postMessage") == 5


@pytest.mark.slow
async def test_open_questions_are_capped_per_process() -> None:
    async with running(max_open_questions=2) as bed:
        assert [(await bed.ask())[0] for _ in range(3)] == [201, 201, 429]
        assert bed.slack.calls.count("chat.postMessage") == 2


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("alpha", "name:token"),
        ("alpha:one,alpha:two", "twice"),
        ("alpha:same,beta:same", "twice"),
        ("al pha:x", "name"),
        (":x", "name"),
    ],
)
def test_bot_api_tokens_are_checked_naming_the_problem(value: str, problem: str) -> None:
    from bot.settings.config import ConfigError, load_settings

    with pytest.raises(ConfigError) as caught:
        load_settings({"BOT_API_TOKENS": value}, env_file=None)
    (message,) = caught.value.problems
    assert message.startswith("BOT_API_TOKENS:") and problem in message
    for secret in ("one", "two", "same"):
        assert f":{secret}" not in message


def test_bot_api_tokens_come_from_the_environment_and_a_file(tmp_path: Path) -> None:
    from bot.settings.config import load_settings

    path = tmp_path / "tokens"
    path.write_text("# agents\nbuild: b-s3cr3t\n\ndeploy:d-s3cr3t\n")
    settings = load_settings(
        {"BOT_API_TOKEN": "0n3", "BOT_API_TOKENS": "ci:c-s3cr3t", "BOT_API_TOKENS_FILE": str(path)},
        env_file=None,
    )
    assert settings.api_tokens == {
        "default": "0n3",
        "ci": "c-s3cr3t",
        "build": "b-s3cr3t",
        "deploy": "d-s3cr3t",
    }
    assert dict(settings.describe())["api auth"] == "on (4 tokens: build, ci, default, deploy)"
    for shown in (repr(settings), str(settings.describe())):
        assert "s3cr3t" not in shown and "0n3" not in shown


# -- 5: slow clients and too many connections -----------------------------------------------


async def _slow(url: str, head: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sent ``head`` and then nothing more."""
    parts = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(parts[0], int(parts[1]))
    writer.write(head)
    await writer.drain()
    return reader, writer


async def _cut_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What the server sent before it closed the connection (fails if it stays open)."""
    async with asyncio.timeout(seconds):
        return await reader.read()


SLOW_HEAD = b"POST /v1/questions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
SLOW_BODY = (
    b"POST /v1/questions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    # with the token: a request without one is answered 401 before its body is waited for
    + f"Authorization: Bearer {API_TOKEN}\r\n".encode()
    + b'Content-Length: 5000\r\n\r\n{"questions": ['
)


@pytest.mark.slow
async def test_slow_headers_and_slow_bodies_are_cut_off_while_others_are_answered() -> None:
    async with running(header_timeout=1.0, body_timeout=1.0) as bed:
        url = bed.runtime.url
        heads = [await _slow(url, SLOW_HEAD) for _ in range(20)]
        bodies = [await _slow(url, SLOW_BODY) for _ in range(20)]
        status, _ = await bed.ask()  # a normal client is served meanwhile
        assert status == 201
        for reader, _ in heads:
            assert await _cut_within(reader, 10) == b""  # closed with no answer
        for reader, _ in bodies:
            answer = await _cut_within(reader, 10)
            assert answer.split(b" ", 2)[1] == b"408", answer[:80]
        for _, writer in heads + bodies:
            writer.close()
        assert bed.runtime.gateway.refusals.counts.get("slow_body") == 20
        assert bed.slack.calls.count("chat.postMessage") == 1


@pytest.mark.slow
async def test_connections_over_the_cap_get_503_and_the_rest_keep_working() -> None:
    async with running(max_connections=10, header_timeout=30.0) as bed:
        url = bed.runtime.url
        idle = [await _slow(url, b"") for _ in range(10)]
        extra_reader, extra_writer = await _slow(url, b"")
        answer = await _cut_within(extra_reader, 5)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
        extra_writer.close()
        for _, writer in idle:
            writer.close()
            await writer.wait_closed()
        await asyncio.sleep(0.1)
        status, _ = await bed.ask()
        assert status == 201


@pytest.mark.slow
async def test_the_sandbox_cuts_off_slow_clients_too() -> None:
    runtime = await start(
        Settings(
            mode="sandbox",
            port=0,
            sandbox_port=0,
            shutdown_grace=1,
            header_timeout=1.0,
            body_timeout=1.0,
        )
    )
    try:
        assert runtime.sandbox_url is not None
        url = runtime.sandbox_url.rstrip("/")
        head = SLOW_HEAD.replace(b"/v1/questions", b"/sandbox/post")
        body = SLOW_BODY.replace(b"/v1/questions", b"/sandbox/post")
        slow = [await _slow(url, head) for _ in range(10)] + [
            await _slow(url, body) for _ in range(10)
        ]
        async with aiohttp.ClientSession() as http, http.get(f"{url}/sandbox/state") as r:
            assert r.status == 200
        answers = [await _cut_within(reader, 10) for reader, _ in slow]
        assert answers[:10] == [b""] * 10
        assert all(a.split(b" ", 2)[1] == b"408" for a in answers[10:])
        for _, writer in slow:
            writer.close()
    finally:
        await runtime.stop()


# -- 10: shutdown within SHUTDOWN_GRACE ------------------------------------------------------


@pytest.mark.slow
async def test_shutdown_with_slack_hanging_ends_within_shutdown_grace() -> None:
    grace = 2.0
    async with running(shutdown_grace=grace) as bed:
        asked = [(await bed.ask())[1]["id"] for _ in range(3)]
        polls = [asyncio.ensure_future(bed.get(rid, wait=60)) for rid in asked]
        await until(lambda: bed.runtime.gateway.polls.count == 3, what="three long-polls")
        # From now on Slack takes a minute to answer anything.
        bed.slack.faults.add(kind="delay", delay=60.0, rate=1.0)
        slow_post = asyncio.ensure_future(bed.ask())
        await until(lambda: bed.runtime.gateway.running == 4, what="the slow post to start")
        loop = asyncio.get_running_loop()
        began = loop.time()
        await bed.stop()
        took = loop.time() - began
        print(f"\nstop() took {took:.2f} s with SHUTDOWN_GRACE={grace:g}")
        assert took <= grace + 0.5, took
        outcomes = await asyncio.gather(*polls, slow_post, return_exceptions=True)
        assert all(
            not isinstance(o, BaseException) or isinstance(o, aiohttp.ClientError) for o in outcomes
        ), outcomes


def _most_options_that_fit(label: Callable[[int], str]) -> int:
    from adapters.slack.model.record import PendingRecord
    from adapters.slack.render.blocks.message import render_open
    from bot.questions.errors import UserQuestionError
    from bot.questions.models import AskUserQuestionItem

    def fits(n: int) -> bool:
        options = [{"label": label(i)} for i in range(n)]
        question = AskUserQuestionItem.model_validate(
            {"id": "q", "question": "Pick one", "options": options}
        )
        record = PendingRecord(
            id="0123456789abcdef0123", owner="p", channel="C1", questions=[question]
        )
        try:
            render_open(record)
        except UserQuestionError:
            return False
        return True

    low, high = 1, 5_000
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


@pytest.mark.slow
def test_the_documented_option_counts_are_what_fits_in_one_message() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "questions.md").read_text("utf-8")
    twenty = _most_options_that_fit(lambda i: f"Option number {i:06d}")
    numbered = _most_options_that_fit(str)
    assert f"about {round(twenty, -1):,} options of 20 characters" in page, twenty
    assert f"about {round(numbered, -2):,} numbered 0–{numbered - 1}" in page, numbered
    assert "up to 10,000" not in page  # the old claim: no 20-character menu fits it


# -- 9: Slack stores a message after the client gave up ---------------------------------------


async def _stored_late(bed: Any) -> Any:
    """Ask while Slack stores the post at once but answers after 12 s: the ask fails (the
    client gives up after 10 s), yet the message is in Slack, once, with live buttons."""
    from tests.slack_harness import interactive_elements

    bed.slack.faults.add(method="chat.postMessage", kind="slow_stored", delay=12.0)
    status, body = await bed.ask()
    assert status == 502 and body["code"] == "DELIVERY_FAILED", body
    (message,) = bed.messages()
    assert interactive_elements(message.blocks)
    return message


def _closed(bed: Any, message: Any) -> Callable[[], bool]:
    from tests.slack_harness import interactive_elements

    return lambda: (
        not interactive_elements(bed.slack.workspace.message(message.channel, message.ts).blocks)
    )


@pytest.mark.slow
async def test_a_message_slack_stored_after_the_post_timed_out_is_closed_at_its_first_click() -> (
    None
):
    async with running() as bed:
        message = await _stored_late(bed)
        payload = bed.slack.click(message, user=bed.alice, text="Deploy")
        status, _ = await bed.slack.deliver(payload)
        assert status == 200
        await until(_closed(bed, message), within=10, what="the stored message to be closed")


@pytest.mark.slow
async def test_a_message_slack_stored_after_the_post_timed_out_is_closed_with_nobody_clicking() -> (
    None
):
    from tests.slack_harness import all_text

    async with running() as bed:
        message = await _stored_late(bed)
        assert message.metadata is not None  # every question's message names its request
        request_id = message.metadata["event_payload"]["request_id"]
        # Looked for 2 s after the failure, then 10, 30 and 60 s: found at the first.
        await until(_closed(bed, message), within=30, what="the stored message to be closed")
        status, record = await bed.get(request_id)
        assert status == 200 and record["state"] == "failed", record
        assert record["message"]["ts"] == message.ts, record
        shown = all_text(bed.slack.workspace.message(message.channel, message.ts).blocks)
        assert "given up on posting it" in shown, shown
        assert bed.slack.calls.count("conversations.history") == 1


async def test_a_larger_api_body_limit_leaves_slacks_at_1_mib() -> None:
    """``MAX_BODY_BYTES`` above 1 MiB raises the API's limit only: an unsigned body to
    ``/slack/events`` larger than Slack's 1 MiB is refused before it is read."""
    async with running(max_body_bytes=4 * 1_048_576) as bed:
        headers = {
            "Content-Type": FORM,
            "X-Slack-Request-Timestamp": str(int(time.time())),
            "X-Slack-Signature": SIGNATURE,
        }
        with LogTap() as tap:
            status, body = await raw_request(
                bed.runtime.url, "POST", "/slack/events", headers, b"payload=" + b"a" * 1_048_576
            )
        assert status == 413, body
        assert tap.tracebacks == [] and len(tap.refusals("too_large")) == 1
        # at the limit it is read, and refused only for its signature
        status, body = await raw_request(
            bed.runtime.url, "POST", "/slack/events", headers, b"payload=" + b"a" * 1_048_568
        )
        assert status == 401, body


async def test_a_chunked_body_to_slack_events_is_refused_at_1_mib_not_read_on() -> None:
    """A chunked body (no ``Content-Length`` to refuse it by) to ``/slack/events`` is read
    up to Slack's 1 MiB only, then refused 413, however large ``MAX_BODY_BYTES`` lets the
    API's bodies be: the rest is never waited for."""
    from urllib.parse import urlsplit

    async with running(max_body_bytes=8 * 1_048_576, body_timeout=30.0) as bed:
        parts = urlsplit(bed.runtime.url)
        assert parts.hostname is not None and parts.port is not None
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            head = (
                "POST /slack/events HTTP/1.1\r\n"
                f"Host: {parts.netloc}\r\n"
                f"Content-Type: {FORM}\r\n"
                f"X-Slack-Request-Timestamp: {int(time.time())}\r\n"
                f"X-Slack-Signature: {SIGNATURE}\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"a" * 65_536
            with LogTap() as tap:
                writer.write(head.encode())
                for _ in range(24):  # 1.5 MiB, and the body never finished
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
                answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            assert answer.split(b"\r\n", 1)[0].split()[1] == b"413", answer
            assert tap.tracebacks == [] and len(tap.refusals("too_large")) == 1
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
