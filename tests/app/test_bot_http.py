"""``python -m bot`` in HTTP mode, as a subprocess, against the Slack Web API stand-in.

The whole round trip an operator and an agent see: ask through ``POST /v1/questions``, a
person clicks in Slack (a signed ``block_actions`` payload POSTed to ``/slack/events``),
``GET ?wait=`` reads the answer; ``DELETE`` aborts; auth, size and shape errors; idempotent
retries; SIGTERM with a question pending; ``--help`` and bad settings. Every run also checks
that no secret ever reaches the bot's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.webapi import SlackStandIn
from bot.settings.config import SETTING_NAMES
from tests.bot_process import BotProcess, run_bot_command
from tests.slack_harness import all_text, interactive_elements, until

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
SIGNING_SECRET = secrets.token_hex(16)
API_TOKEN = f"api-{secrets.token_hex(16)}"
SECRETS = (BOT_TOKEN, SIGNING_SECRET, API_TOKEN)

DEPLOY = {
    "questions": [
        {
            "id": "deploy",
            "question": "Deploy 2.3.1 to production?",
            "options": [{"label": "Deploy"}, {"label": "Wait"}],
        }
    ]
}


@dataclass
class Stack:
    """The Slack stand-in, the bot process, and a client with the API token."""

    slack: SlackStandIn
    bot: BotProcess
    http: aiohttp.ClientSession
    channel: str
    alice: str

    async def ask(self, body: Any = DEPLOY, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        """POST /v1/questions; returns (status, JSON)."""
        async with self.http.post("/v1/questions", json=body, **kwargs) as response:
            return response.status, await response.json()

    async def get(self, request_id: str, wait: float | str = 0) -> tuple[int, dict[str, Any]]:
        """GET /v1/questions/{id}?wait=…; returns (status, JSON)."""
        url = f"/v1/questions/{request_id}"
        async with self.http.get(url, params={"wait": str(wait)}) as response:
            return response.status, await response.json()

    def message(self, record: dict[str, Any]) -> Message:
        """The question's Slack message as it is now."""
        where = record["message"]
        return self.slack.workspace.message(where["channel"], where["ts"])

    async def click(self, record: dict[str, Any], text: str) -> None:
        """Alice clicks ``text`` on the question's message, as Slack delivers it: signed."""
        payload = self.slack.click(self.message(record), user=self.alice, text=text)
        status, _ = await self.slack.deliver(payload)
        assert status == 200


@contextlib.asynccontextmanager
async def http_bot(
    tmp_path: Path, *, dotenv: tuple[str, ...] = (), **extra_env: str
) -> AsyncIterator[Stack]:
    """The Slack stand-in and ``python -m bot`` in HTTP mode pointed at it.

    Settings named in ``dotenv`` are written to a ``.env`` file in the bot's directory
    instead of its environment.
    """
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET)
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    await slack.start()
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": channel,
        "SLACK_API_URL": slack.url,
        "PORT": "0",
        "BOT_API_TOKEN": API_TOKEN,
        **extra_env,
    }
    if dotenv:
        lines = [f"{name}={env.pop(name)}" for name in dotenv]
        (tmp_path / ".env").write_text("# written by the test\n" + "\n".join(lines) + "\n")
    try:
        async with BotProcess.start(env, cwd=tmp_path) as bot:
            slack.interactivity_url = f"{bot.url}/slack/events"
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with aiohttp.ClientSession(bot.url, headers=headers) as http:
                yield Stack(slack, bot, http, channel, alice)
        for secret in SECRETS:
            assert secret not in bot.output, "a secret reached the bot's output"
    finally:
        await slack.stop()


@pytest.mark.slow
async def test_round_trip_ask_answer_in_slack_read_the_answer(tmp_path: Path) -> None:
    async with http_bot(tmp_path) as s:
        async with s.http.post("/v1/questions", json=DEPLOY) as response:
            assert response.status == 201
            posted = await response.json()
            assert response.headers["Location"] == f"/v1/questions/{posted['id']}"
        assert posted["state"] == "pending"
        assert s.slack.calls.count("chat.postMessage") == 1
        message = s.message(posted)
        assert message.channel == s.channel
        assert "Deploy 2.3.1 to production?" in all_text(message.blocks)

        polling = asyncio.ensure_future(s.get(posted["id"], wait=20))
        await asyncio.sleep(0.1)
        assert not polling.done()
        await s.click(posted, "Deploy")
        status, answered = await asyncio.wait_for(polling, 10)
        assert status == 200
        assert answered["state"] == "answered"
        assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
        assert answered["answeredBy"] == s.alice

        await until(lambda: not interactive_elements(s.message(posted).blocks))
        assert "Answered" in all_text(s.message(posted).blocks)


