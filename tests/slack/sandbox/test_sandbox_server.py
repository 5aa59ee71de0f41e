"""The sandbox page's HTTP endpoints, driven without a browser against the real bot.

The bot runs in sandbox mode in-process (``bot.app.runtime.start``), exactly as ``python -m bot``
with no tokens runs it; these tests act as the page does: read ``/sandbox/state``, POST
clicks, choices and modal submissions, and listen on ``/sandbox/events``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from adapters.slack.sandbox.demo import demo_questions
from adapters.slack.sandbox.site import DEFAULT_CHANNEL, SandboxServer
from bot.app.runtime import Runtime, start
from bot.questions.models import AskUserQuestionRequest
from bot.settings.config import Settings

Json = dict[str, Any]


class Page:
    """What the page does, over plain HTTP."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self.session = session

    async def get(self, path: str) -> aiohttp.ClientResponse:
        async with self.session.get(self.url + path) as response:
            await response.read()
            return response

    async def state(self, user: str = "alice") -> Json:
        async with self.session.get(f"{self.url}sandbox/state", params={"user": user}) as r:
            assert r.status == 200, await r.text()
            body: Json = await r.json()
            return body

    async def post(
        self, path: str, body: Any, *, headers: dict[str, str] | None = None
    ) -> tuple[int, Json]:
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        sent = {"Content-Type": "application/json", **(headers or {})}
        async with self.session.post(f"{self.url}{path}", data=data, headers=sent) as r:
            return r.status, await r.json()

    async def until(
        self, predicate: Callable[[Json], Any], *, user: str = "alice", within: float = 5.0
    ) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            state = await self.state(user)
            found = predicate(state)
            if found:
                return found
            if loop.time() > deadline:
                raise AssertionError(f"timed out; last state: {json.dumps(state)[:2000]}")
            await asyncio.sleep(0.02)

    async def message_with(self, text: str, *, user: str = "alice") -> Json:
        """The (first) top-level message whose blocks mention ``text``."""
        return await self.until(lambda s: find_message(s, text), user=user)  # type: ignore[no-any-return]

    async def click(
        self,
        message: Json,
        label: str,
        *,
        user: str = "alice",
        values: list[list[Any]] | None = None,
    ) -> tuple[int, Json]:
        block_id, action_id = element(message, label)
        return await self.post(
            "sandbox/action",
            {
                "user": user,
                "channel": message["channel"],
                "ts": message["ts"],
                "block_id": block_id,
                "action_id": action_id,
                "values": values or [],
            },
        )


def find_message(state: Json, text: str) -> Json | None:
    for message in state["messages"]:
        if message["thread_ts"] in (None, message["ts"]) and text in json.dumps(
            message["blocks"], ensure_ascii=False
        ):
            return message  # type: ignore[no-any-return]
    return None


def elements(message: Json) -> list[tuple[Json, Json]]:
    found = []
    for block in message["blocks"]:
        for item in block.get("elements") or []:
            if isinstance(item, dict) and "action_id" in item:
                found.append((block, item))
        for key in ("accessory", "element"):
            if isinstance(block.get(key), dict):
                found.append((block, block[key]))
    return found


def element(message: Json, label: str) -> tuple[str, str]:
    """The (block_id, action_id) of the button labelled ``label`` (or the element type)."""
    for block, item in elements(message):
        text = (item.get("text") or {}).get("text")
        if text == label or item.get("type") == label:
            return block["block_id"], item["action_id"]
    raise AssertionError(f"no element {label!r} in {json.dumps(message['blocks'])[:1500]}")


def option_value(message: Json, label: str) -> str:
    for _, item in elements(message):
        for option in item.get("options") or []:
            if option["text"]["text"] == label:
                return str(option["value"])
    raise AssertionError(f"no option {label!r}")


