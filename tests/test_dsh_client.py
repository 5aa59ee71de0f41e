"""The bot as a client of a dsh web host, end to end through real parts.

The host is ``DshHostStandIn`` (its real wire protocol on 127.0.0.1); Slack is the sandbox's
``SlackStandIn``; between them run a real bolt ``AsyncApp`` served by aiohttp, the
``SlackQuestionProvider`` registered on a ``UserQuestionService``, and the ``DshHostClient``.
A person's clicks are signed ``block_actions`` / ``view_submission`` payloads delivered to the
app's ``/slack/events``. Every test checks what the host received, how many messages were
posted, and what the message finally shows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dsh.client import (
    ANSWERED_ELSEWHERE,
    CANCELLED_IN_HARNESS,
    DISCONNECTED_NOTE,
    GONE_NOTE,
    SETTLED_ELSEWHERE,
    DshHostClient,
)
from adapters.slack.pending import MemoryPendingStore, PendingStore
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.record import TERMINAL_STATES, PendingRecord
from adapters.slack.sandbox import Message, SlackStandIn, clicks
from bot.questions.errors import ASK_ABORTED, ASK_CANCELLED, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.service import UserQuestionService
from tests.dsh_host import DshHostStandIn

T = TypeVar("T")

SECRET = "dsh-client-test-signing-secret"
BOT_TOKEN = "xoxb-test"
HOST_TOKEN = "dsh-token-7f3k2q"
TIMEOUT = 15.0

SESSION_A = "3f2a9c1e-5d7b-4e1a-9c2f-0b6d8e4a1c3f"
SESSION_B = "7c1d0e9b-2a4f-4b8e-8d1c-5e9f3a7b2c6d"
LABEL_A = "session 3f2a9c1e"
LABEL_B = "session 7c1d0e9b"

TARGET = AskUserQuestionItem.model_validate(
    {
        "id": "target",
        "question": "Which one ships first?",
        "options": [{"label": "Code"}, {"label": "Docs"}],
    }
)
PLAN = AskUserQuestionItem.model_validate(
    {
        "id": "plan-review",
        "question": "Approve this plan and leave plan mode?",
        "header": "Plan review",
        "detail": "# Plan\n\n1. Add the column.\n2. Backfill it.\n3. Ship.",
        "options": [
            {"label": "Approve", "description": "Leave plan mode and start."},
            {"label": "Keep planning", "description": "Stay in plan mode."},
        ],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }
)
BUILDS = AskUserQuestionItem.model_validate(
    {
        "id": "builds",
        "question": "Which builds should run?",
        "options": [{"label": "nightly"}, {"label": "nightly"}, {"label": "release"}],
        "multiSelect": True,
    }
)


class FinalStore(MemoryPendingStore):
    """The in-memory store, refusing outright to reopen a finished request."""

    async def compare_and_set(self, record: PendingRecord) -> bool:
        """As the in-memory store, but a finished request never becomes pending again."""
        stored = await self.get(record.id)
        if stored is not None and stored.state in TERMINAL_STATES and record.state == "pending":
            return False
        return await super().compare_and_set(record)


STORES = [pytest.param(MemoryPendingStore, id="memory-store")]


def envelope(rpc_id: str, session_id: str, *answers: dict[str, Any]) -> dict[str, Any]:
    """The ok client-response the host must receive, written out in full."""
    return {
        "type": "client-response",
        "rpcId": rpc_id,
        "result": {
            "ok": True,
            "value": {"sessionId": session_id, "answer": {"answers": list(answers)}},
        },
    }


def cancelled(rpc_id: str) -> dict[str, Any]:
    """The cancelled client-response, written out in full."""
    return {
        "type": "client-response",
        "rpcId": rpc_id,
        "result": {
            "ok": False,
            "error": {
                "code": "cancelled",
                "message": "the user closed this question request",
                "details": {},
            },
        },
    }


def shown(value: Any) -> str:
    """Every piece of text in blocks, joined: what a person reads."""
    if isinstance(value, dict):
        return "\n".join(shown(v) for k, v in value.items() if k not in ("block_id", "action_id"))
    if isinstance(value, list):
        return "\n".join(shown(v) for v in value)
    return value if isinstance(value, str) else ""


def interactive(message: Message) -> bool:
    """Whether the message still has buttons or inputs."""
    return any(block.get("type") in ("actions", "input") for block in message.blocks)


async def eventually(check: Callable[[], T | None], what: str, within: float = 5.0) -> T:
    """Poll ``check`` until it returns something truthy, and return that."""
    try:
        async with asyncio.timeout(within):
            while True:
                if result := check():
                    return result
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


@dataclass
class Rig:
    """Everything between the host and the person, wired as the bot wires it."""

    host: DshHostStandIn
    slack: SlackStandIn
    service: UserQuestionService
    provider: SlackQuestionProvider
    client: DshHostClient
    channel: str
    alice: str
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @property
    def posts(self) -> int:
        """How many ``chat.postMessage`` calls Slack received."""
        return len(self.slack.calls("chat.postMessage"))

    def questions(self) -> list[Message]:
        """The question messages in the channel, oldest first."""
        history = self.slack.workspace.history(self.channel)
        return [m for m in history if m.thread_ts is None and m.bot_id is not None]

    async def message(self, n: int = 1) -> Message:
        """The ``n``-th question message, once it is posted."""
        found = await eventually(lambda: len(self.questions()) >= n, f"{n} question message(s)")
        assert found
        return self.questions()[n - 1]

    async def message_of(self, label: str) -> Message:
        """The question message that shows ``label``."""

        def find() -> Message | None:
            mine = [m for m in self.questions() if label in shown(m.blocks)]
            return mine[0] if len(mine) == 1 else None

        return await eventually(find, f"the message of {label}")

    async def click(self, message: Message, text: str, values: clicks.Values | None = None) -> None:
        """Alice clicks the button shown as ``text`` (``values``: her choices in the form)."""
        payload = self.slack.click(message, user=self.alice, text=text, values=values)
        status, body = await self.slack.deliver(payload)
        assert status == 200, body

    async def submit_modal(self, text: str) -> None:
        """Alice types ``text`` into the modal the app opened for her and submits it."""
        stack = await eventually(
            lambda: self.slack.workspace.stacks.get(self.alice), "the modal to open"
        )
        payload = self.slack.submission(stack[-1], values={"aq1.text": text})
        status, body = await self.slack.deliver(payload)
        assert status == 200, body

    async def final(self, message: Message) -> str:
        """The message once it has no buttons left: its text."""
        await eventually(lambda: not interactive(message), "the message to lose its buttons")
        return shown(message.blocks)

    async def reopened(self, message: Message, note: str) -> str:
        """The message once it is open again and shows ``note``."""
        await eventually(
            lambda: interactive(message) and note in shown(message.blocks),
            f"the message to reopen with {note!r}",
        )
        return shown(message.blocks)

    async def aclose(self) -> None:
        """Stop everything, the client first (as the bot does)."""
        for close in reversed(self.closers):
            await close()


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def make_rig() -> AsyncIterator[RigFactory]:
    """Builds rigs; ``host_up=False`` leaves the host down (its port reserved)."""
    rigs: list[Rig] = []

    async def build(
        *, host_up: bool = True, token: str | None = None, store: PendingStore | None = None
    ) -> Rig:
        closers: list[Callable[[], Awaitable[None]]] = []
        slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SECRET)
        await slack.start()
        closers.append(slack.stop)
        alice = slack.workspace.add_user("alice").id
        channel = slack.workspace.add_channel("agent-questions").id

        app = AsyncApp(
            client=AsyncWebClient(token=BOT_TOKEN, base_url=slack.url),
            signing_secret=SECRET,
            process_before_response=True,
        )
        provider = SlackQuestionProvider(app, channel=channel, store=store)
        service = UserQuestionService()
        dispose = service.register_provider(provider)

        async def events(request: web.Request) -> web.StreamResponse:
            return await to_aiohttp_response(
                await app.async_dispatch(await to_bolt_request(request))
            )

        web_app = web.Application()
        web_app.router.add_post("/slack/events", events)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        closers.append(runner.cleanup)
        slack.interactivity_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"

        async def close_provider() -> None:
            await provider.aclose(grace=2.0)
            dispose()

        closers.append(close_provider)

        host = DshHostStandIn(token=token)
        await host.start()
        closers.append(host.stop)
        if not host_up:
            await host.stop()

        client = DshHostClient(
            host.base_url,
            service,
            provider=provider,
            token=token,
            backoff_initial=0.05,
            backoff_max=0.2,
            respond_retry_for=10.0,
            replay_window=1.0,
            heartbeat=None,
        )
        await client.start()
        closers.append(client.stop)
        rig = Rig(host, slack, service, provider, client, channel, alice, closers)
        rigs.append(rig)
        return rig

    yield build
    for rig in rigs:
        await rig.aclose()
        assert rig.client.in_flight == 0
        assert rig.provider.pending_count == 0


@pytest.fixture
async def rig(make_rig: RigFactory) -> Rig:
    """A rig with the host up and connected."""
    built = await make_rig()
    await built.host.wait_for_connections(1)
    return built


async def answer_of(future: asyncio.Future[AskUserQuestionAnswer]) -> dict[str, Any]:
    """The agent's answer, as wire JSON."""
    return (await asyncio.wait_for(future, 5)).to_wire()


