"""The bot as a client of a dsh web host, end to end through real parts.

The host is ``MuxHost`` (its real wire protocol on 127.0.0.1); Slack is the sandbox's
``SlackStandIn``; between them run a real bolt ``AsyncApp`` served by aiohttp, the
``SlackQuestionProvider`` registered on a ``UserQuestionService``, and the ``DshHostClient``.
A person's clicks are signed ``block_actions`` / ``view_submission`` payloads delivered to the
app's ``/slack/events``. Every test checks what the host received, how many messages were
posted, and what the message finally shows.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dsh.asks import (
    ANSWERED_ELSEWHERE,
    CANCELLED_IN_HARNESS,
    DELIVERED_NOTE,
    GONE_NOTE,
    REOPENED_NOTE,
    RESTARTING_NOTE,
    SETTLED_ELSEWHERE,
)
from adapters.dsh.client import DshHostClient
from adapters.dsh.open_requests import QUEUED_NOTE
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.ids import key_request_id
from adapters.slack.model.record import TERMINAL_STATES, PendingRecord
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.sandbox import Message, SlackStandIn, clicks
from adapters.slack.stores import MemoryPendingStore, PendingStore
from bot.questions.errors import ASK_ABORTED, ASK_CANCELLED, UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.service import UserQuestionService
from tests.dsh_mux_host import MuxHost

T = TypeVar("T")

SECRET = "dsh-client-test-signing-secret"
BOT_TOKEN = "xoxb-test"
HOST_TOKEN = "dsh-token-7f3k2q"
TIMEOUT = 15.0

SESSION_A = "session-3f2a9c1e-5d7b-4e1a-9c2f-0b6d8e4a1c3f"
SESSION_B = "session-7c1d0e9b-2a4f-4b8e-8d1c-5e9f3a7b2c6d"
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

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        """As the in-memory store, but a finished request never becomes pending again."""
        stored = await self.get(record.id)
        if stored is not None and stored.state in TERMINAL_STATES and record.state == "pending":
            return False
        return await super().compare_and_set(record, event)


STORES = [pytest.param(MemoryPendingStore, id="memory-store")]


def envelope(rpc_id: str, *answers: dict[str, Any]) -> dict[str, Any]:
    """The answer the host must take, written out in full."""
    return {"eventId": rpc_id, "outcome": {"kind": "result", "value": {"answers": list(answers)}}}


def cancelled(rpc_id: str) -> dict[str, Any]:
    """The dismissal the host must take, written out in full."""
    error = {
        "name": "UserQuestionError",
        "message": "the user cancelled ask_user_question",
        "code": "ASK_CANCELLED",
    }
    return {"eventId": rpc_id, "outcome": {"kind": "rejected", "error": error}}


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

    host: MuxHost
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
        *,
        host_up: bool = True,
        token: str | None = None,
        store: PendingStore | None = None,
        after: Rig | None = None,
        **client_options: Any,
    ) -> Rig:
        """``after``: a bot started after ``after``'s, on the same Slack and the same host."""
        closers: list[Callable[[], Awaitable[None]]] = []
        if after is None:
            slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SECRET)
            await slack.start()
            closers.append(slack.stop)
            alice = slack.workspace.add_user("alice").id
            channel = slack.workspace.add_channel("agent-questions").id
        else:
            slack, alice, channel = after.slack, after.alice, after.channel

        app = AsyncApp(
            client=AsyncWebClient(token=BOT_TOKEN, base_url=slack.url),
            signing_secret=SECRET,
            process_before_response=True,
        )
        # The stand-in enforces no limits here: unpaced, as a client paced already would be.
        provider = SlackQuestionProvider(app, channel=channel, store=store, paced=False)
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

        if after is None:
            host = MuxHost(token=token)
            await host.start()
            closers.append(host.stop)
            if not host_up:
                await host.stop()
        else:
            host = after.host

        options = {"backoff_initial": 0.05, "backoff_max": 0.2, "replay_window": 1.0}
        client = DshHostClient(
            host.base_url,
            service,
            provider=provider,
            token=token,
            heartbeat=None,
            **(options | client_options),
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
        assert rig.client.status() == {
            "dsh": "connected",
            "dshProtocol": "0.2",
            "dshQuestions": 1,
            "dshApprovals": 0,
        }

        await rig.click(message, "Docs")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Docs"]})]
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
            envelope(rpc_id, {"id": "plan-review", "selected": ["Approve"]})
        ]
        text = await rig.final(message)
        assert "Approved by" in text and LABEL_A in text
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
        assert rig.host.responses == [envelope(rpc_id, feedback)]
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
            envelope(rpc_b, {"id": "plan-review", "selected": ["Approve"]}),
            envelope(rpc_a, {"id": "target", "selected": ["Code"]}),
        ]
        text_a, text_b = await rig.final(message_a), await rig.final(message_b)
        assert LABEL_A in text_a and LABEL_B not in text_a and "Code" in text_a
        assert LABEL_B in text_b and LABEL_A not in text_b and "Approve" in text_b
        assert rig.posts == 2


