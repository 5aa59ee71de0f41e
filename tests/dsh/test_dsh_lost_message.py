"""A request whose Slack message is gone (deleted while the bot was down) is posted again.

The host replays it to the next bot, which finds its record open in the store but its message
gone: it posts the question again (one new message) instead of leaving the agent waiting on
a message nobody can see.
"""

from __future__ import annotations

import asyncio

from adapters.slack.stores import MemoryPendingStore
from tests.dsh import test_dsh_client as _rig_module
from tests.dsh.test_dsh_client import SESSION_A, TARGET, TIMEOUT, RigFactory, answer_of, eventually

make_rig = _rig_module.make_rig


async def test_a_question_whose_message_was_deleted_is_posted_again(
    make_rig: RigFactory,
) -> None:
    store = MemoryPendingStore()
    async with asyncio.timeout(TIMEOUT):
        first = await make_rig(store=store)
        await first.host.wait_for_connections(1)
        _rpc_id, future = first.host.ask(SESSION_A, [TARGET])
        message = await first.message()
        await first.client.stop()  # released: left open for the next bot
        first.slack.workspace.delete(message)  # chat.delete while no bot runs

        second = await make_rig(after=first, store=store)
        await second.provider.resume()
        await first.host.wait_for_total_connections(2)
        again = await eventually(lambda: second.questions() or None, "the question again")
        assert len(again) == 1 and again[0].ts != message.ts
        await second.click(again[0], "Docs")
        assert await answer_of(future) == {"answers": [{"id": "target", "selected": ["Docs"]}]}
