"""Every request of the host that this bot shows in Slack ends, replayed or not.

A stopping bot releases the host's open requests ("The bot is restarting…"), owned by no
process, for the next bot to adopt when the host replays them. If the host settled them or
restarted meanwhile (dsh-approvals.md §4-5: pending requests do not survive a restart;
``questions.jsonl``: rpcId 2bd021a2 is not replayed), no replay comes: once the next bot's
replay window is over it closes them as gone, so nobody answers a message whose answer can
never reach the host. A request the host does replay is kept, and a replay that comes just
after the window (its ask already being closed as gone) opens the request again.

End to end through real parts: the host stand-in, the Slack stand-in, a real bolt app and
signed clicks (the rigs of ``test_dsh_client``); the late replay is the stand-in holding a
new socket's replay back past the bot's window.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.dsh.asks import (
    ANSWERED_ELSEWHERE,
    APPROVAL_GONE_NOTE,
    GONE_NOTE,
    REOPENED_NOTE,
    RESTARTING_NOTE,
    ask_key,
)
from adapters.dsh.host import host_asker
from adapters.slack import Released, WaitReleased
from adapters.slack.model.ids import key_request_id
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import MemoryPendingStore
from bot.questions.abort import AbortController
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from tests.dsh import test_dsh_client as _rig_module
from tests.dsh.test_dsh_client import (
    SESSION_A,
    TARGET,
    TIMEOUT,
    RigFactory,
    envelope,
    eventually,
    interactive,
    shown,
)

make_rig = _rig_module.make_rig  # the fixtures of the client's end-to-end tests

ELSEWHERE = AskUserQuestionAnswer.model_validate(
    {"answers": [{"id": "target", "selected": ["Code"]}]}
)


class SlowReads(MemoryPendingStore):
    """The in-memory store, each read taking ``delay`` seconds (a loaded store, far away)."""

    def __init__(self) -> None:
        super().__init__()
        self.delay = 0.0

    async def get(self, request_id: str) -> PendingRecord | None:
        """As the in-memory store, ``delay`` seconds later."""
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().get(request_id)


async def record_of(store: MemoryPendingStore, rpc_id: str) -> PendingRecord:
    """The stored record of the host's request ``rpc_id``."""
    record = await store.get(key_request_id(ask_key(rpc_id)))
    assert record is not None
    return record


@pytest.mark.slow
async def test_a_released_question_the_host_settled_while_no_bot_ran_is_closed(
    make_rig: RigFactory,
) -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(TIMEOUT):
        first = await make_rig(store=store)
        await first.host.wait_for_connections(1)
        rpc_id, _ = first.host.ask(SESSION_A, [TARGET])
        message = await first.message()
        await first.client.stop()  # released: left open for the next bot
        await eventually(lambda: RESTARTING_NOTE in shown(message.blocks), "the note")
        assert first.host.resolve_elsewhere(rpc_id, ELSEWHERE)  # answered in the web UI

        second = await make_rig(after=first, store=store)
        await second.provider.resume()  # as bot/app/runtime.py does at start
        await first.host.wait_for_total_connections(2)

        text = await second.final(message)  # one replay window (1 s) on: nothing replayed
        assert GONE_NOTE in text and RESTARTING_NOTE not in text
        assert (await record_of(store, rpc_id)).state == "aborted"
        assert first.host.responses == [] and first.posts == 1


@pytest.mark.slow
async def test_released_requests_lost_in_a_host_restart_are_closed_and_take_no_click(
    make_rig: RigFactory,
) -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(TIMEOUT):
        first = await make_rig(store=store)
        await first.host.wait_for_connections(1)
        rpc_id, _ = first.host.ask(SESSION_A, [TARGET])
        message = await first.message()
        approval_rpc, _, _ = first.host.request_approval(SESSION_A, "bash", {"command": "ls"})
        approval = await first.message(2)
        stale = first.slack.click(message, user=first.alice, text="Docs")  # sent later
        await first.client.stop()
        await first.host.stop()
        await first.host.start(port=first.host.port)  # a restart: both requests are gone

        second = await make_rig(after=first, store=store)
        await second.provider.resume()
        await first.host.wait_for_total_connections(2)

        assert GONE_NOTE in await second.final(message)
        # An approval is called an approval (it said "no longer has this question").
        gone = await second.final(approval)
        assert APPROVAL_GONE_NOTE in gone and "question" not in gone.lower()
        assert (await record_of(store, rpc_id)).state == "aborted"
        assert (await record_of(store, approval_rpc)).state == "aborted"
        # A click from a stale view of the message, open before, is not taken as an answer.
        status, _ = await second.slack.deliver(stale)
        assert status == 200
        await asyncio.sleep(0.3)
        assert (await record_of(store, rpc_id)).state == "aborted"
        assert "Answered" not in shown(message.blocks)
        assert first.host.responses == []


