"""The ``/v1`` HTTP API in process: ``bot.app.runtime.start`` in HTTP mode against the stand-in.

Fast checks of the gateway's contract (the subprocess tests in test_bot_http.py repeat the
main ones against a real ``python -m bot``): the OpenAPI document agrees with the routes,
validation errors carry the seam's ``{name, code, message}``, ``Idempotency-Key`` posts
once even under concurrent retries, long-polls end with the question, and shutdown fails
every waiter with ``ASK_ABORTED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import jsonschema
import pytest
from aiohttp import web
from openapi_spec_validator import validate as validate_openapi

import bot.api.answers
import bot.api.body
import bot.api.gateway
from adapters.slack.clicks.bolt_app import web_client
from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.signing import send_interaction
from adapters.slack.sandbox.webapi import SlackStandIn
from bot.api.asking import read_post
from bot.api.body import QuestionPost
from bot.api.gateway import MAX_WAIT
from bot.api.openapi import document, document_text
from bot.app.runtime import Runtime, start
from bot.settings.config import Settings
from tests.bot_process import fresh_store_path
from tests.slack_harness import all_text, interactive_elements, until

BOT_TOKEN = f"xoxb-test-{secrets.token_hex(8)}"
SIGNING_SECRET = secrets.token_hex(16)
API_TOKEN = f"api-{secrets.token_hex(16)}"

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
class Bed:
    """The Slack stand-in, the running bot, and an authorised client session on its API."""

    slack: SlackStandIn
    runtime: Runtime
    http: aiohttp.ClientSession
    channel: str
    alice: str
    stopped: bool = False

    def messages(self, channel: str | None = None) -> list[Message]:
        """Top-level messages in ``channel`` (default: the bot's channel)."""
        found = self.slack.workspace.messages.get(channel or self.channel, [])
        return [m for m in found if m.thread_ts is None]

    def message(self, record: dict[str, Any]) -> Message:
        """The Slack message of a question as the API shows it."""
        where = record["message"]
        return self.slack.workspace.message(where["channel"], where["ts"])

    async def ask(self, body: Any = DEPLOY, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        """POST /v1/questions; returns (status, JSON)."""
        async with self.http.post("/v1/questions", json=body, **kwargs) as response:
            return response.status, await response.json()

    async def get(self, request_id: str, wait: float | str = 0) -> tuple[int, dict[str, Any]]:
        """GET /v1/questions/{id}?wait=…; returns (status, JSON)."""
        url = f"/v1/questions/{request_id}"
        async with self.http.get(url, params={"wait": str(wait)}) as response:
            return response.status, await response.json()

    async def click(self, record: dict[str, Any], text: str) -> None:
        """Alice clicks the element labelled ``text`` on the question's message."""
        payload = self.slack.click(self.message(record), user=self.alice, text=text)
        status, _ = await self.slack.deliver(payload)
        assert status == 200

    async def stop(self) -> None:
        """Stop the bot (as SIGTERM does)."""
        if not self.stopped:
            self.stopped = True
            await self.runtime.stop()


@contextlib.asynccontextmanager
async def running(**settings: Any) -> AsyncIterator[Bed]:
    """The bot in HTTP mode on a free port, posting to a fresh Slack stand-in."""
    slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET)
    alice = slack.workspace.add_user("alice").id
    channel = slack.workspace.add_channel("agents").id
    await slack.start()
    fields: dict[str, Any] = {
        "mode": "http",
        "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_channel": channel,
        "slack_api_url": slack.url,
        "port": 0,
        "bot_api_token": API_TOKEN,
        "shutdown_grace": 2.0,
        "store_path": fresh_store_path(),
        **settings,
    }
    runtime = await start(Settings(**fields))
    slack.interactivity_url = f"{runtime.url}/slack/events"
    headers = {"Authorization": f"Bearer {API_TOKEN}"} if fields["bot_api_token"] else {}
    http = aiohttp.ClientSession(runtime.url, headers=headers)
    bed = Bed(slack, runtime, http, channel, alice)
    try:
        yield bed
    finally:
        await http.close()
        await bed.stop()
        await slack.stop()


@contextlib.asynccontextmanager
async def another_bot(
    first: Bed, **overrides: Any
) -> AsyncIterator[tuple[Runtime, aiohttp.ClientSession]]:
    """A second bot on ``first``'s settings (a port of its own; ``overrides`` changed), and
    an agent's session with it; the bot is stopped afterwards (again, should the test have
    stopped it)."""
    settings = {**first.runtime.settings.model_dump(), "port": 0, **overrides}
    second = await start(Settings(**settings))
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    try:
        async with aiohttp.ClientSession(second.url, headers=headers) as agent:
            yield second, agent
    finally:
        await second.stop()


async def lost_under_a_long_poll(
    bot: Runtime, agent: aiohttp.ClientSession, url: str, waits: int, redis_admin: Any
) -> tuple[float, dict[str, Any]]:
    """The agent long-polls ``url`` on ``bot`` (its wait there the ``waits``-th); then Redis
    loses the question's record. When it was lost (loop time), and what the poll answered."""
    polling = asyncio.ensure_future(agent.get(url, params={"wait": "30"}))
    await until(lambda: bot.gateway.polls.count == 1, what="the long-poll")
    await until(lambda: bot.provider.pending_count == waits, what="its wait")
    prefix, request_id = bot.settings.redis_prefix, url.rsplit("/", 1)[1]
    began = asyncio.get_running_loop().time()
    assert await redis_admin.delete(f"{prefix}:req:{request_id}") == 1
    response = await asyncio.wait_for(polling, 10)
    polled: dict[str, Any] = await response.json()
    return began, polled


# -- the OpenAPI document -------------------------------------------------------------------


def _document() -> dict[str, Any]:
    return document()


def openapi_paths() -> dict[str, set[str]]:
    """The paths and methods the document declares."""
    return {
        path: {method.upper() for method in item if method != "parameters"}
        for path, item in document()["paths"].items()
    }


async def test_every_v1_route_is_in_the_openapi_document_and_vice_versa() -> None:
    async with running() as bed:
        served: dict[str, set[str]] = {}
        for route in bed.runtime.runner.app.router.routes():
            path = route.resource.canonical if route.resource is not None else ""
            if path.startswith("/v1/") and route.method != "HEAD":
                served.setdefault(path, set()).add(route.method)
    assert served, "no /v1 routes found"
    assert served == openapi_paths()


async def test_the_served_openapi_document_is_the_generated_one() -> None:
    async with running() as bed, bed.http.get("/v1/openapi.json") as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        assert await response.text() == document_text()
        assert await response.json() == _document()


def _schema(name: str) -> dict[str, Any]:
    """A JSON schema for one of the document's schemas, its refs resolving in the document."""
    return {"$ref": f"#/components/schemas/{name}", "components": _document()["components"]}


async def test_what_the_gateway_answers_is_what_the_generated_schemas_say() -> None:
    async with running() as bed:
        status, posted = await bed.ask()
        assert status == 201
        jsonschema.validate(posted, _schema("Question"))
        await bed.click(posted, "Deploy")
        status, answered = await bed.get(posted["id"], wait=5)
        assert (status, answered["state"]) == (200, "answered")
        assert answered["events"] and answered["answer"]
        jsonschema.validate(answered, _schema("Question"))
        status, missing = await bed.get("nosuchquestion")
        assert status == 404
        jsonschema.validate(missing, _schema("Problem"))
    with pytest.raises(jsonschema.ValidationError):  # the schema is not vacuous
        jsonschema.validate({**answered, "state": "gone"}, _schema("Question"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"questions": [], "extra": 1}, _schema("QuestionPost"))


@pytest.mark.slow
def test_the_openapi_document_is_valid_openapi_3_and_every_ref_resolves() -> None:
    document = _document()
    assert str(document["openapi"]).startswith("3.")
    validate_openapi(document)

    def resolve(ref: str) -> Any:
        assert ref.startswith("#/"), f"only local refs are used: {ref}"
        node: Any = document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(node, dict) and part in node, f"unresolved $ref {ref}"
            node = node[part]
        return node

    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
                resolve(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert refs
    unused = set(document["components"]["schemas"]) - {r.rsplit("/", 1)[1] for r in refs}
    assert not unused, f"schemas nobody refers to: {unused}"


# Every status each route can answer with. Every route: 401 (token), 421 (a foreign Host,
# before routing) and 500 (a bug, in the gateway's one error boundary); a seam error an ask
# raises gets the status STATUS_OF_CODE gives its code.
_EVERY_ROUTE = {401, 421, 500}
STATUSES = {
    ("POST", "/v1/questions"): {200, 201, 202, 400, 408, 409, 413, 415, 422, 429, 502, 503}
    | set(bot.api.answers.STATUS_OF_CODE.values())
    | _EVERY_ROUTE,
    ("POST", "/v1/approvals"): {200, 201, 202, 400, 409, 413, 415, 422, 429, 502, 503}
    | _EVERY_ROUTE,
    ("GET", "/v1/questions/{id}"): {200, 400, 404, 429, 503} | _EVERY_ROUTE,
    ("POST", "/v1/questions/{id}/consume"): {200, 404, 409, 410, 503} | _EVERY_ROUTE,
    ("DELETE", "/v1/questions/{id}"): {200, 404, 409, 503} | _EVERY_ROUTE,
    ("GET", "/v1/audit"): {200, 400, 503} | _EVERY_ROUTE,
    ("GET", "/v1/openapi.json"): {200} | _EVERY_ROUTE,
}


def test_the_document_lists_every_status_each_route_answers_with() -> None:
    paths = _document()["paths"]
    assert set(STATUSES) == {
        (method, path) for path, methods in openapi_paths().items() for method in methods
    }
    for (method, path), statuses in STATUSES.items():
        documented = {int(code) for code in paths[path][method.lower()]["responses"]}
        assert statuses <= documented, (method, path, statuses - documented)


def test_the_problem_schema_has_every_field_a_problem_can_carry() -> None:
    schema = _document()["components"]["schemas"]["Problem"]
    fields = set(bot.api.answers.Problem.model_fields)
    assert set(schema["properties"]) == fields
    assert set(schema["required"]) == {"name", "code", "message"}


def test_the_409_and_503_of_post_and_the_503_of_get_say_what_they_are() -> None:
    paths = _document()["paths"]
    post = paths["/v1/questions"]["post"]["responses"]
    assert "ASK_ABORTED" in post["409"]["description"]
    assert "IDEMPOTENCY_KEY_REUSED" in post["409"]["description"]
    assert "ASK_ABORTED" in post["503"]["description"]
    assert "Retry-After" in post["429"]["headers"]
    for method in ("get", "delete"):
        described = paths["/v1/questions/{id}"][method]["responses"]["503"]["description"]
        assert "shutting down" not in described, (method, described)


def test_the_document_describes_the_request_body_the_gateway_accepts() -> None:
    schema = _document()["components"]["schemas"]["QuestionPost"]
    accepted = bot.api.body.QuestionPost.model_json_schema(by_alias=True)["properties"]
    assert set(schema["properties"]) == set(accepted)
    destination = bot.api.body.Destination.model_json_schema(by_alias=True)["properties"]
    described = _document()["components"]["schemas"]["Destination"]["properties"]
    assert set(described) == set(destination) == {"channel", "threadTs"}


# -- asking, answering, aborting ------------------------------------------------------------


@pytest.mark.slow
async def test_ask_answer_in_slack_and_long_poll_the_answer() -> None:
    async with running() as bed:
        status, posted = await bed.ask()
        assert status == 201
        assert posted["state"] == "pending"
        request_id = posted["id"]
        message = bed.message(posted)
        assert message.channel == bed.channel
        assert "Deploy 2.3.1 to production?" in all_text(message.blocks)

        polling = asyncio.ensure_future(bed.get(request_id, wait=10))
        await asyncio.sleep(0.05)
        assert not polling.done()
        await bed.click(posted, "Deploy")
        status, answered = await asyncio.wait_for(polling, 5)
        assert status == 200
        assert answered["state"] == "answered"
        assert answered["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
        assert answered["answeredBy"] == bed.alice
        assert "error" not in answered
        assert answered["finishedAt"] >= answered["createdAt"]
        await until(lambda: not interactive_elements(bed.message(posted).blocks))
        assert "Answered" in all_text(bed.message(posted).blocks)
        await until(lambda: bed.runtime.gateway.running == 0, what="the ask to end")


@pytest.mark.slow
async def test_a_question_can_go_to_another_channel_and_thread() -> None:
    async with running() as bed:
        other = bed.slack.workspace.add_channel("elsewhere").id
        _, parent = await bed.ask()
        thread = parent["message"]["ts"]
        body = {**DEPLOY, "destination": {"channel": other}, "label": "session 3f2a"}
        status, posted = await bed.ask(body)
        assert status == 201
        assert posted["message"]["channel"] == other
        assert "session 3f2a" in all_text(bed.message(posted).blocks)
        body = {**DEPLOY, "destination": {"channel": bed.channel, "threadTs": thread}}
        status, replied = await bed.ask(body)
        assert status == 201
        assert bed.message(replied).thread_ts == thread


@pytest.mark.slow
async def test_delete_aborts_and_the_message_says_cancelled() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        request_id = posted["id"]
        polling = asyncio.ensure_future(bed.get(request_id, wait=10))
        await asyncio.sleep(0.05)
        async with bed.http.delete(f"/v1/questions/{request_id}") as response:
            assert response.status == 200
            deleted = await response.json()
        assert deleted["state"] == "aborted"
        assert deleted["error"]["code"] == "ASK_ABORTED"
        status, polled = await asyncio.wait_for(polling, 5)
        assert (status, polled["state"], polled["error"]["code"]) == (200, "aborted", "ASK_ABORTED")
        assert polled["error"]["name"] == "UserQuestionError"
        assert polled["error"]["message"] == (
            "ask_user_question was aborted before the user answered"
        )
        await until(lambda: "Cancelled" in all_text(bed.message(posted).blocks))
        assert not interactive_elements(bed.message(posted).blocks)
        # DELETE is idempotent: a retry finds it aborted.
        async with bed.http.delete(f"/v1/questions/{request_id}") as response:
            assert response.status == 200
            assert (await response.json())["state"] == "aborted"
        await until(lambda: bed.runtime.gateway.running == 0)


async def test_deleting_an_answered_question_is_409_with_its_answer() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        await bed.click(posted, "Deploy")
        await bed.get(posted["id"], wait=5)
        async with bed.http.delete(f"/v1/questions/{posted['id']}") as response:
            assert response.status == 409
            body = await response.json()
        assert body["state"] == "answered"
        assert body["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}


@pytest.mark.slow
async def test_a_person_dismissing_the_question_reads_as_cancelled_with_the_seam_code() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        await bed.click(posted, "Dismiss")
        status, polled = await bed.get(posted["id"], wait=5)
        assert status == 200
        assert polled["state"] == "cancelled"
        assert polled["error"] == {
            "name": "UserQuestionError",
            "code": "ASK_CANCELLED",
            "message": "the user cancelled ask_user_question",
        }


@pytest.mark.slow
async def test_a_long_poll_that_runs_out_returns_the_pending_question() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        loop = asyncio.get_running_loop()
        began = loop.time()
        status, polled = await bed.get(posted["id"], wait=0.3)
        assert 0.25 <= loop.time() - began < 3
        assert (status, polled["state"]) == (200, "pending")
        assert "answer" not in polled and "error" not in polled
        assert bed.runtime.provider.pending_count == 1  # the long-poll's watch is gone


# -- validation -----------------------------------------------------------------------------


async def test_the_seams_validation_errors_come_back_as_name_code_message() -> None:
    async with running() as bed:
        status, body = await bed.ask({"questions": []})
        assert status == 422
        assert body == {
            "name": "UserQuestionError",
            "code": "EMPTY_QUESTIONS",
            "message": "ask_user_question requires at least one question",
        }
        plan = {
            "id": "plan",
            "question": "Approve?",
            "detail": "# Plan",
            "options": [{"label": "Yes"}, {"label": "No"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
        status, body = await bed.ask({"questions": [plan]})
        assert status == 422
        assert body == {
            "name": "UserQuestionError",
            "code": "BAD_INTENT",
            "message": 'question plan declares intent plan-review whose approve label "Approve" '
            "names none of its options",
        }
        del plan["detail"]
        plan["intent"] = {"kind": "plan-review", "approve": "Yes"}
        status, body = await bed.ask({"questions": [plan]})
        assert (status, body["code"]) == (422, "BAD_INTENT")
        assert body["message"] == (
            "question plan declares intent plan-review without the detail it reviews"
        )
        assert bed.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        ({"questions": [{"id": "q"}]}, ["questions", "0", "question"], "missing"),
        (
            {"questions": [{"id": "q", "question": 1}]},
            ["questions", "0", "question"],
            "string_type",
        ),
        ({"questions": "q"}, ["questions"], "list_type"),
        ({"questions": [], "extra": 1}, ["extra"], "extra_forbidden"),
        (
            {"questions": [], "destination": {"channel": "#general"}},
            ["destination", "channel"],
            "string_pattern_mismatch",
        ),
        ([], [], "model_type"),
    ],
)
async def test_bad_shapes_are_a_pydantic_error_with_its_location(
    body: Any, loc: list[str] | None, kind: str
) -> None:
    async with running() as bed:
        status, problem = await bed.ask(body)
        assert status == 422
        assert problem["name"] == "ValidationError"
        assert problem["code"] == "INVALID_REQUEST"
        assert problem["errors"][0]["type"] == kind
        if loc is not None:
            assert problem["errors"][0]["loc"] == loc
        assert problem["errors"][0]["msg"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "loc", "kind", "message"),
    [
        ({"id": "q", "question": "  "}, ["questions", "0", "question"], "empty_question",
         "question 'q' has no text"),
        ({"id": "q", "question": "Go?", "options": [{"label": "Yes"}, {"label": "No"},
                                                      {"label": "Yes"}]},
         ["questions", "0", "options", "2", "label"], "duplicate_label",
         "question 'q' has the option label 'Yes' twice (options 1 and 3); answers name "
         "options by label, so each label must be unique"),
        ({"id": "q", "question": "Go?", "options": [{"label": "A"}], "multi_select": True},
         ["questions", "0", "multi_select"], "extra_forbidden", None),
    ],
)  # fmt: skip
async def test_the_api_refuses_empty_questions_repeated_labels_and_unknown_keys(
    question: dict[str, Any], loc: list[str], kind: str, message: str | None
) -> None:
    async with running() as bed:
        status, problem = await bed.ask({"questions": [question]})
        assert status == 422
        assert (problem["name"], problem["code"]) == ("ValidationError", "INVALID_REQUEST")
        (error,) = problem["errors"]
        assert (error["loc"], error["type"]) == (loc, kind)
        if message is not None:
            assert problem["message"] == message == error["msg"]
        assert bed.slack.calls.count("chat.postMessage") == 0


async def test_the_wire_name_multi_select_is_still_honoured() -> None:
    async with running() as bed:
        question = {"id": "q", "question": "Go?", "options": [{"label": "A"}, {"label": "B"}]}
        status, _ = await bed.ask({"questions": [{**question, "multiSelect": True}]})
        assert status == 201


@pytest.mark.slow
async def test_the_answer_names_who_answered() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        payload = bed.slack.click(bed.message(posted), user=bed.alice, text="Deploy")
        await bed.slack.deliver(payload)
        _, polled = await bed.get(posted["id"], wait=5)
        assert polled["answeredBy"] == bed.alice
        assert polled["answeredByName"] == payload["user"]["name"]


async def test_malformed_json_oversized_and_non_json_bodies_are_refused() -> None:
    async with running(max_body_bytes=1024) as bed:
        headers = {"Content-Type": "application/json"}
        async with bed.http.post("/v1/questions", data=b'{"questions": [', headers=headers) as r:
            assert r.status == 422
            problem = await r.json()
            assert problem["code"] == "INVALID_REQUEST"
            assert problem["errors"][0]["type"] == "json_invalid"
        big = {"questions": [{"id": "q", "question": "x" * 2000}]}
        async with bed.http.post("/v1/questions", json=big) as r:
            assert r.status == 413
            assert (await r.json())["code"] == "TOO_LARGE"
        async with bed.http.post("/v1/questions", data="questions", headers={}) as r:
            assert r.status == 415
            assert (await r.json())["code"] == "UNSUPPORTED_MEDIA_TYPE"
        assert bed.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
async def test_the_body_limit_is_the_apis_and_does_not_refuse_slacks_payloads() -> None:
    async with running(max_body_bytes=1024) as bed:
        _, posted = await bed.ask()
        payload = bed.slack.click(bed.message(posted), user=bed.alice, text="Deploy")
        status, _ = await bed.slack.deliver(payload)  # a signed click is a few KB
        assert status == 200
        _, polled = await bed.get(posted["id"], wait=5)
        assert polled["state"] == "answered"
        # An oversized body with no Content-Length (chunked) is refused too.

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"questions": [{"id": "q", "question": "'
            for _ in range(10):
                yield b"x" * 200
            yield b'"}]}'

        headers = {"Content-Type": "application/json"}
        async with bed.http.post("/v1/questions", data=chunks(), headers=headers) as r:
            assert r.status == 413
        assert bed.slack.calls.count("chat.postMessage") == 1


@pytest.mark.slow
@pytest.mark.parametrize("wait", ["-1", str(MAX_WAIT + 1), "soon", "nan", "inf", ""])
async def test_wait_must_be_a_number_of_seconds_within_bounds(wait: str) -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        status, problem = await bed.get(posted["id"], wait=wait)
        assert (status, problem["code"]) == (400, "BAD_WAIT")


async def test_unknown_questions_are_404() -> None:
    async with running() as bed:
        status, problem = await bed.get("0123456789abcdef0123")
        assert (status, problem["code"]) == (404, "NOT_FOUND")
        async with bed.http.delete("/v1/questions/0123456789abcdef0123") as response:
            assert response.status == 404


# -- idempotency ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_retried_post_with_the_same_idempotency_key_posts_once() -> None:
    async with running() as bed:
        key = {"Idempotency-Key": "retry-1"}
        first_status, first = await bed.ask(headers=key)
        again_status, again = await bed.ask(headers=key)
        assert (first_status, again_status) == (201, 200)
        assert again["id"] == first["id"]
        assert again["message"] == first["message"]
        _, other = await bed.ask(headers={"Idempotency-Key": "retry-2"})
        assert other["id"] != first["id"]
        assert bed.slack.calls.count("chat.postMessage") == 2


@pytest.mark.slow
async def test_concurrent_retries_with_one_key_post_once() -> None:
    async with running() as bed:
        key = {"Idempotency-Key": "burst"}
        results = await asyncio.gather(*(bed.ask(headers=key) for _ in range(5)))
        assert {body["id"] for _, body in results} == {results[0][1]["id"]}
        assert sorted(status for status, _ in results) == [200, 200, 200, 200, 201]
        assert bed.slack.calls.count("chat.postMessage") == 1


@pytest.mark.slow
async def test_a_retry_after_the_answer_returns_the_answer() -> None:
    async with running() as bed:
        key = {"Idempotency-Key": "done"}
        _, posted = await bed.ask(headers=key)
        await bed.click(posted, "Wait")
        await bed.get(posted["id"], wait=5)
        status, again = await bed.ask(headers=key)
        assert (status, again["state"]) == (200, "answered")
        assert again["answer"] == {"answers": [{"id": "deploy", "selected": ["Wait"]}]}


@pytest.mark.slow
@pytest.mark.parametrize("key", ["", "k" * 256])
async def test_an_idempotency_key_is_1_to_255_characters(key: str) -> None:
    async with running() as bed:
        status, problem = await bed.ask(headers={"Idempotency-Key": key})
        assert (status, problem["code"]) == (400, "BAD_IDEMPOTENCY_KEY")


# -- auth -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Basic {API_TOKEN}", "Bearer", f"Bearer {API_TOKEN}x"],
    ids=["none", "wrong", "basic", "empty", "longer"],  # the same names in every process
)
async def test_every_route_needs_the_bearer_token(authorization: str | None) -> None:
    async with running() as bed:
        headers = {} if authorization is None else {"Authorization": authorization}
        async with aiohttp.ClientSession(bed.runtime.url) as anonymous:
            for method, path in [
                ("POST", "/v1/questions"),
                ("GET", "/v1/questions/0123456789abcdef0123"),
                ("DELETE", "/v1/questions/0123456789abcdef0123"),
                ("GET", "/v1/openapi.json"),
            ]:
                async with anonymous.request(method, path, json=DEPLOY, headers=headers) as r:
                    assert r.status == 401, (method, path)
                    assert r.headers["WWW-Authenticate"].startswith("Bearer")
                    assert (await r.json())["code"] == "UNAUTHORIZED"
            async with anonymous.get("/healthz") as r:
                assert r.status == 200
        assert bed.slack.calls.count("chat.postMessage") == 0


@pytest.mark.slow
async def test_without_a_token_the_api_is_open_on_loopback() -> None:
    async with running(bot_api_token=None) as bed:
        assert bed.runtime.url.startswith("http://127.0.0.1:")
        status, _ = await bed.ask()
        assert status == 201


async def test_slack_events_need_a_valid_signature() -> None:
    async with running() as bed:
        _, posted = await bed.ask()
        payload = bed.slack.click(bed.message(posted), user=bed.alice, text="Deploy")
        async with aiohttp.ClientSession() as session:
            events = f"{bed.runtime.url}/slack/events"
            status, _ = await send_interaction(session, events, payload, "not-the-secret")
        assert status == 401
        _, polled = await bed.get(posted["id"])
        assert polled["state"] == "pending"


# -- Slack failures -------------------------------------------------------------------------


@pytest.mark.slow
async def test_slack_refusing_the_message_is_502_delivery_failed() -> None:
    async with running() as bed:
        bed.slack.faults.add(method="chat.postMessage", kind="server_error", count=10)
        status, problem = await bed.ask()
        assert status == 502
        assert (problem["name"], problem["code"]) == ("UserQuestionError", "DELIVERY_FAILED")


@pytest.mark.slow
async def test_a_slow_slack_answers_202_and_the_question_carries_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bot.api.gateway, "POST_DEADLINE", 0.2)
    async with running() as bed:
        bed.slack.faults.add(method="chat.postMessage", kind="delay", delay=1.0)
        async with bed.http.post("/v1/questions", json=DEPLOY) as response:
            assert response.status == 202
            accepted = await response.json()
            assert response.headers["Location"] == f"/v1/questions/{accepted['id']}"
        assert accepted["state"] == "pending"
        await until(lambda: bed.messages(), what="the late message")
        for _ in range(100):  # the bot stores the ts once Slack's reply reaches it
            _, polled = await bed.get(accepted["id"])
            if "message" in polled:
                break
            await asyncio.sleep(0.02)
        assert polled["message"]["ts"] == bed.messages()[0].ts
        assert polled["state"] == "pending"


# -- a shared store ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_record_lost_from_redis_ends_its_ask_and_long_poll_within_seconds(
    redis_admin: Any, store_prefix: str, redis_url: str
) -> None:
    """Redis flushed under a question: nobody waits forever, the message closes, the API
    says RECORD_LOST (not 404) and /healthz stops counting it."""
    async with running(redis_url=redis_url, redis_prefix=store_prefix) as bed:
        _, posted = await bed.ask()
        request_id = posted["id"]
        polling = asyncio.ensure_future(bed.get(request_id, wait=30))
        await until(lambda: bed.runtime.provider.pending_count == 2, what="ask and long-poll")
        loop = asyncio.get_running_loop()
        began = loop.time()
        assert await redis_admin.delete(f"{store_prefix}:req:{request_id}") == 1
        status, polled = await asyncio.wait_for(polling, 10)
        assert loop.time() - began < 5
        assert (status, polled["state"], polled["error"]["code"]) == (200, "failed", "RECORD_LOST")
        await until(lambda: bed.runtime.gateway.running == 0, what="the ask ends", within=5)
        assert loop.time() - began < 5
        status, got = await bed.get(request_id)  # put back as failed: not a 404
        assert (status, got["state"], got["error"]["code"]) == (200, "failed", "RECORD_LOST")
        assert got["events"][-1]["kind"] == "failed"
        assert got["events"][-1]["detail"]["code"] == "RECORD_LOST"
        await until(lambda: not interactive_elements(bed.message(posted).blocks))
        assert "lost this question" in all_text(bed.message(posted).blocks)
        async with bed.http.get("/healthz") as response:
            assert (await response.json())["pending"] == 0


@pytest.mark.slow
async def test_a_lost_record_with_no_ask_left_closes_its_message_from_the_long_poll(
    redis_admin: Any, store_prefix: str, redis_url: str
) -> None:
    """The asking bot stopped (its API question lives on, no ``ask()`` waits for it any
    more); the bot serving it now loses its record: the agent's long-poll there ends with
    RECORD_LOST within 5 s, and that bot puts the record back as failed and closes the
    message, as the ``ask()`` would have."""
    async with running(redis_url=redis_url, redis_prefix=store_prefix) as first:
        _, posted = await first.ask()
        other = {"questions": [{**DEPLOY["questions"][0], "question": "Roll back 2.3.0?"}]}
        _, unpolled = await first.ask(other)
        request_id = posted["id"]
        await first.stop()  # graceful: the API questions stay pending, nobody asks them
        async with another_bot(first) as (second, agent):  # takes it up, serves it from now on
            url = f"/v1/questions/{request_id}"
            # its wait, beside the waits on the two questions taken up at start
            began, polled = await lost_under_a_long_poll(second, agent, url, 3, redis_admin)
            loop = asyncio.get_running_loop()
            assert loop.time() - began < 5
            assert (polled["state"], polled["error"]["code"]) == ("failed", "RECORD_LOST")
            async with agent.get(url) as response:  # put back as failed: not a 404
                assert response.status == 200
                got = await response.json()
            assert (got["state"], got["error"]["code"]) == ("failed", "RECORD_LOST")
            assert got["events"][-1]["kind"] == "failed"
            await until(lambda: not interactive_elements(first.message(posted).blocks))
            assert loop.time() - began < 5
            assert "lost this question" in all_text(first.message(posted).blocks)
            # One nobody polls: the bot that took it up at start closes it all the same.
            began = loop.time()
            assert await redis_admin.delete(f"{store_prefix}:req:{unpolled['id']}") == 1
            await until(lambda: not interactive_elements(first.message(unpolled).blocks))
            assert loop.time() - began < 5
            async with agent.get(f"/v1/questions/{unpolled['id']}") as response:
                assert (await response.json())["error"]["code"] == "RECORD_LOST"
            async with agent.get("/healthz") as response:
                assert (await response.json())["pending"] == 0


@pytest.mark.slow
async def test_a_record_lost_under_an_ask_in_one_bot_and_a_long_poll_in_another(
    redis_admin: Any, store_prefix: str, redis_url: str
) -> None:
    """Two bots share Redis: the ``ask()`` waits in the first, an agent's long-poll in the
    second. Redis loses the record: whichever puts it back first closes the message (once:
    the other's put-back loses and shows nothing) and both waits end within 5 s, the
    long-poll's too, though its bot may not have looked before the record was back."""
    async with (
        running(redis_url=redis_url, redis_prefix=store_prefix) as first,
        another_bot(first) as (second, agent),
    ):
        _, posted = await first.ask()
        url = f"/v1/questions/{posted['id']}"
        began, polled = await lost_under_a_long_poll(second, agent, url, 1, redis_admin)
        loop = asyncio.get_running_loop()
        assert (polled["state"], polled["error"]["code"]) == ("failed", "RECORD_LOST")
        await until(lambda: first.runtime.gateway.running == 0, what="the ask ends")
        assert loop.time() - began < 5
        await until(lambda: not interactive_elements(first.message(posted).blocks))
        await asyncio.sleep(1.0)  # a second, late update would land by now
        lost = [
            call
            for call in first.slack.calls("chat.update")
            if "lost this question" in all_text(call.params.get("blocks") or [])
        ]
        assert len(lost) == 1


@pytest.mark.slow
async def test_with_redis_any_bot_answers_get_and_delete_for_a_question(
    redis_admin: Any, store_prefix: str, redis_url: str
) -> None:
    async with (
        running(redis_url=redis_url, redis_prefix=store_prefix) as first,
        another_bot(first) as (_, other),
    ):
        _, posted = await first.ask()
        asked = first.runtime.gateway  # the ask runs in the first bot
        assert asked.running == 1
        async with other.get(f"/v1/questions/{posted['id']}") as response:
            assert (await response.json())["state"] == "pending"
        polling = asyncio.ensure_future(first.get(posted["id"], wait=10))
        async with other.delete(f"/v1/questions/{posted['id']}") as response:
            assert response.status == 200
        status, polled = await asyncio.wait_for(polling, 5)
        assert (status, polled["state"]) == (200, "aborted")
        assert polled["error"]["code"] == "ASK_ABORTED"
        await until(lambda: asked.running == 0, what="the first bot's waiter")
        await until(lambda: "Cancelled" in all_text(first.message(posted).blocks))


@pytest.mark.slow
async def test_stopping_answers_long_polls_on_questions_other_bots_own(
    redis_admin: Any, store_prefix: str, redis_url: str
) -> None:
    async with running(redis_url=redis_url, redis_prefix=store_prefix) as first:
        async with another_bot(first) as (second, other):
            _, posted = await first.ask()
            url = f"/v1/questions/{posted['id']}"
            polling = asyncio.ensure_future(other.get(url, params={"wait": "60"}))
            await until(lambda: second.provider.pending_count == 1, what="the long-poll")
            loop = asyncio.get_running_loop()
            began = loop.time()
            await second.stop()
            assert loop.time() - began < 3
            response = await asyncio.wait_for(polling, 1)
            assert (await response.json())["state"] == "pending"
            response.release()
        _, polled = await first.get(posted["id"])
        assert polled["state"] == "pending"  # the owner's question lives on


# -- health and shutdown --------------------------------------------------------------------


async def test_healthz_reports_mode_and_pending_questions() -> None:
    async with running() as bed:
        async with bed.http.get("/healthz") as response:
            assert response.status == 200
            assert await response.json() == {
                "ok": True,
                "mode": "http",
                "store": "ok",
                "pending": 0,
                "owned": 0,
                "unowned": 0,
                "open": 0,
                "waiters": 0,
                "longPolls": 0,
                "webApiQueue": {},
            }
        await bed.ask()  # over the API: owned by no process
        async with bed.http.get("/healthz") as response:
            body = await response.json()
            assert (body["pending"], body["owned"], body["unowned"], body["open"]) == (1, 0, 1, 1)


@pytest.mark.slow
async def test_stopping_interrupts_pending_questions_and_their_long_polls() -> None:
    # The memory store dies with the process: nothing could take the questions up again.
    async with running(store="memory") as bed:
        _, first = await bed.ask()
        _, second = await bed.ask()
        polls = [
            asyncio.ensure_future(bed.get(first["id"], wait=30)),
            asyncio.ensure_future(bed.get(second["id"], wait=30)),
        ]
        await until(lambda: bed.runtime.provider.pending_count == 4, what="two long-polls")
        loop = asyncio.get_running_loop()
        began = loop.time()
        await bed.stop()
        assert loop.time() - began < 3
        for poll in polls:
            status, polled = await poll
            assert (status, polled["state"]) == (200, "aborted")
            assert polled["error"]["code"] == "ASK_ABORTED"
        for record in (first, second):
            text = all_text(bed.message(record).blocks)
            assert "Interrupted" in text
            assert not interactive_elements(bed.message(record).blocks)
        assert bed.runtime.gateway.running == 0
        assert bed.runtime.provider.pending_count == 0


@pytest.mark.slow
async def test_stopping_leaves_api_questions_open_and_a_restarted_bot_serves_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The default SQLite store outlives the process: API questions are owned by no process.
    caplog.set_level(logging.INFO, logger="bot.gateway")
    path = fresh_store_path()
    async with running(store_path=path) as bed:
        _, first = await bed.ask()
        _, second = await bed.ask()
        assert (await bed.runtime.store.get(first["id"])).owner is None  # type: ignore[union-attr]
        polls = [asyncio.ensure_future(bed.get(r["id"], wait=30)) for r in (first, second)]
        await until(lambda: bed.runtime.provider.pending_count == 4, what="two long-polls")
        loop = asyncio.get_running_loop()
        began = loop.time()
        await bed.stop()
        assert loop.time() - began < 3
        for poll in polls:
            status, polled = await poll
            assert (status, polled["state"]) == (200, "pending")
        for record in (first, second):
            message = bed.message(record)
            assert "Interrupted" not in all_text(message.blocks)
            assert interactive_elements(message.blocks)
        assert bed.runtime.gateway.running == 0
        assert bed.runtime.provider.pending_count == 0
        logged = [r.getMessage() for r in caplog.records if r.name == "bot.gateway"]
        assert logged.count("question released") == 2 and "question ended" not in logged
        updates = len(bed.slack.calls("chat.update"))

        fields = {**bed.runtime.settings.model_dump(), "port": 0}
        again = await start(Settings(**fields))
        try:
            bed.slack.interactivity_url = f"{again.url}/slack/events"
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with aiohttp.ClientSession(again.url, headers=headers) as http:
                async with http.get(f"/v1/questions/{first['id']}") as response:
                    assert (await response.json())["state"] == "pending"
                async with http.get("/healthz") as response:
                    assert (await response.json())["pending"] == 2
                url = f"/v1/questions/{first['id']}"
                polling = asyncio.ensure_future(http.get(url, params={"wait": "30"}))
                # each watched: its slot of the caps
                assert list(again.gateway.held.asked.values()).count(False) == 2
                await until(lambda: again.provider.pending_count == 3, what="the long-poll")
                await bed.click(first, "Deploy")
                response = await asyncio.wait_for(polling, 10)
                polled = await response.json()
                response.release()
            assert polled["state"] == "answered"
            assert polled["answer"] == {"answers": [{"id": "deploy", "selected": ["Deploy"]}]}
            assert len(bed.messages()) == 2  # no second post
            assert len(bed.slack.calls("chat.update")) >= updates
        finally:
            await again.stop()


async def test_stopping_still_closes_everything_when_the_store_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

    async def unreachable(owner: str | None = None) -> list[Any]:
        raise UserQuestionError("the pending store (Redis) did not answer", STORE_UNAVAILABLE)

    async with running() as bed:
        monkeypatch.setattr(bed.runtime.store, "open_records", unreachable)
        await asyncio.wait_for(bed.stop(), 5)
        assert "could not interrupt the pending questions" in caplog.text
        with pytest.raises(aiohttp.ClientConnectionError):
            await bed.get("0123456789abcdef0123")


@pytest.mark.slow
async def test_the_bot_keeps_one_connection_to_slack_and_closes_it_at_stop() -> None:
    async with running() as bed:
        for _ in range(3):
            status, record = await bed.ask()
            assert status == 201, record
            await bed.click(record, "Deploy")
            await until(
                lambda record=record: not interactive_elements(bed.message(record).blocks),
                what="the answered message",
            )
        assert len(bed.slack.calls) >= 7  # auth.test, 3 × chat.postMessage, 3 × chat.update
        assert len(bed.slack.connections) == 1
        session = bed.runtime.app.client.session
        assert session is not None and not session.closed
        await bed.stop()
        assert session.closed


async def test_a_start_that_fails_closes_the_slack_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    import bot.app.runtime

    made: list[Any] = []

    def recording_client(*args: Any, **kwargs: Any) -> Any:
        client = web_client(*args, **kwargs)
        made.append(client)
        return client

    monkeypatch.setattr(bot.app.runtime, "web_client", recording_client)
    async with SlackStandIn(token=BOT_TOKEN, signing_secret=SIGNING_SECRET) as slack:
        channel = slack.workspace.add_channel("agents").id
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            settings = Settings(
                mode="http",
                slack_bot_token=BOT_TOKEN,
                slack_signing_secret=SIGNING_SECRET,
                slack_channel=channel,
                slack_api_url=slack.url,
                port=taken.getsockname()[1],
                store_path=fresh_store_path(),
            )
            with pytest.raises(OSError):
                await start(settings)
    assert len(made) == 1 and made[0].session.closed


async def test_no_new_questions_once_shutdown_has_begun() -> None:
    async with running() as bed:
        bed.runtime.gateway.close()
        status, problem = await bed.ask()
        assert status == 503
        assert problem["code"] == "ASK_ABORTED"
        assert bed.slack.calls.count("chat.postMessage") == 0


# -- the error boundary ---------------------------------------------------------------------


async def test_a_seam_error_from_the_provider_is_answered_with_its_code_and_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

    async def unreachable(request_id: str) -> Any:
        raise UserQuestionError("the pending store (Redis) did not answer", STORE_UNAVAILABLE)

    async with running() as bed:
        monkeypatch.setattr(bed.runtime.provider, "status", unreachable)
        status, problem = await bed.get("0123456789abcdef0123")
        assert status == 503
        assert problem == {  # the store's own words (its address) are for the log only
            "name": "UserQuestionError",
            "code": STORE_UNAVAILABLE,
            "message": bot.api.answers.STORE_DOWN,
        }


async def test_a_bug_behind_the_api_is_a_logged_500_that_shows_no_detail(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request_id: str) -> Any:
        raise RuntimeError("internal detail xyzzy")

    async with running() as bed:
        monkeypatch.setattr(bed.runtime.provider, "status", broken)
        status, problem = await bed.get("0123456789abcdef0123")
        assert status == 500
        assert problem == {
            "name": "InternalError",
            "code": "INTERNAL",
            "message": "the bot could not handle the request",
        }
        assert "xyzzy" not in json.dumps(problem)
        [record] = [r for r in caplog.records if r.name == "bot.gateway"]
        assert record.exc_info is not None and "xyzzy" in str(record.exc_info[1])
        monkeypatch.undo()
        status, _ = await bed.ask()  # the API goes on answering
        assert status == 201


async def test_a_question_with_a_timeout_shows_its_deadline_and_a_link() -> None:
    async with running() as bed:
        body = {
            "questions": [{"id": "q", "question": "Go?", "options": [{"label": "A"}]}],
            "timeout": 3600,
            "reminders": [600],
            "escalateAfter": 1800,
            "escalateTo": "S0ONCALL1",
            "link": "https://ci.example/runs/42",
        }
        status, posted = await bed.ask(body)
        assert status == 201
        text = json.dumps(bed.message(posted).blocks)
        assert ":alarm_clock: Answer by <!date^" in text
        assert '"url": "https://ci.example/runs/42"' in text


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"timeout": 0}, ["timeout"]),
        ({"timeout": 10**7}, ["timeout"]),
        ({"escalateTo": "@oncall"}, ["escalateTo"]),
        ({"link": "javascript:alert(1)"}, ["link"]),
        ({"reminders": [-5]}, ["reminders", "0"]),
    ],
)
async def test_deadline_fields_are_checked(extra: dict[str, Any], loc: list[str]) -> None:
    async with running() as bed:
        body = {"questions": [{"id": "q", "question": "Go?"}], **extra}
        status, problem = await bed.ask(body)
        assert status == 422 and problem["errors"][0]["loc"] == loc