@pytest.mark.slow
async def test_delete_aborts_a_question_and_slack_says_cancelled(tmp_path: Path) -> None:
    async with http_bot(tmp_path) as s:
        _, posted = await s.ask()
        late_click = s.slack.click(s.message(posted), user=s.alice, text="Deploy")
        async with s.http.delete(f"/v1/questions/{posted['id']}") as response:
            assert response.status == 200
            deleted = await response.json()
        assert deleted["state"] == "aborted"
        status, polled = await s.get(posted["id"])
        assert (status, polled["state"]) == (200, "aborted")
        assert polled["error"]["code"] == "ASK_ABORTED"
        await until(lambda: "Cancelled" in all_text(s.message(posted).blocks))
        assert not interactive_elements(s.message(posted).blocks)
        # A click after the abort changes nothing.
        status, _ = await s.slack.deliver(late_click)
        assert status == 200
        status, polled = await s.get(posted["id"])
        assert polled["state"] == "aborted"
        assert "answer" not in polled


@pytest.mark.slow
async def test_auth_failures_are_401_with_www_authenticate(tmp_path: Path) -> None:
    async with http_bot(tmp_path) as s, aiohttp.ClientSession(s.bot.url) as anonymous:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": API_TOKEN}):
            async with anonymous.post("/v1/questions", json=DEPLOY, headers=headers) as r:
                assert r.status == 401
                assert r.headers["WWW-Authenticate"] == "Bearer"
                assert (await r.json())["code"] == "UNAUTHORIZED"
            async with anonymous.get("/v1/questions/abc", headers=headers) as r:
                assert r.status == 401
            async with anonymous.delete("/v1/questions/abc", headers=headers) as r:
                assert r.status == 401
        async with anonymous.get("/healthz") as r:
            assert r.status == 200
            assert (await r.json())["mode"] == "http"
        assert s.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
async def test_oversized_non_json_and_malformed_bodies(tmp_path: Path) -> None:
    async with http_bot(tmp_path, MAX_BODY_BYTES="4096") as s:
        big = {"questions": [{"id": "q", "question": "x" * 8000}]}
        async with s.http.post("/v1/questions", json=big) as r:
            assert r.status == 413
            assert (await r.json())["code"] == "TOO_LARGE"
        async with s.http.post("/v1/questions", data="hello", headers={}) as r:
            assert r.status == 415
        json_header = {"Content-Type": "application/json"}
        async with s.http.post("/v1/questions", data="{not json", headers=json_header) as r:
            assert r.status == 422
            problem = await r.json()
            assert (problem["name"], problem["code"]) == ("ValidationError", "INVALID_REQUEST")
        status, problem = await s.ask({"questions": [{"id": "q", "options": []}]})
        assert status == 422
        assert problem["errors"][0]["loc"] == ["questions", "0", "question"]
        assert problem["errors"][0]["type"] == "missing"
        status, problem = await s.ask({"questions": []})
        assert (status, problem) == (
            422,
            {
                "name": "UserQuestionError",
                "code": "EMPTY_QUESTIONS",
                "message": "ask_user_question requires at least one question",
            },
        )
        plan = {
            "id": "plan",
            "question": "Approve?",
            "detail": "# Plan",
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
            "intent": {"kind": "plan-review", "approve": "Ship it"},
        }
        status, problem = await s.ask({"questions": [plan]})
        assert (status, problem) == (
            422,
            {
                "name": "UserQuestionError",
                "code": "BAD_INTENT",
                "message": "question plan declares intent plan-review whose approve label "
                '"Ship it" names none of its options',
            },
        )
        assert s.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