@pytest.mark.slow
async def test_a_replayed_request_and_another_hosts_request_stay_open(
    make_rig: RigFactory,
) -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(TIMEOUT):
        first = await make_rig(store=store)
        await first.host.wait_for_connections(1)
        rpc_id, future = first.host.ask(SESSION_A, [TARGET])
        message = await first.message()
        # Another host's request, released by its own bot, in the same store and channel.
        controller = AbortController()
        other_options = AskOptions(
            key=ask_key("rpc-of-another-host"),
            label="session 0a1b2c3d",
            asked_by=host_asker("http://127.0.0.9:13080"),
        )
        other = asyncio.ensure_future(
            first.service.ask(
                AskUserQuestionRequest(
                    questions=[TARGET], signal=controller.signal, options=other_options
                )
            )
        )
        other_message = await first.message(2)
        await first.provider.release(key_request_id(other_options.key or ""), RESTARTING_NOTE)
        controller.abort(Released())
        assert isinstance((await asyncio.gather(other, return_exceptions=True))[0], WaitReleased)
        await first.client.stop()

        second = await make_rig(after=first, store=store)
        await second.provider.resume()
        await first.host.wait_for_total_connections(2)
        await asyncio.sleep(1.5)  # past the replay window

        assert interactive(message) and interactive(other_message)
        assert (await record_of(store, "rpc-of-another-host")).is_open
        await second.click(message, "Docs")  # the replayed one still reaches the host
        assert (await asyncio.wait_for(future, 5)).to_wire() == {
            "answers": [{"id": "target", "selected": ["Docs"]}]
        }
        assert first.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Docs"]})]
        assert "Answered" in await second.final(message)
        await first.provider.abort(key_request_id(other_options.key or ""), "test over")


@pytest.mark.slow
async def test_a_replayed_question_resolved_while_it_is_being_taken_up_is_closed(
    make_rig: RigFactory,
) -> None:
    store = SlowReads()
    async with asyncio.timeout(TIMEOUT):
        first = await make_rig(store=store)
        await first.host.wait_for_connections(1)
        rpc_id, _ = first.host.ask(SESSION_A, [TARGET])
        message = await first.message()
        await first.client.stop()
        await eventually(lambda: RESTARTING_NOTE in shown(message.blocks), "the note")

        store.delay = 1.0  # the next bot's first look at the replayed request takes a while
        second = await make_rig(after=first, store=store)
        await first.host.wait_for_total_connections(2)
        await asyncio.sleep(0.2)  # the replay came; its ask reads the record
        assert first.host.resolve_elsewhere(rpc_id, ELSEWHERE)  # ... and it is answered there

        text = await eventually(
            lambda: not interactive(message) and shown(message.blocks),
            "the message to close",
            within=8.0,
        )
        assert ANSWERED_ELSEWHERE in text
        store.delay = 0.0
        assert (await record_of(store, rpc_id)).state == "aborted"
        assert first.host.responses == [] and second.posts == 1


@pytest.mark.slow
async def test_a_replay_just_after_the_window_opens_the_question_again(
    make_rig: RigFactory,
) -> None:
    store = SlowReads()
    async with asyncio.timeout(TIMEOUT):
        rig = await make_rig(store=store, replay_window=0.2)
        await rig.host.wait_for_connections(1)
        rpc_id, future = rig.host.ask(SESSION_A, [TARGET])
        message = await rig.message()

        store.delay = 0.3  # closing the ask as gone takes a while
        rig.host.replay_delay = 0.4  # a new socket, whose replay comes after its window:
        await rig.host.drop()  # the ask is being closed as gone when its replay comes
        await rig.reopened(message, REOPENED_NOTE)
        store.delay = 0.0

        await rig.click(message, "Docs")
        assert (await asyncio.wait_for(future, 5)).to_wire() == {
            "answers": [{"id": "target", "selected": ["Docs"]}]
        }
        assert rig.host.responses == [envelope(rpc_id, {"id": "target", "selected": ["Docs"]})]
        assert "Answered" in await rig.final(message)
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")
        assert rig.posts == 1  # reopened, not posted again