def html_fields(value: Any) -> list[str]:
    """Every ``html`` rendering in blocks (what the page inserts as markup)."""
    if isinstance(value, list):
        return [html for item in value for html in html_fields(item)]
    if isinstance(value, dict):
        found = [value["html"]] if isinstance(value.get("html"), str) else []
        return found + [
            html for key, item in value.items() if key != "html" for html in html_fields(item)
        ]
    return []


def is_record(message: Json) -> bool:
    """Whether the message shows an outcome: no interactive element left."""
    return not elements(message)


def outcome_text(message: Json) -> str:
    return " ".join(
        element_["html"]
        for block in message["blocks"]
        if block["type"] == "context"
        for element_ in block["elements"]
    )


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    """The bot in sandbox mode, both servers on free ports of 127.0.0.1."""
    running = await start(Settings(mode="sandbox", port=0, sandbox_port=0, shutdown_grace=2))
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def page(runtime: Runtime) -> AsyncIterator[Page]:
    assert runtime.sandbox_url is not None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield Page(runtime.sandbox_url, session)


# --- the page and its assets -----------------------------------------------------------


async def test_the_page_and_its_assets_are_served_under_a_strict_policy(page: Page) -> None:
    index = await page.get("")
    assert index.status == 200
    assert index.content_type == "text/html"
    policy = index.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy
    assert index.headers["Cache-Control"] == "no-store"
    async with page.session.get(page.url) as response:
        text = await response.text()
    assert '<script src="/static/app.js"' in text and "/static/app.css" in text
    assert 'data-testid="demo-start"' in text
    script = await page.get("static/app.js")
    assert (script.status, script.content_type) == (200, "text/javascript")
    style = await page.get("static/app.css")
    assert (style.status, style.content_type) == (200, "text/css")
    for missing in ("static/nothing.js", "static/server.py", "static/..%2fserver.py"):
        assert (await page.get(missing)).status == 404, missing
    assert (await page.get("favicon.ico")).status == 204


async def test_the_state_shows_the_people_the_channel_and_the_demo(page: Page) -> None:
    state = await page.state()
    assert [p["name"] for p in state["people"]] == ["alice", "bob", "carol"]
    alice = state["people"][0]["id"]
    assert state["me"] == alice
    assert state["default_channel"] == DEFAULT_CHANNEL
    assert state["channels"] == [
        {
            "id": DEFAULT_CHANNEL,
            "name": "agent-questions",
            "kind": "channel",
            "label": "agent-questions",
        }
    ]
    assert state["messages"] == [] and state["view"] is None
    assert state["demo"] == {"available": True, "running": False, "runs": []}
    assert state["connected"] is True
    assert (await page.state(alice))["me"] == alice  # by id or by name
    async with page.session.get(f"{page.url}sandbox/state", params={"user": "zed"}) as r:
        assert r.status == 404
        assert (await r.json())["error"] == "user_not_found"
    bot = state["bot"]["user_id"]
    async with page.session.get(f"{page.url}sandbox/state", params={"user": bot}) as r:
        assert r.status == 404  # the page acts as people, not as the bot


# --- the demo, end to end through the page's endpoints ---------------------------------