async def failure_of(future: asyncio.Future[AskUserQuestionAnswer]) -> str:
    """The code the agent's ask failed with."""
    with pytest.raises(UserQuestionError) as caught:
        await asyncio.wait_for(future, 5)
    return caught.value.code


# --------------------------------------------------------------------------- answering


async def test_a_question_answered_in_slack_reaches_the_host_in_the_exact_envelope(
    rig: Rig,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        assert LABEL_A in shown(message.blocks)
        assert rig.client.status() == {"dsh": "connected", "dshQuestions": 1}

        await rig.click(message, "Docs")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Docs"]})
        ]
        text = await rig.final(message)
        assert "Answered" in text and "Docs" in text and LABEL_A in text
        assert rig.posts == 1
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")


async def test_a_plan_review_approved_in_slack(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [PLAN])
        message = await rig.message()
        assert "Add the column" in shown(message.blocks)

        await rig.click(message, "Approve")

        assert await answer_of(future) == {
            "answers": [{"id": "plan-review", "selected": ["Approve"]}]
        }
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "plan-review", "selected": ["Approve"]})
        ]
        text = await rig.final(message)
        assert "Answered" in text and "Approve" in text and LABEL_A in text
        assert rig.posts == 1


async def test_a_plan_review_declined_with_feedback(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [PLAN])
        message = await rig.message()

        await rig.click(message, "Decline with feedback…")
        await rig.submit_modal("Backfill in batches of 10k rows first.")

        feedback = {
            "id": "plan-review",
            "selected": [],
            "custom": "Backfill in batches of 10k rows first.",
        }
        assert await answer_of(future) == {"answers": [feedback]}
        assert rig.host.responses == [envelope(rpc_id, SESSION_A, feedback)]
        text = await rig.final(message)
        assert "Backfill in batches" in text and LABEL_A in text
        assert rig.posts == 1


