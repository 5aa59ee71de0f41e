"""An answer given across a reconnect goes to the host only once the new socket's replay
brings its request, under the new ``clientId``; one whose request the replay does not bring
(the host lost it) is never sent, and its message says it was not used.

Through the bot's real parts (``test_dsh_client``'s rig) and ``MuxHost``: the real host
(``test_dsh_real_client``, slow) cannot be made to hold its replay back, nor to be out of
reach while a person answers, at a chosen moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from adapters.dsh.asks import DELIVERED_NOTE
from tests.dsh import test_dsh_mux_limits as _limits
from tests.dsh.test_dsh_client import Rig, eventually, interactive, shown
from tests.dsh.test_dsh_mux_limits import COLOR, SESSION
from tests.dsh_mux_host import MuxHost

pytestmark = pytest.mark.timeout(60)

host, bot = _limits.host, _limits.bot  # the stand-in and the bot's parts around it
FAST = {"backoff_initial": 0.05, "backoff_max": 0.2}


async def test_an_answer_given_while_the_host_is_out_of_reach_waits_for_the_replay(
    host: MuxHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot(**FAST)
    async with asyncio.timeout(30):
        event_id = host.ask(SESSION, [COLOR])[0]
        message = await eventually(lambda: rig.questions() or None, "the question")
        first = host.client_ids()
        host.refusing = True
        await host.drop()
        await eventually(lambda: rig.client.state != "connected", "the bot to notice")
        await rig.click(message[0], "Blue")  # no socket: nowhere to send it yet
        host.replay_delay = 0.8  # the new socket replays well within the 2 s wait
        host.refusing = False
        sent = await eventually(lambda: host.results, "the answer", 10)
        args = sent[0]["payload"]["args"]
        assert args["eventId"] == event_id
        assert args["clientId"] == host.client_ids()[0] and host.client_ids() != first
        text = await eventually(
            lambda: DELIVERED_NOTE in shown(message[0].blocks) and shown(message[0].blocks),
            "the answer to count as delivered",
            10,
        )
        assert "Answered" in text and len(host.results) == 1


async def test_an_answer_to_a_request_the_replay_leaves_out_is_never_sent(
    host: MuxHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot(replay_window=6.0, **FAST)  # the message stays open past the link's own wait
    async with asyncio.timeout(30):
        host.ask(SESSION, [COLOR])
        message = await eventually(lambda: rig.questions() or None, "the question")
        host.forget()  # the host restarts and loses it
        await host.drop()
        await eventually(lambda: host.connections == 1, "the new socket")
        await rig.click(message[0], "Blue")
        await eventually(
            lambda: not interactive(message[0]) and "not used" in shown(message[0].blocks),
            "the answer to be called unused",
            8,
        )
        assert host.results == []  # the host would have taken and dropped it


async def test_each_replayed_request_attaches_to_its_own_message(
    host: MuxHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot(**FAST)
    async with asyncio.timeout(30):
        first = host.ask(SESSION, [COLOR])[0]
        second = host.ask(SESSION, [{**COLOR, "question": "Which other color?"}])[0]
        host.request_approval(SESSION, "bash", {"command": "ls"})
        host.request_approval(SESSION, "bash", {"command": "pwd"})
        await eventually(lambda: len(rig.questions()) == 4 or None, "four messages")
        await host.drop()  # the new socket replays all four
        await eventually(lambda: host.connections == 1, "the new socket")
        await asyncio.sleep(0.3)
        status = rig.client.status()
        assert (status["dshQuestions"], status["dshApprovals"]) == (2, 2)
        assert len(rig.questions()) == 4
        message = [m for m in rig.questions() if "Which other color?" in shown(m.blocks)]
        await rig.click(message[0], "Green")
        sent = await eventually(lambda: host.results, "the answer")
        assert [r["payload"]["args"]["eventId"] for r in sent] == [second]
        assert host.is_pending(first) and not host.is_pending(second)