@pytest.mark.slow
async def test_the_demo_through_the_page_endpoints(page: Page) -> None:
    status, body = await page.post("sandbox/demo", {})
    assert status == 200 and body["demo"]["running"] is True
    steps = body["demo"]["runs"][0]["steps"]
    assert [s["id"] for s in steps] == [q.id for _, q in demo_questions()] + ["approval"]

    # 1. The plan review: Approve.
    plan = await page.message_with("Plan review")
    assert plan["author"]["is_bot"] is True
    markdown = next(b for b in plan["blocks"] if b["type"] == "markdown")
    assert "<b>exponential backoff</b>" in markdown["html"]
    assert (await page.click(plan, "Approve")) == (200, {"ok": True, "status": 200})
    answered = await page.until(
        lambda s: next((m for m in s["messages"] if m["ts"] == plan["ts"] and is_record(m)), None)
    )
    assert "Approved by" in outcome_text(answered) and "@alice" in outcome_text(answered)
    assert answered["edited"] is True

    # 2. The multi-select: tick two boxes, add "Other…" text in the modal, Submit.
    checks = await page.message_with("Which checks should run")
    ticked: list[str] = []
    for label in ("Unit tests", "Type check"):
        ticked.append(option_value(checks, label))
        block_id, action_id = element(checks, "checkboxes")
        status, body = await page.click(
            checks, "checkboxes", values=[[block_id, action_id, list(ticked)]]
        )
        assert status == 200, body
    assert (await page.click(checks, "Other…"))[0] == 200
    view = await page.until(lambda s: s["view"])
    assert "Your answer" in view["title_html"] and view["submit_html"] == "Save"
    (input_block,) = [b for b in view["blocks"] if b["type"] == "input"]
    key = [input_block["block_id"], input_block["element"]["action_id"]]
    status, body = await page.post(
        "sandbox/submit", {"user": "alice", "view_id": view["id"], "values": [[*key, "   "]]}
    )
    assert status == 200
    assert body == {
        "ok": False,
        "status": 200,
        "error": "errors",
        "errors": {input_block["block_id"]: "Please enter an answer."},
    }
    assert (await page.state())["view"]["errors"] == body["errors"]
    status, body = await page.post(
        "sandbox/submit",
        {"user": "alice", "view_id": view["id"], "values": [[*key, "Smoke test on staging"]]},
    )
    assert (status, body) == (200, {"ok": True, "status": 200})
    assert (await page.state())["view"] is None
    # Alice's free text is her own draft (the modal said so: no note to go stale); the
    # message is not redrawn (that would reset the boxes other people are ticking).
    assert not [m for m in (await page.state())["messages"] if m["ephemeral"]]
    block_id, action_id = element(checks, "checkboxes")
    status, _ = await page.click(checks, "Submit", values=[[block_id, action_id, ticked]])
    assert status == 200
    done = await page.until(
        lambda s: next((m for m in s["messages"] if m["ts"] == checks["ts"] and is_record(m)), None)
    )
    assert "Unit tests, Type check, “Smoke test on staging”" in json.dumps(
        done["blocks"], ensure_ascii=False
    )

    # 3. The free-text question: Answer…, type, Send.
    name = await page.message_with("What should the release be called?")
    assert (await page.click(name, "Answer…"))[0] == 200
    view = await page.until(lambda s: s["view"])
    (input_block,) = [b for b in view["blocks"] if b["type"] == "input"]
    key = [input_block["block_id"], input_block["element"]["action_id"]]
    status, body = await page.post(
        "sandbox/submit", {"user": "alice", "view_id": view["id"], "values": [[*key, "Northwind"]]}
    )
    assert (status, body["ok"]) == (200, True)

    # 4. The tool approval: Allow once (the page asks to confirm first; the click follows).
    approval = await page.message_with("Run the release script")
    assert (await page.click(approval, "Allow once"))[0] == 200

    # The demo agent got every answer back.
    demo = await page.until(lambda s: not s["demo"]["running"] and s["demo"])
    run = demo["runs"][0]
    assert [(s["id"], s["state"], s["answer"]) for s in run["steps"]] == [
        ("plan", "answered", {"answers": [{"id": "plan", "selected": ["Approve"]}]}),
        (
            "checks",
            "answered",
            {
                "answers": [
                    {
                        "id": "checks",
                        "selected": ["Unit tests", "Type check"],
                        "custom": "Smoke test on staging",
                    }
                ]
            },
        ),
        ("name", "answered", {"answers": [{"id": "name", "selected": [], "custom": "Northwind"}]}),
        ("approval", "answered", None),
    ]
    assert run["steps"][3]["decision"] == "allowed-once"


async def test_slash_demo_in_the_composer_runs_the_demo(page: Page) -> None:
    status, body = await page.post(
        "sandbox/post", {"user": "bob", "channel": DEFAULT_CHANNEL, "text": " /demo "}
    )
    assert status == 200 and body["demo"]["running"] is True
    message = await page.message_with("Plan review", user="bob")
    assert message["author"]["is_bot"] is True
    assert not [m for m in (await page.state())["messages"] if not m["author"]["is_bot"]]


