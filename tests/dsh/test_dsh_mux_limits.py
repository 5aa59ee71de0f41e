"""Bad input from a dsh host is kept within limits.

Through the bot's real parts (``test_dsh_client``'s rig) and ``MuxHost``, the stand-in for
what the real host cannot be made to send: a frame over the size limit, malformed frames,
frames nested past 64 levels, and a flood of requests across many sessions. Each is skipped
(or queued) with the connection kept, and the next good request is still posted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from adapters.dsh.asks import session_label
from tests.dsh.test_dsh_client import Rig, eventually, shown
from tests.dsh.test_dsh_real_client import build_rig
from tests.dsh_mux_host import MuxHost

pytestmark = pytest.mark.timeout(60)

COLOR = {
    "id": "color",
    "question": "Which color?",
    "options": [{"label": "Blue"}, {"label": "Green"}],
}
SESSION = "session-0a1b2c3d-0000-4000-8000-000000000001"


@pytest.fixture
async def host() -> AsyncIterator[MuxHost]:
    stand_in = MuxHost()
    await stand_in.start()
    yield stand_in
    await stand_in.stop()


@pytest.fixture
async def bot(host: MuxHost) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    closers: list[Callable[[], Awaitable[None]]] = []

    async def build(**options: Any) -> Rig:
        rig = await build_rig(host.launch_url, closers, host, heartbeat=None, **options)
        return rig

    yield build
    for close in reversed(closers):
        await close()


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


async def test_bad_frames_are_skipped_and_the_connection_kept(
    host: MuxHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot(max_frame_bytes=64 * 1024)
    async with asyncio.timeout(30):
        huge = {
            "type": "item",
            "streamId": "ev",
            "value": {
                "type": "waterfall",
                "event": "user-questions/request",
                "eventId": "e-huge",
                "agentId": SESSION,
                "request": {"questions": [{**COLOR, "question": "x" * 100_000}]},
            },
        }
        for text in [
            json.dumps(huge),
            "not json",
            "[1, 2]",
            json.dumps(
                {
                    "type": "item",
                    "streamId": "ev",
                    "value": {
                        "type": "waterfall",
                        "event": "user-questions/request",
                        "agentId": SESSION,
                        "request": {"questions": [COLOR]},
                    },
                }
            ),
            json.dumps(
                {
                    "type": "item",
                    "streamId": "ev",
                    "value": {
                        "type": "waterfall",
                        "event": "user-questions/request",
                        "eventId": "e-bad",
                        "agentId": SESSION,
                        "request": {"questions": "none"},
                    },
                }
            ),
            json.dumps(
                {
                    "type": "item",
                    "streamId": "ev",
                    "value": {"type": "ready", "clientId": nested(100)},
                }
            ),
            json.dumps({"type": "item", "streamId": "log:" + SESSION, "value": nested(100)}),
        ]:
            await host.push_raw(text)
        host.ask(SESSION, [COLOR])
        message = await eventually(lambda: rig.questions() or None, "the good question", 10)
        assert len(message) == 1 and "Which color?" in shown(message[0].blocks)
        assert rig.client.state == "connected" and host.connections == 1
        await rig.click(message[0], "Blue")
        await eventually(lambda: host.results, "the answer")
        assert host.results[0]["payload"]["args"]["outcome"] == {
            "kind": "result",
            "value": {"answers": [{"id": "color", "selected": ["Blue"]}]},
        }


@pytest.mark.slow
async def test_a_flood_across_many_sessions_keeps_the_per_session_limit(
    host: MuxHost, bot: Callable[..., Awaitable[Rig]]
) -> None:
    rig = await bot(max_open_per_session=1)  # Slack takes one post a second per channel
    sessions = [f"session-{n:08x}-0000-4000-8000-000000000000" for n in range(8)]
    async with asyncio.timeout(50):
        for sid in sessions:
            for n in range(3):
                host.ask(sid, [{**COLOR, "id": f"q{n}"}])
        await eventually(lambda: len(rig.questions()) >= 8 or None, "8 messages", 30)
        await asyncio.sleep(0.5)
        assert len(rig.questions()) == 8 and rig.client.queued == 16
        assert rig.client.status()["dshQuestions"] == 24
        first = [m for m in rig.questions() if session_label(sessions[0]) in shown(m.blocks)]
        await rig.click(first[0], "Green")  # one answered: its session's next is posted
        await eventually(lambda: len(rig.questions()) == 9 or None, "the waiting one", 10)
        assert rig.client.queued == 15
