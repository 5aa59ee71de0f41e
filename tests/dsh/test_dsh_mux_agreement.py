"""The 0.2 stand-in (``tests/dsh_mux_host.py``) agrees with the real host on what it sends.

One scenario on both, through the bot's real parts: a question asked, answered in Slack.
Every item the stand-in sent (``ready``, ``waterfall``, the log's ``snapshot`` and
``tool/call`` / ``tool/result`` events) must have a counterpart of the same kind on the real
host whose shape holds it (the same keys, nested the same way, the same JSON types), and the
result the bot posted to the stand-in must be the one the real host took: its ``tool/result``
is that answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.dsh.test_dsh_client import eventually
from tests.dsh.test_dsh_real_client import build_rig, posted
from tests.dsh_driver import HostDriver
from tests.dsh_model import ask
from tests.dsh_model import call_id as first_call
from tests.dsh_mux_host import MuxHost
from tests.dsh_real import RealHost, live_host, real_host

__all__ = ["live_host", "real_host"]  # the fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

COLOR = {
    "id": "color",
    "question": "Which color?",
    "options": [{"label": "Blue"}, {"label": "Green"}],
}
SESSION = "session-0a1b2c3d-0000-4000-8000-000000000002"


def flat(values: list[Any]) -> list[Any]:
    """The items, and the records of each snapshot among them (each one a log event item)."""
    return [*values, *(r for v in values if v.get("type") == "snapshot" for r in v["records"])]


def kind(value: Any) -> tuple[str, ...]:
    """What an item is: its ``type``, and for a log event the event's type."""
    if value.get("type") == "event":
        return ("event", value["event"]["type"])
    if value.get("type") == "waterfall":
        return ("waterfall", value["event"])
    return (str(value.get("type")),)


def fits(mine: Any, real: Any, path: str = "") -> list[str]:
    """Where ``mine`` is not shaped as ``real`` (keys, nesting, JSON types); [] if it fits."""
    if isinstance(mine, dict):
        if not isinstance(real, dict):
            return [f"{path}: object, real {type(real).__name__}"]
        problems = [f"{path}.{k}: not on the real host" for k in mine if k not in real]
        for key in mine.keys() & real.keys():
            if key == "records":
                continue  # compared one by one: each record is a log event item
            problems += fits(mine[key], real[key], f"{path}.{key}")
        return problems
    if isinstance(mine, list):
        if not isinstance(real, list):
            return [f"{path}: array, real {type(real).__name__}"]
        if mine and real:
            return fits(mine[0], real[0], f"{path}[]")
        return []
    same = type(mine) is type(real) or {type(mine), type(real)} <= {int, float}
    return [] if same else [f"{path}: {type(mine).__name__}, real {type(real).__name__}"]


@pytest.fixture
async def stand_in() -> AsyncIterator[MuxHost]:
    host = MuxHost()
    await host.start()
    yield host
    await host.stop()


@pytest.fixture
async def closers() -> AsyncIterator[list[Callable[[], Awaitable[None]]]]:
    stack: list[Callable[[], Awaitable[None]]] = []
    yield stack
    for close in reversed(stack):
        await close()


@pytest.mark.slow
async def test_the_stand_in_sends_what_the_real_host_sends(
    live_host: RealHost, stand_in: MuxHost, closers: list[Callable[[], Awaitable[None]]]
) -> None:
    answer = {"answers": [{"id": "color", "selected": ["Blue"]}]}
    async with asyncio.timeout(90), HostDriver(live_host) as driver:
        real_bot = await build_rig(live_host.launch_url, closers, live_host)
        events = await driver.listen()
        sid = await driver.create_session()
        log = await driver.follow(sid)
        tag = live_host.model.script(ask(COLOR))
        await driver.prompt(sid, f"go {tag}")
        await real_bot.click(await posted(real_bot, sid), "Blue")
        result = await driver.tool_result(sid, first_call(tag))
        assert json.loads(result["text"]) == answer
        real = flat([*events.items, *log.items])

        fake_bot = await build_rig(stand_in.launch_url, closers, stand_in)
        stand_in.ask(SESSION, [COLOR])
        await fake_bot.click(await posted(fake_bot, SESSION), "Blue")
        await eventually(lambda: stand_in.results, "the answer on the stand-in")
    assert stand_in.results[0]["payload"]["args"]["outcome"] == {"kind": "result", "value": answer}
    sent = flat([frame["value"] for frame in stand_in.frames])
    assert {kind(v) for v in sent} == {
        ("ready",), ("waterfall", "user-questions/request"), ("snapshot",),
        ("event", "tool/call"), ("event", "tool/result"),
    }  # fmt: skip
    for value in sent:
        counterparts = [r for r in real if kind(r) == kind(value)]
        assert counterparts, f"the real host sent no {kind(value)}"
        problems = min((fits(value, r) for r in counterparts), key=len)
        assert problems == [], f"{kind(value)}: {problems}"