async def test_a_dismissed_question_reaches_the_demo_as_cancelled(page: Page) -> None:
    await page.post("sandbox/demo", {})
    plan = await page.message_with("Plan review")
    assert (await page.click(plan, "Dismiss", user="carol"))[0] == 200
    step = await page.until(
        lambda s: next(
            (x for x in s["demo"]["runs"][0]["steps"] if x["id"] == "plan" and x["error"]), None
        )
    )
    assert step["state"] == "failed" and step["error"]["code"] == "ASK_CANCELLED"
    record = (await page.state())["messages"][0]
    assert "Dismissed by" in outcome_text(record) and "@carol" in outcome_text(record)


# --- people writing, ephemeral messages, modals ----------------------------------------


async def test_a_person_writes_a_message_escaped_like_slack(page: Page) -> None:
    status, body = await page.post(
        "sandbox/post",
        {"user": "bob", "channel": DEFAULT_CHANNEL, "text": "<b>hi</b> & <!channel> *yes*"},
    )
    assert status == 200
    (message,) = (await page.state())["messages"]
    assert message["ts"] == body["ts"]
    assert message["author"]["name"] == "bob" and message["author"]["is_bot"] is False
    assert message["text_html"] == "&lt;b&gt;hi&lt;/b&gt; &amp; &lt;!channel&gt; <b>yes</b>"


async def test_a_reply_goes_into_its_thread(page: Page) -> None:
    _, parent = await page.post(
        "sandbox/post", {"user": "bob", "channel": DEFAULT_CHANNEL, "text": "parent"}
    )
    _, reply = await page.post(
        "sandbox/post",
        {"user": "alice", "channel": DEFAULT_CHANNEL, "text": "reply", "thread_ts": parent["ts"]},
    )
    messages = (await page.state())["messages"]
    assert [(m["ts"], m["thread_ts"], m["reply_count"]) for m in messages] == [
        (parent["ts"], None, 1),
        (reply["ts"], parent["ts"], 0),
    ]
    status, body = await page.post(
        "sandbox/post",
        {"user": "alice", "channel": DEFAULT_CHANNEL, "text": "x", "thread_ts": "1.000001"},
    )
    assert (status, body["error"]) == (404, "thread_not_found")


async def test_an_ephemeral_message_is_seen_only_by_its_person(
    runtime: Runtime, page: Page
) -> None:
    state = await page.state()
    bob = state["people"][1]["id"]
    await runtime.provider.client.chat_postEphemeral(
        channel=DEFAULT_CHANNEL,
        user=bob,
        text="psst <@" + bob + ">",
        blocks=[
            {"type": "section", "text": {"type": "mrkdwn", "text": "only *you*"}},
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "other.app",
                        "text": {"type": "plain_text", "text": "Ok"},
                    }
                ],
            },
        ],
    )
    (message,) = (await page.state("bob"))["messages"]
    assert message["ephemeral"] is True and message["author"]["is_bot"] is True
    assert message["blocks"][0]["text"]["html"] == "only <b>you</b>"
    assert message["text_html"].endswith("@bob</span>")
    assert (await page.state("alice"))["messages"] == []
    status, body = await page.click(message, "Ok", user="alice")
    assert (status, body["error"]) == (403, "not_visible")
    status, body = await page.click(message, "Ok", user="bob")
    # Delivered, signed, to the bot, which has no listener for another app's button.
    assert (status, body["error"], body["status"]) == (502, "app_error", 404)