async def test_dismissing_in_slack_sends_the_cancelled_envelope(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        await rig.click(message, "Dismiss")

        assert await failure_of(future) == ASK_CANCELLED
        assert rig.host.responses == [cancelled(rpc_id)]
        text = await rig.final(message)
        assert "Dismissed" in text and LABEL_A in text
        assert rig.posts == 1


async def test_two_sessions_asking_at_once(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_a, future_a = rig.host.ask(SESSION_A, [TARGET])
        rpc_b, future_b = rig.host.ask(SESSION_B, [PLAN])
        message_a = await rig.message_of(LABEL_A)
        message_b = await rig.message_of(LABEL_B)
        assert message_a is not message_b
        assert rig.client.status()["dshQuestions"] == 2

        await rig.click(message_b, "Approve")
        assert await answer_of(future_b) == {
            "answers": [{"id": "plan-review", "selected": ["Approve"]}]
        }
        assert not future_a.done()
        await rig.click(message_a, "Code")
        assert await answer_of(future_a) == {"answers": [{"id": "target", "selected": ["Code"]}]}

        assert rig.host.responses == [
            envelope(rpc_b, SESSION_B, {"id": "plan-review", "selected": ["Approve"]}),
            envelope(rpc_a, SESSION_A, {"id": "target", "selected": ["Code"]}),
        ]
        text_a, text_b = await rig.final(message_a), await rig.final(message_b)
        assert LABEL_A in text_a and LABEL_B not in text_a and "Code" in text_a
        assert LABEL_B in text_b and LABEL_A not in text_b and "Approve" in text_b
        assert rig.posts == 2


# --------------------------------------------------------------------------- receipts


@pytest.mark.parametrize("store", STORES)
async def test_a_bad_response_receipt_reopens_the_question_with_the_reason(
    make_rig: RigFactory, store: type[MemoryPendingStore]
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(store=store())
        await rig.host.wait_for_connections(1)
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        rig.host.force_receipt("bad-response")

        await rig.click(message, "Code")
        text = await rig.reopened(message, "The harness refused that answer")
        assert "Please answer again" in text and LABEL_A in text
        assert rig.host.is_pending(rpc_id) and not future.done()

        await rig.click(message, "Docs")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Code"]}),
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Docs"]}),
        ]
        text = await rig.final(message)
        assert "Answered" in text and "Docs" in text
        assert "refused" not in text
        assert rig.posts == 1


async def test_a_not_pending_receipt_says_the_question_was_settled_elsewhere(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, _ = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        rig.host.force_receipt("not-pending")

        await rig.click(message, "Docs")

        await eventually(lambda: SETTLED_ELSEWHERE in shown(message.blocks), "the note")
        assert not interactive(message)
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Docs"]})
        ]
        assert rig.posts == 1


@pytest.mark.parametrize("store", STORES)
async def test_an_answer_the_host_would_refuse_is_not_sent(
    make_rig: RigFactory, store: type[MemoryPendingStore]
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(store=store())
        await rig.host.wait_for_connections(1)
        rpc_id, future = rig.host.ask(SESSION_A, [BUILDS])
        message = await rig.message()

        # Both "nightly" boxes: the same label twice, which the host's rules refuse.
        await rig.click(message, "Submit", values={"aq1.draft": ["0", "1"]})
        text = await rig.reopened(message, "selects 'nightly' more than once")
        assert rig.host.responses == []

        await rig.click(message, "Submit", values={"aq1.draft": ["0", "2"]})

        assert await answer_of(future) == {
            "answers": [{"id": "builds", "selected": ["nightly", "release"]}]
        }
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "builds", "selected": ["nightly", "release"]})
        ]
        text = await rig.final(message)
        assert "Answered" in text and LABEL_A in text
        assert rig.posts == 1