async def test_idempotent_retry_wait_bounds_and_unknown_ids(tmp_path: Path) -> None:
    async with http_bot(tmp_path) as s:
        key = {"Idempotency-Key": "agent-7f3a-call-1"}
        first_status, first = await s.ask(headers=key)
        async with s.http.post("/v1/questions", json=DEPLOY, headers=key) as response:
            retry_status, retry = response.status, await response.json()
            assert response.headers["Location"] == f"/v1/questions/{first['id']}"
        assert (first_status, retry_status) == (201, 200)
        assert retry["id"] == first["id"]
        assert s.slack.calls.count("chat.postMessage") == 1

        for wait in ("-1", "121", "later"):
            status, problem = await s.get(first["id"], wait=wait)
            assert (status, problem["code"]) == (400, "BAD_WAIT")
        status, problem = await s.get("ffffffffffffffffffff")
        assert (status, problem["code"]) == (404, "NOT_FOUND")
        async with s.http.delete("/v1/questions/ffffffffffffffffffff") as r:
            assert r.status == 404


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_the_bot_leaving_its_api_question_open(
    tmp_path: Path, signum: int
) -> None:
    async with http_bot(tmp_path) as s:
        _, posted = await s.ask()
        polling = asyncio.ensure_future(s.get(posted["id"], wait=60))

        async def pending() -> int:
            async with s.http.get("/healthz") as response:
                count: int = (await response.json())["waiters"]
                return count

        # The ask's watch and the long-poll's: the GET is waiting in the bot.
        for _ in range(200):
            if await pending() == 2:
                break
            await asyncio.sleep(0.02)
        assert await pending() == 2

        loop = asyncio.get_running_loop()
        began = loop.time()
        code = await s.bot.stop(signum, within=10)
        assert code == 0
        assert loop.time() - began < 5
        # The long-poll was answered before the process went away; the question, owned by
        # no process, stays open (the default SQLite store keeps it for the next start).
        status, polled = await asyncio.wait_for(polling, 1)
        assert status == 200
        assert polled["state"] == "pending"
        final = s.message(posted)
        assert "Interrupted" not in all_text(final.blocks)
        assert interactive_elements(final.blocks)
        assert "shutting down" in s.bot.output and "stopped" in s.bot.output


@pytest.mark.slow
async def test_startup_logs_one_line_per_fact_and_no_secret(tmp_path: Path) -> None:
    # The channel and the API token come from ./.env, the rest from the environment.
    async with http_bot(tmp_path, dotenv=("SLACK_CHANNEL", "BOT_API_TOKEN")) as s:
        async with s.http.get("/healthz") as response:
            assert response.status == 200
        await s.bot.stop()
    stderr = "\n".join(s.bot.stderr)
    for fact in (
        "mode: http",
        f"channel: {s.channel}",
        f"slack api: {s.slack.url}",
        "store: sqlite slack-questions.db (finished kept 90 days)",
        "listen: 127.0.0.1:any free port",
        "api auth: on (BOT_API_TOKEN)",
        f"listening on {s.bot.url}",
        "objects kept out of full garbage collections",  # bot/app/heap.py
    ):
        assert sum(fact in line for line in s.bot.stderr) == 1, fact
    assert s.bot.stdout[-1:] == [f"bot listening on {s.bot.url}"]
    assert not [line for line in s.bot.stderr if " WARNING " in line or " ERROR " in line]
    for secret in SECRETS:
        assert secret not in stderr


@pytest.mark.slow
async def test_json_logs_are_one_object_a_line(tmp_path: Path) -> None:
    async with http_bot(tmp_path, LOG_FORMAT="json") as s:
        _, posted = await s.ask()
        async with s.http.delete(f"/v1/questions/{posted['id']}") as response:
            assert response.status == 200
        await s.bot.stop()
    records = [json.loads(line) for line in s.bot.stderr]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    messages = [r["message"] for r in records]
    assert "mode: http" in messages and "stopped" in messages
    shutdown = next(r for r in records if r["message"] == "shutting down")
    assert isinstance(shutdown["pending"], int)  # a key=value field, kept as a JSON number
    ended = next(r for r in records if r["message"] == "question ended")
    assert (ended["request"], ended["code"]) == (posted["id"], "ASK_ABORTED")


@pytest.mark.slow
async def test_help_documents_every_setting(tmp_path: Path) -> None:
    code, out, err = await run_bot_command(["--help"], {}, cwd=tmp_path)
    assert code == 0, err
    missing = [name for name in sorted(SETTING_NAMES) if name not in out]
    assert not missing
    assert "Socket Mode" in out and "/slack/events" in out


def test_the_console_script_runs_the_same_main() -> None:
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("slack-user-questions") == "bot.__main__:main"


@pytest.mark.slow
async def test_bad_settings_exit_2_naming_each_problem(tmp_path: Path) -> None:
    env = {
        "SLACK_BOT_TOKEN": "xoxp-a-user-token-not-a-bot-token",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": "#general",
        "PORT": "http",
        "SLACK_API_URL": "ftp://example.com/",
    }
    code, out, err = await run_bot_command([], env, cwd=tmp_path)
    assert code == 2
    for name in ("SLACK_BOT_TOKEN", "SLACK_CHANNEL", "PORT", "SLACK_API_URL"):
        assert f"{name}:" in err, name
    assert "4 problems" in err
    assert "xoxp-a-user-token" not in err + out
    assert SIGNING_SECRET not in err + out
    assert "Traceback" not in err


@pytest.mark.slow
async def test_missing_settings_exit_2(tmp_path: Path) -> None:
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    code, _, err = await run_bot_command([], env, cwd=tmp_path)
    assert code == 2
    assert "SLACK_CHANNEL: required" in err
    assert BOT_TOKEN not in err