@pytest.mark.slow
async def test_a_question_aborted_as_its_waiter_is_released_is_logged_as_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A stop releases the API ask's waiter; an abort (another process's DELETE, say) lands
    # before the waiter looks: the question ended, it is not left open for the next process.
    caplog.set_level(logging.INFO, logger="bot.gateway")
    async with running() as bed:
        _, posted = await bed.ask()
        gateway = bed.runtime.gateway
        gateway.close()  # what a stop does first
        ended = await bed.runtime.provider.abort(posted["id"], "Cancelled by the asker.")
        assert ended is not None and ended.state == "aborted"
        await until(lambda: gateway.running == 0, what="the ask to end")
        logged = [r for r in caplog.records if r.name == "bot.gateway"]
        messages = [r.getMessage() for r in logged]
        assert "question released" not in messages
        record = next(r for r in logged if r.getMessage() == "question ended")
        assert (record.request, record.code) == (posted["id"], "ASK_ABORTED")  # type: ignore[attr-defined]


def test_unknown_keys_are_named_in_the_bodys_order() -> None:
    """Attribute names (``multi_select``) are refused in the order the body has them: the
    422's message names the first."""
    question = {"id": "a", "question": "q?", "multi_select": True, "options": [{"label": "x"}]}
    body = {"escalate_after": 5, "escalateTo": "U1ABC", "timeout": 10, "questions": [question]}
    refused = read_post(json.dumps(body).encode(), QuestionPost)
    assert isinstance(refused, web.Response) and isinstance(refused.text, str)
    problem = json.loads(refused.text)
    assert (
        problem["message"] == "unknown key 'escalate_after' (the API takes the seam's wire names)"
    )
    assert [e["loc"] for e in problem["errors"]] == [
        ["escalate_after"],
        ["questions", "0", "multi_select"],
    ]