# --------------------------------------------------------------------------- answers not used


async def test_an_answer_beaten_by_another_client_says_it_was_settled_elsewhere(
    rig: Rig,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, _ = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        first = AskUserQuestionAnswer.model_validate(
            {"answers": [{"id": "target", "selected": ["Code"]}]}
        )
        rig.host.before_result = lambda event_id: rig.host.resolve_elsewhere(event_id, first)

        await rig.click(message, "Docs")

        await eventually(lambda: SETTLED_ELSEWHERE in shown(message.blocks), "the note")
        assert not interactive(message)
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Docs"]})]
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
            envelope(rpc_id, {"id": "builds", "selected": ["nightly", "release"]})
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
        rpc_id, future = rig.host.ask(SESSION_A, [BUILDS])
        message = await rig.message()

        # Both "nightly" boxes: not sent, and the finished message cannot take another answer.
        await rig.click(message, "Submit", values={"aq1.draft": ["0", "1"]})

        await eventually(lambda: "could not be reopened" in shown(message.blocks), "the note")
        await eventually(lambda: rig.client.in_flight == 0, "the ask to stop")
        assert "selects 'nightly' more than once" in shown(message.blocks)
        assert rig.host.responses == []
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


@pytest.mark.slow
async def test_a_reconnect_replays_the_pending_question_without_a_second_message(
    rig: Rig,
) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        await rig.host.stop()
        await eventually(lambda: rig.client.state == "disconnected", "the client to notice")
        await rig.host.start(port=rig.host.port, after_outage=True)
        await rig.host.wait_for_connections(1)
        assert rig.host.total_connections == 2
        await eventually(lambda: rig.client.state == "connected", "the client to reconnect")
        await asyncio.sleep(1.2)  # past the replay window: the replayed frame was handled

        assert rig.posts == 1
        assert interactive(message)
        await rig.click(message, "Docs")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Docs"]})]
        assert "Answered" in await rig.final(message)
        assert rig.posts == 1


@pytest.mark.slow
async def test_the_host_down_at_start_and_unreachable_mid_run(
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

        # The host is out of reach (an outage); the person answers meanwhile; it is back.
        await rig.host.stop()
        await eventually(lambda: rig.client.state == "disconnected", "the client to notice")
        await rig.click(message, "Code")
        await asyncio.sleep(0.5)  # the answer waits for the host
        assert not future.done()
        await rig.host.start(port=rig.host.port, after_outage=True)

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Code"]})]
        await eventually(lambda: rig.client.state == "connected", "the client to reconnect")
        await rig.final(message)
        text = await eventually(
            lambda: DELIVERED_NOTE in shown(message.blocks) and shown(message.blocks), "delivered"
        )
        assert "Answered" in text and "Code" in text and LABEL_A in text
        assert rig.posts == 1
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")

    logged = [r.getMessage() for r in caplog.records if r.name == "adapters.dsh"]
    assert logged.count("dsh host: connecting") == 1
    assert logged.count("dsh host: cannot connect; retrying with backoff") == 1
    assert logged.count("dsh host: connected") == 1
    assert logged.count("dsh host: disconnected; reconnecting with backoff") == 1
    assert logged.count("dsh host: reconnected") == 1
    assert (
        logged.count("dsh host: could not send a response; retrying") == 0
    )  # no socket: none sent
    assert all(HOST_TOKEN not in repr(vars(record)) for record in caplog.records)


@pytest.mark.slow
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


async def test_stop_releases_the_open_questions_instead_of_ending_them(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        await rig.client.stop()
        await rig.provider.aclose(grace=5.0)  # the bot's own shutdown sweep leaves it alone

        await eventually(lambda: RESTARTING_NOTE in shown(message.blocks), "the note")
        assert interactive(message)
        record = await rig.provider.store.get(key_request_id(f"dsh:{rpc_id}"))
        assert record is not None and record.is_open and record.owner is None
        assert rig.client.status() == {
            "dsh": "disconnected",
            "dshProtocol": "0.2",
            "dshQuestions": 0,
            "dshApprovals": 0,
        }
        assert rig.host.responses == [] and rig.host.is_pending(rpc_id) and not future.done()
        rig.host.abort(rpc_id)


async def test_malformed_and_other_frames_are_skipped(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        bad = {
            "type": "waterfall",
            "event": "user-questions/request",
            "eventId": "e-empty",
            "agentId": SESSION_B,
            "request": {"questions": []},
        }
        # Frames the real host never sends; an emit (a push of another kind) is no error.
        emit = {"type": "emit", "event": "api-session/updated", "args": {}}
        for value in (bad, None, emit):
            await rig.host.push_raw(json.dumps({"type": "item", "streamId": "ev", "value": value}))
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])  # tool/call frames come too
        message = await rig.message()
        await rig.click(message, "Code")

        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Code"]})]
        assert rig.posts == 1
    skipped = [r for r in caplog.records if r.getMessage() == "dsh host: skipped a malformed frame"]
    assert len(skipped) == 1 and rig.client.skips.counts["malformed_frame"] == 2  # throttled


# --------------------------------------------------------------------------- as the real host does


def closed_renders(rig: Rig) -> list[str]:
    """The text of every chat.update that showed a question message without its buttons."""
    return [
        shown(call.params.get("blocks") or [])
        for call in rig.slack.calls("chat.update")
        if not any(b.get("type") in ("actions", "input") for b in call.params.get("blocks") or [])
    ]


async def test_the_label_is_the_uuid_part_of_a_session_id(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        text = shown(message.blocks)
        assert "session 3f2a9c1e" in text
        assert "session session-" not in text and "session-" not in message.text


@pytest.mark.slow
async def test_a_question_pending_across_five_dropped_connections_is_never_closed(
    rig: Rig,
) -> None:
    async with asyncio.timeout(TIMEOUT * 2):
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        for n in range(2, 7):
            await rig.host.drop()
            await rig.host.wait_for_total_connections(n)
            await eventually(lambda: rig.client.state == "connected", "the client to reconnect")
        await asyncio.sleep(1.3)  # past the last replay window
        assert rig.host.total_connections == 6
        assert interactive(message)
        assert closed_renders(rig) == []
        assert REOPENED_NOTE not in shown(message.blocks)

        await rig.click(message, "Docs")
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Docs"]})]
        assert "Answered" in await rig.final(message)
        assert rig.posts == 1


async def test_an_over_nested_frame_is_skipped_and_the_connection_kept(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        nested: Any = {}
        for _ in range(200):
            nested = {"a": nested}
        deep = {"type": "item", "streamId": f"log:{SESSION_A}", "value": nested}
        await rig.host.push_raw(json.dumps(deep))
        await rig.host.push_raw("[" * 100_000 + "]" * 100_000)  # deeper than Python's recursion
        _rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.click(message, "Code")
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.total_connections == 1
        assert rig.client.state == "connected"
    skipped = [r for r in caplog.records if r.getMessage() == "dsh host: skipped a malformed frame"]
    assert len(skipped) == 1 and rig.client.skips.counts["malformed_frame"] == 2  # throttled
    assert all("nested" in r.__dict__["error"] for r in skipped)


async def test_a_flood_of_malformed_frames_logs_one_line_a_minute(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38, item 8: each malformed frame logged a WARNING, unthrottled."""
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        for n in range(500):
            await rig.host.push_raw(json.dumps({"type": "item", "streamId": "ev", "n": n}))
        _, future = rig.host.ask(SESSION_A, [TARGET])
        await rig.click(await rig.message(), "Code")
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
    skipped = [r for r in caplog.records if r.getMessage() == "dsh host: skipped a malformed frame"]
    assert len(skipped) == 1 and rig.client.skips.counts["malformed_frame"] == 500


async def test_a_message_over_the_size_limit_is_skipped_with_a_log_line(
    make_rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(max_frame_bytes=64 * 1024)
        await rig.host.wait_for_connections(1)
        huge = AskUserQuestionItem.model_validate(
            {"id": "huge", "question": "Read this?", "detail": "x" * 100_000}
        )
        big_rpc, _ = rig.host.ask(SESSION_B, [huge])
        _rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        await rig.click(message, "Code")
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        assert rig.host.total_connections == 1 and rig.posts == 1
    over = [
        r
        for r in caplog.records
        if r.getMessage() == "dsh host: skipped a downlink message over the size limit"
        and r.__dict__["method"] == "user-questions/request"
    ]
    assert len(over) == 1  # (its tool/call event, which holds the same text, is skipped too)
    assert over[0].__dict__["rpc_id"] == big_rpc
    assert over[0].__dict__["limit"] == 64 * 1024 and over[0].__dict__["bytes"] > 100_000


def numbered(n: int) -> AskUserQuestionItem:
    """A one-choice question whose text says which one it is."""
    return AskUserQuestionItem.model_validate(
        {"id": "target", "question": f"Question number {n}?", "options": [{"label": "Docs"}]}
    )


@pytest.mark.slow
async def test_five_hundred_questions_from_one_session_are_capped_and_queued(
    make_rig: RigFactory,
) -> None:
    async with asyncio.timeout(TIMEOUT * 4):
        rig = await make_rig()
        await rig.host.wait_for_connections(1)
        asked = [rig.host.ask(SESSION_A, [numbered(n)]) for n in range(500)]
        await eventually(lambda: rig.posts == 20, "20 messages", within=20)
        await asyncio.sleep(0.3)
        assert rig.posts == 20
        assert rig.client.status()["dshQuestions"] == 500 and rig.client.queued == 480
        # The first 20 the host sent are the ones posted.
        posted = {
            shown(m.blocks).split("Question number ")[1].split("?")[0] for m in rig.questions()
        }
        assert posted == {str(n) for n in range(20)}
        note = QUEUED_NOTE.format(limit=20)
        await eventually(lambda: any(note in shown(m.blocks) for m in rig.questions()), "the note")

        def message(n: int) -> Message | None:
            mine = [m for m in rig.questions() if f"Question number {n}?" in shown(m.blocks)]
            return mine[0] if mine else None

        first = message(0)
        assert first is not None
        await rig.click(first, "Docs")
        assert await answer_of(asked[0][1]) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
        # In order: the 21st question of the host is the one posted next.
        twenty_first = await eventually(lambda: message(20), "question 20", within=20)
        assert rig.posts == 21
        assert rig.host.abort(asked[20][0])
        await eventually(lambda: not interactive(twenty_first), "question 20 to close", within=20)
        await eventually(lambda: message(21), "question 21", within=20)
        assert rig.client.queued == 478
        # One still waiting is withdrawn by the host: it is never posted.
        assert rig.host.abort(asked[499][0])
        await eventually(lambda: rig.client.queued == 477, "the queue to shrink")
        assert sum(interactive(m) for m in rig.questions()) == 20
        for rpc_id, _ in reversed(asked):
            rig.host.abort(rpc_id)
        await eventually(lambda: rig.client.in_flight == 0, "every request to end", within=30)
        assert rig.posts == 22 and message(499) is None


async def test_answered_elsewhere_notification_text_agrees_with_the_body(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT):
        rpc_id, _ = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()
        elsewhere = AskUserQuestionAnswer.model_validate(
            {"answers": [{"id": "target", "selected": ["Code"]}]}
        )
        rig.host.resolve_elsewhere(rpc_id, elsewhere)
        await rig.final(message)
        assert message.text.startswith("Answered in another client")
        assert "Cancelled" not in message.text


async def test_info_log_lines_for_posting_answers_and_dismissals(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.dsh")
    async with asyncio.timeout(TIMEOUT):
        first, answered = rig.host.ask(SESSION_A, [TARGET])
        await rig.click(await rig.message(), "Code")
        await answer_of(answered)
        second, dismissed = rig.host.ask(SESSION_A, [TARGET])
        await rig.click(await rig.message(2), "Dismiss")
        assert await failure_of(dismissed) == ASK_CANCELLED
        await eventually(lambda: rig.client.in_flight == 0, "both to end")
    lines = [
        (r.getMessage(), r.__dict__.get("rpc_id"))
        for r in caplog.records
        if r.name == "adapters.dsh" and r.levelno == logging.INFO
    ]
    assert ("dsh host: request posted in Slack", first) in lines
    assert ("dsh host: answer accepted", first) in lines
    assert ("dsh host: request posted in Slack", second) in lines
    assert ("dsh host: dismissal accepted", second) in lines


@pytest.mark.slow
async def test_a_3_mb_plan_is_posted_once_with_the_whole_plan_as_one_file(rig: Rig) -> None:
    async with asyncio.timeout(TIMEOUT * 2):
        step = "1. Backfill the <orders> table in batches & check the counts.\n"
        detail = "# Plan\n\n" + step * (3_000_000 // len(step))
        big = PLAN.model_copy(update={"detail": detail})
        rpc_id, future = rig.host.ask(SESSION_A, [big])
        message = await rig.message()
        assert "in the thread below" in shown(message.blocks)

        def uploads() -> list[Any]:
            history = rig.slack.workspace.history(rig.channel)
            return [m for m in history if m.thread_ts == message.ts and m.files]

        shared = await eventually(uploads, "the plan as a file in the thread")
        assert len(shared) == 1 and len(shared[0].files) == 1
        (file_id,) = [f["id"] for f in shared[0].files]
        assert rig.slack.workspace.files[file_id].content == detail.encode("utf-8")
        replies = [m for m in rig.slack.workspace.history(rig.channel) if m.thread_ts]
        assert len(replies) == 1  # no continuation posts: the file carries it all

        await rig.click(message, "Approve")
        assert await answer_of(future) == {
            "answers": [{"id": "plan-review", "selected": ["Approve"]}]
        }
        assert rig.host.responses == [
            envelope(rpc_id, {"id": "plan-review", "selected": ["Approve"]})
        ]
        assert rig.posts == 1


async def test_new_session_ids_for_each_request_do_not_bypass_the_hosts_cap(
    make_rig: RigFactory,
) -> None:
    """Issue 38, item 7: 300 sessions made 300 Slack posts past the per-session cap; the
    host as a whole has a cap too, and a freed place goes to the next session waiting."""
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(max_open_per_host=5)
        await rig.host.wait_for_connections(1)
        asked = [rig.host.ask(f"session-{n:04d}-flood", [TARGET]) for n in range(30)]
        first = await rig.message()
        await rig.message(5)
        await asyncio.sleep(0.5)
        assert rig.posts == 5
        await rig.click(first, "Code")
        assert await answer_of(asked[0][1]) == {"answers": [{"id": "target", "selected": ["Code"]}]}
        await rig.message(6)  # the place freed went to the next session waiting
        await asyncio.sleep(0.3)
        assert rig.posts == 6