async def test_a_message_that_cannot_be_reopened_is_not_answered_twice(
    make_rig: RigFactory,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(store=FinalStore())
        await rig.host.wait_for_connections(1)
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        rig.host.force_receipt("bad-response")

        await rig.click(message, "Code")

        await eventually(lambda: "could not be reopened" in shown(message.blocks), "the note")
        await eventually(lambda: rig.client.in_flight == 0, "the ask to stop")
        assert "The harness refused that answer" in shown(message.blocks)
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Code"]})
        ]
        assert rig.host.is_pending(rpc_id) and not future.done()
        assert rig.posts == 1


# --------------------------------------------------------------------------- settled elsewhere


async def test_a_question_answered_in_another_client_closes_the_message(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        elsewhere = AskUserQuestionAnswer.model_validate(
            {"answers": [{"id": "target", "selected": ["Code"]}]}
        )
        assert rig.host.resolve_elsewhere(rpc_id, elsewhere)

        text = await rig.final(message)
        assert ANSWERED_ELSEWHERE in text and LABEL_A in text
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        await eventually(lambda: rig.client.in_flight == 0, "the ask to end")
        assert rig.host.responses == []
        assert rig.posts == 1


async def test_an_aborted_turn_closes_the_message(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [PLAN])
        message = await rig.message()

        assert rig.host.abort(rpc_id)

        assert await failure_of(future) == ASK_ABORTED
        text = await rig.final(message)
        assert CANCELLED_IN_HARNESS in text and LABEL_A in text
        await eventually(lambda: rig.client.in_flight == 0, "the ask to end")
        assert rig.host.responses == []
        assert rig.posts == 1


# --------------------------------------------------------------------------- connection


async def test_a_reconnect_replays_the_pending_question_without_a_second_message(
    rig: Rig,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        await rig.host.stop()
        await eventually(lambda: rig.client.state == "disconnected", "the client to notice")
        await rig.host.start(port=rig.host.port, keep_state=True)
        await rig.host.wait_for_connections(1)
        assert rig.host.total_connections == 2
        await eventually(lambda: rig.client.state == "connected", "the client to reconnect")
        await asyncio.sleep(1.2)  # past the replay window: the replayed frame was handled

        assert rig.posts == 1
        assert interactive(message)
        await rig.click(message, "Docs")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Docs"]})
        ]
        assert "Answered" in await rig.final(message)
        assert rig.posts == 1


async def test_the_host_down_at_start_and_restarted_mid_run(
    make_rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(host_up=False, token=HOST_TOKEN)
        assert rig.client.status()["dsh"] in ("connecting", "disconnected")
        await eventually(lambda: rig.client.state == "disconnected", "a failed first attempt")
        await asyncio.sleep(0.5)  # several retries, logged once

        await rig.host.start(port=rig.host.port)
        await rig.host.wait_for_connections(1)
        await eventually(lambda: rig.client.state == "connected", "the client to connect")
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        # The host goes away; the person answers meanwhile; the host comes back.
        await rig.host.stop()
        await eventually(lambda: rig.client.state == "disconnected", "the client to notice")
        await rig.click(message, "Code")
        await asyncio.sleep(0.5)  # the answer waits for the host
        assert not future.done()
        await rig.host.start(port=rig.host.port, keep_state=True)

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Code"]})
        ]
        await eventually(lambda: rig.client.state == "connected", "the client to reconnect")
        text = await rig.final(message)
        assert "Answered" in text and "Code" in text and LABEL_A in text
        assert rig.posts == 1
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")

    logged = [r.getMessage() for r in caplog.records if r.name == "adapters.dsh"]
    assert logged.count("dsh host: connecting") == 1
    assert logged.count("dsh host: cannot connect; retrying with backoff") == 1
    assert logged.count("dsh host: connected") == 1
    assert logged.count("dsh host: disconnected; reconnecting with backoff") == 1
    assert logged.count("dsh host: reconnected") == 1
    assert logged.count("dsh host: could not send a response; retrying") == 1
    assert all(HOST_TOKEN not in repr(vars(record)) for record in caplog.records)


async def test_a_question_gone_after_a_host_restart_is_closed(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        _, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        await rig.host.stop()
        await eventually(lambda: rig.client.state == "disconnected", "the client to notice")
        await rig.host.start(port=rig.host.port)  # a fresh host: the question is gone
        assert await failure_of(future) == ASK_ABORTED

        text = await rig.final(message)
        assert GONE_NOTE in text and LABEL_A in text
        assert rig.host.responses == []
        assert rig.posts == 1


async def test_stop_ends_the_open_questions(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        await rig.client.stop()

        text = await rig.final(message)
        assert DISCONNECTED_NOTE in text
        assert rig.client.status() == {"dsh": "disconnected", "dshQuestions": 0}
        assert rig.host.responses == []


async def test_malformed_and_other_frames_are_skipped(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        bad = {
            "type": "server-request",
            "rpcId": "r-empty",
            "method": "question/requested",
            "payload": {"type": "question/requested", "sessionId": SESSION_B, "questions": []},
        }
        # Frames the real host never sends, pushed through the stand-in's own broadcast.
        rig.host._broadcast(bad)
        rig.host._broadcast({"type": "server-request", "rpcId": "r-x", "method": "x/y"})
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])  # tool/call frames come too
        message = await rig.message()
        await rig.click(message, "Code")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.responses == [
            envelope(rpc_id, SESSION_A, {"id": "target", "selected": ["Code"]})
        ]
        assert rig.posts == 1
    skipped = [r for r in caplog.records if r.getMessage() == "dsh host: skipped a malformed frame"]
    assert len(skipped) == 2