async def test_a_modal_closes_only_for_its_person(runtime: Runtime, page: Page) -> None:
    task = asyncio.ensure_future(
        runtime.service.ask(
            AskUserQuestionRequest.model_validate(
                {"questions": [{"id": "q", "question": "Name it?"}]}
            )
        )
    )
    try:
        message = await page.message_with("Name it?")
        await page.click(message, "Answer…", user="bob")
        view = await page.until(lambda s: s["view"], user="bob")
        assert (await page.state("alice"))["view"] is None
        status, body = await page.post("sandbox/close", {"user": "alice", "view_id": view["id"]})
        assert (status, body["error"]) == (403, "not_your_view")
        status, body = await page.post(
            "sandbox/submit", {"user": "alice", "view_id": view["id"], "values": []}
        )
        assert (status, body["error"]) == (403, "not_your_view")
        assert await page.post("sandbox/close", {"user": "bob", "view_id": view["id"]}) == (
            200,
            {"ok": True},
        )
        assert (await page.state("bob"))["view"] is None
        status, body = await page.post("sandbox/close", {"user": "bob", "view_id": view["id"]})
        assert (status, body["error"]) == (404, "view_not_found")
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_asker_text_reaches_the_page_escaped(runtime: Runtime, page: Page) -> None:
    attack = '<script>alert("x")</script> <!channel> <@U00000002> <https://evil.example|x>'
    task = asyncio.ensure_future(
        runtime.service.ask(
            AskUserQuestionRequest.model_validate(
                {
                    "questions": [
                        {
                            "id": "q",
                            "question": attack,
                            "detail": attack,
                            "options": [{"label": attack}, {"label": "No"}],
                        }
                    ]
                }
            )
        )
    )
    try:
        message = await page.message_with("No")
        rendered = " ".join(html_fields(message["blocks"]))  # what the page inserts as HTML
        assert "<script" not in rendered and "<a " not in rendered
        assert "sk-mention" not in rendered  # nothing the asker wrote became a mention
        assert rendered.count("&lt;script&gt;") >= 3  # question, detail, button label
        question = next(b for b in message["blocks"] if b["type"] == "rich_text")
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in question["html"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- the live stream -------------------------------------------------------------------


async def test_the_event_stream_reports_each_change(page: Page) -> None:
    async with page.session.get(f"{page.url}sandbox/events") as stream:
        assert stream.content_type == "text/event-stream"
        events: list[Json] = []

        async def next_event() -> Json:
            while True:
                line = (await stream.content.readline()).decode()
                if line.startswith("data: "):
                    event: Json = json.loads(line[len("data: ") :])
                    events.append(event)
                    return event

        assert (await asyncio.wait_for(next_event(), 5))["kind"] == "hello"
        _, posted = await page.post(
            "sandbox/post", {"user": "alice", "channel": DEFAULT_CHANNEL, "text": "hello"}
        )
        event = await asyncio.wait_for(next_event(), 5)
        assert event["kind"] == "message.posted"
        assert (event["channel"], event["ts"]) == (DEFAULT_CHANNEL, posted["ts"])
        await page.post("sandbox/demo", {})
        kinds: set[str] = set()
        while not {"demo", "message.posted"} <= kinds:
            kinds.add((await asyncio.wait_for(next_event(), 5))["kind"])
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_stopping_ends_the_streams_and_interrupts_the_demo() -> None:
    runtime = await start(Settings(mode="sandbox", port=0, sandbox_port=0, shutdown_grace=2))
    sandbox = runtime.sandbox
    assert isinstance(sandbox, SandboxServer)
    stopped = False
    try:
        assert runtime.sandbox_url is not None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            page = Page(runtime.sandbox_url, session)
            await page.post("sandbox/demo", {})
            plan = await page.message_with("Plan review")
            async with session.get(f"{page.url}sandbox/events") as stream:
                await stream.content.readline()
                loop = asyncio.get_running_loop()
                began = loop.time()
                await runtime.stop()
                stopped = True
                assert loop.time() - began < 5
                await asyncio.wait_for(stream.content.read(), 5)  # the stream has ended
                assert stream.content.at_eof()
    finally:
        if not stopped:
            await runtime.stop()
    assert sandbox.demo is not None
    (run,) = sandbox.demo.runs
    assert not run.running
    assert [(step.state, (step.error or {}).get("code")) for step in run.steps] == [
        ("failed", "ASK_ABORTED"),
        ("failed", "ASK_ABORTED"),
        ("failed", "ASK_ABORTED"),
        ("failed", "ASK_ABORTED"),  # the tool approval
    ]
    message = sandbox.workspace.message(DEFAULT_CHANNEL, plan["ts"])
    assert "Interrupted: the bot shut down" in json.dumps(message.blocks)


# --- refusals --------------------------------------------------------------------------


async def test_the_page_endpoints_refuse_bad_requests(page: Page) -> None:
    await page.post("sandbox/post", {"user": "alice", "channel": DEFAULT_CHANNEL, "text": "x"})
    (message,) = (await page.state())["messages"]
    click = {"user": "alice", "channel": DEFAULT_CHANNEL, "ts": message["ts"], "action_id": "a"}
    cases: list[tuple[str, Any, dict[str, str], int, str]] = [
        ("sandbox/action", "{not json", {}, 400, "invalid_json"),
        ("sandbox/action", "[1]", {}, 400, "invalid_json"),
        ("sandbox/action", click, {"Content-Type": "text/plain"}, 415, "json_required"),
        ("sandbox/action", click, {"Origin": "https://evil.example"}, 403, "cross_origin"),
        ("sandbox/action", {**click, "user": "zed"}, {}, 404, "user_not_found"),
        ("sandbox/action", {**click, "ts": "1.000001"}, {}, 404, "message_not_found"),
        (
            "sandbox/action",
            {k: v for k, v in click.items() if k != "ts"},
            {},
            400,
            "invalid_arguments",
        ),
        ("sandbox/action", click, {}, 404, "element_not_found"),
        ("sandbox/action", {**click, "values": "x"}, {}, 400, "invalid_arguments"),
        ("sandbox/action", {**click, "values": [["b", "a", 3]]}, {}, 400, "invalid_arguments"),
        ("sandbox/action", {**click, "values": [["b", "a"]]}, {}, 400, "invalid_arguments"),
        ("sandbox/submit", {"user": "alice", "view_id": "V404"}, {}, 404, "view_not_found"),
        ("sandbox/close", {"user": "alice"}, {}, 400, "invalid_arguments"),
        (
            "sandbox/post",
            {"user": "alice", "channel": "C404", "text": "x"},
            {},
            404,
            "channel_not_found",
        ),
        (
            "sandbox/post",
            {"user": "alice", "channel": DEFAULT_CHANNEL, "text": " "},
            {},
            400,
            "no_text",
        ),
        (
            "sandbox/post",
            {"user": "alice", "channel": DEFAULT_CHANNEL, "text": "x" * 4001},
            {},
            400,
            "msg_too_long",
        ),
    ]
    for path, body, headers, status, error in cases:
        got_status, got = await page.post(path, body, headers=headers)
        assert (got_status, got["error"]) == (status, error), (path, body, headers, got)
    same_origin = {"Origin": page.url.rstrip("/")}
    status, _ = await page.post(
        "sandbox/post",
        {"user": "alice", "channel": DEFAULT_CHANNEL, "text": "ok"},
        headers=same_origin,
    )
    assert status == 200


async def test_without_a_bot_the_page_says_so() -> None:
    async with (
        SandboxServer(signing_secret="s") as sandbox,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
    ):
        page = Page(sandbox.page_url, session)
        state = await page.state()
        assert state["connected"] is False and state["demo"] == {"available": False}
        status, body = await page.post("sandbox/demo", {})
        assert (status, body["error"]) == (409, "demo_unavailable")
        message = sandbox.workspace.post(
            sandbox.workspace.channels[DEFAULT_CHANNEL],
            blocks=[
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": "go",
                            "text": {"type": "plain_text", "text": "Go"},
                        }
                    ],
                }
            ],
        )
        status, body = await page.click(
            {"channel": DEFAULT_CHANNEL, "ts": message.ts, "blocks": message.blocks}, "Go"
        )
        assert (status, body["error"]) == (503, "no_app")
