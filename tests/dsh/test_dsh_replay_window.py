"""The replay window of a dsh 0.2 downlink, frame by frame, on a fake clock.

Each new socket gets every pending request again (same ``eventId``); no push ends that
replay, so the bot waits ``replay_window`` seconds after the last replayed request, then
closes as gone what the host did not replay: asks of earlier sockets, requests waiting for
a place in Slack, and requests an earlier bot released. A replay that comes while such a
request is being closed asks it again (the same message reopened) once the closing is over.

The host's frames go through the real parsing (``MuxLink``) into the real
``OpenRequests``; behind it, ``serve`` stands for the question runner (it waits until the
request is answered or aborted) and ``Records`` for the provider's store (what was ended,
with which note; a closing can be held open). The loop's clock is fake: the window is
crossed by ``advance``, never by waiting.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from adapters.dsh.asks import APPROVAL_GONE_NOTE, GONE_NOTE, HostAsk, ask_key
from adapters.dsh.host import Host, host_asker
from adapters.dsh.link import MuxLink
from adapters.dsh.open_requests import OpenRequests
from adapters.slack.model.ids import key_request_id

pytestmark = pytest.mark.timeout(20)

WINDOW = 1.0
HOST = "http://127.0.0.1:13080"
ASKER = host_asker(HOST)
SESSION = "session-3f2a9c1e-5d7b-4e1a-9c2f-0b6d8e4a1c3f"
QUESTION = {"id": "target", "question": "Ship?", "options": [{"label": "Yes"}, {"label": "No"}]}
_log = logging.getLogger("adapters.dsh")


def question_frame(event_id: str) -> str:
    value = {
        "type": "waterfall",
        "event": "user-questions/request",
        "eventId": event_id,
        "agentId": SESSION,
        "request": {"questions": [QUESTION]},
    }
    return json.dumps({"type": "item", "streamId": "ev", "value": value})


def approval_frame(event_id: str) -> str:
    request = {"toolName": "bash", "callId": f"call-{event_id}", "reason": "escalate sandbox"}
    value = {
        "type": "waterfall",
        "event": "approval/request",
        "eventId": event_id,
        "agentId": SESSION,
        "request": request,
    }
    return json.dumps({"type": "item", "streamId": "ev", "value": value})


def ready_frame(client_id: str) -> str:
    value = {"type": "ready", "clientId": client_id}
    return json.dumps({"type": "item", "streamId": "ev", "value": value})


@dataclass
class Released:
    """A stored request as ``open_records`` lists it (what a replay's sweep reads)."""

    rpc_id: str
    asked_by: str = ASKER
    owner: str | None = None
    approval: object | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        self.key = self.key if self.key is not None else ask_key(self.rpc_id)

    @property
    def id(self) -> str:
        return key_request_id(self.key or "")


@dataclass
class Records:
    """The provider as ``OpenRequests`` sees it: its store's open records, ``abort``."""

    released: list[Released] = field(default_factory=list)
    ended: list[tuple[str, str]] = field(default_factory=list)
    """(rpcId, note) of each request ended, in order."""
    hold: asyncio.Event | None = None
    """While set to an unset event, each ``abort`` waits for it (a slow store)."""
    names: dict[str, str] = field(default_factory=dict)

    @property
    def store(self) -> Records:
        return self

    async def open_records(self) -> list[Released]:
        return list(self.released)

    def name(self, rpc_id: str) -> None:
        self.names[key_request_id(ask_key(rpc_id))] = rpc_id

    async def abort(self, request_id: str, note: str, *, by: str | None = None) -> None:
        if self.hold is not None:
            await self.hold.wait()
        self.ended.append((self.names[request_id], note))
        self.released = [r for r in self.released if r.id != request_id]

    async def status(self, request_id: str) -> None:
        return None

    async def add_note(self, request_id: str, note: str, *, in_flight: bool = False) -> None:
        return None

    async def release(self, request_id: str, note: str | None = None) -> None:
        return None


class Downlink:
    """The host's side of the sockets, the bot's parts behind them, and a fake clock."""

    def __init__(self, *, max_open: int = 20) -> None:
        self.loop = asyncio.get_running_loop()
        self.now = self.loop.time()
        self.loop.time = lambda: self.now  # type: ignore[method-assign]
        self.records = Records()
        self.served: list[tuple[str, bool]] = []
        """(rpcId, reopen) of each request handed to the runner, in order."""
        self.responding: set[str] = set()
        """Requests whose runner is sending an answer (not asking) when served."""
        self._answered: dict[str, asyncio.Event] = {}
        host = Host(HOST, lambda: None, _log, backoff_max=1.0)  # type: ignore[arg-type,return-value]
        self.requests = OpenRequests(
            self.records, self._serve, host, max_open=max_open, replay_window=WINDOW, asker=ASKER
        )
        self.link = MuxLink(host, None, self.requests)
        self._sockets = 0

    async def _serve(self, ask: HostAsk) -> None:
        self.served.append((ask.rpc_id, ask.reopen))
        if ask.rpc_id in self.responding:
            ask.phase = "responding"
        answered = self._answered.setdefault(ask.rpc_id, asyncio.Event())
        aborted = asyncio.ensure_future(ask.controller.signal.wait())
        done = asyncio.ensure_future(answered.wait())
        await asyncio.wait({aborted, done}, return_when=asyncio.FIRST_COMPLETED)
        aborted.cancel()
        done.cancel()

    async def connect(self, *frames: str) -> None:
        """A new socket: ``ready``, then the host's replay (``frames``)."""
        self._sockets += 1
        self.requests.opened()
        self.link.on_message(ready_frame(f"client-{self._sockets}"))
        await self.send(*frames)

    async def send(self, *frames: str) -> None:
        for frame in frames:
            for name in _event_ids(frame):
                self.records.name(name)
            self.link.on_message(frame)
        await turns()

    async def drop(self) -> None:
        self.link.closed()
        await turns()

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        await turns()

    async def answer(self, rpc_id: str) -> None:
        """The runner's answer is taken: its ask ends without an abort."""
        self._answered.setdefault(rpc_id, asyncio.Event()).set()
        await turns()

    def gone(self) -> list[str]:
        return [rpc for rpc, note in self.records.ended]

    async def close(self) -> None:
        """Put the loop's clock back and end what is still open."""
        del self.loop.time
        for ask in list(self.requests._asks.values()):
            ask.controller.abort("test over")
        await turns()


def _event_ids(frame: str) -> list[str]:
    data: dict[str, Any] = json.loads(frame)
    found = data.get("value", {}).get("eventId")
    return [found] if found else []


async def turns() -> None:
    """Let every task that can run, run (the clock does not move)."""
    for _ in range(30):
        await asyncio.sleep(0)


@pytest.fixture
async def host() -> AsyncIterator[Downlink]:
    downlink = Downlink()
    yield downlink
    await downlink.close()


async def first_socket(host: Downlink, *frames: str) -> None:
    """A first socket that asks ``frames``, its (empty) window over, then dropped."""
    await host.connect(*frames)
    await host.advance(WINDOW + 0.1)
    await host.drop()
    assert host.records.ended == []


async def test_a_replayed_request_stays_and_the_rest_close_as_gone_when_the_window_ends(
    host: Downlink,
) -> None:
    await first_socket(host, question_frame("a"), question_frame("b"))
    await host.connect(question_frame("a"))  # "b" ended in the host meanwhile
    await host.advance(WINDOW * 0.9)
    assert host.records.ended == []  # the window is still open: "b" may still come
    await host.advance(WINDOW * 0.2)
    assert host.records.ended == [("b", GONE_NOTE)]
    assert host.served == [("a", False), ("b", False)]  # "a" not asked twice
    assert host.requests.holds("a") and not host.requests.holds("b")


async def test_the_window_runs_from_the_last_replayed_request(host: Downlink) -> None:
    await first_socket(host, question_frame("a"), question_frame("b"), question_frame("c"))
    await host.connect()
    await host.advance(WINDOW * 0.6)
    await host.send(question_frame("a"))
    await host.advance(WINDOW * 0.6)  # past a window from the socket's start
    await host.send(question_frame("b"))
    await host.advance(WINDOW * 0.9)  # not a window from the last one
    assert host.records.ended == []
    await host.advance(WINDOW * 0.2)
    assert host.records.ended == [("c", GONE_NOTE)]


async def test_a_socket_with_nothing_replayed_closes_every_earlier_request(
    host: Downlink,
) -> None:
    await first_socket(host, question_frame("q"), approval_frame("p"))
    await host.connect()  # the host restarted: it replays nothing
    await host.advance(WINDOW + 0.1)
    # An approval is called an approval (not "question").
    assert sorted(host.records.ended) == [("p", APPROVAL_GONE_NOTE), ("q", GONE_NOTE)]


async def test_a_socket_that_drops_within_its_window_closes_nothing(host: Downlink) -> None:
    await first_socket(host, question_frame("a"))
    await host.connect()
    await host.advance(WINDOW * 0.5)
    await host.drop()  # before "a" could be replayed
    await host.advance(WINDOW * 3)
    assert host.records.ended == []
    await host.connect(question_frame("a"))
    await host.advance(WINDOW + 0.1)
    assert host.records.ended == [] and host.served == [("a", False)]


async def test_a_request_whose_answer_is_being_sent_is_not_closed_as_gone(
    host: Downlink,
) -> None:
    host.responding.add("a")  # its delivery waits for the replay itself (MuxLink.respond)
    await first_socket(host, question_frame("a"), question_frame("b"))
    await host.connect()
    await host.advance(WINDOW + 0.1)
    assert host.records.ended == [("b", GONE_NOTE)]


async def test_a_waiting_request_the_replay_leaves_out_is_never_asked() -> None:
    host = Downlink(max_open=1)  # one request of the session in Slack at a time
    try:
        await host.connect(question_frame("a"), question_frame("b"), question_frame("c"))
        assert host.served == [("a", False)] and host.requests.queued == 2
        await host.advance(WINDOW + 0.1)
        await host.drop()
        await host.connect(question_frame("a"), question_frame("c"))  # "b" ended meanwhile
        await host.advance(WINDOW + 0.1)
        assert host.requests.queued == 1
        await host.answer("a")
        assert host.served == [("a", False), ("c", False)]
    finally:
        await host.close()


async def test_a_replay_while_its_request_is_being_closed_asks_it_again_after(
    host: Downlink,
) -> None:
    await first_socket(host, question_frame("a"))
    host.records.hold = asyncio.Event()  # closing it takes a while
    await host.connect()
    await host.advance(WINDOW + 0.1)  # "a" is being closed as gone
    await host.send(question_frame("a"))  # ... and the host replays it, late
    assert host.served == [("a", False)] and host.requests.holds("a")
    host.records.hold.set()
    await turns()
    assert host.records.ended == [("a", GONE_NOTE)]
    assert host.served == [("a", False), ("a", True)]  # the same message, reopened


async def test_a_late_replay_the_next_socket_leaves_out_is_not_asked(host: Downlink) -> None:
    await first_socket(host, question_frame("a"))
    host.records.hold = asyncio.Event()
    await host.connect()
    await host.advance(WINDOW + 0.1)
    await host.send(question_frame("a"))  # late, while "a" is being closed
    await host.drop()
    await host.connect()  # and the next socket does not replay it: the host lost it
    await host.advance(WINDOW + 0.1)
    host.records.hold.set()
    await turns()
    assert host.served == [("a", False)] and not host.requests.holds("a")


async def test_released_requests_of_this_host_not_replayed_are_closed(host: Downlink) -> None:
    host.records.released = [
        Released("gone"),
        Released("gone-approval", approval=object()),
        Released("replayed"),
        Released("other-host", asked_by=host_asker("http://127.0.0.9:13080")),
        Released("owned", owner="process-of-a-running-bot"),
    ]
    for record in host.records.released:
        host.records.name(record.rpc_id)
    await host.connect(question_frame("replayed"))
    await host.advance(WINDOW * 0.9)
    assert host.records.ended == []
    await host.advance(WINDOW * 0.2)
    assert sorted(host.records.ended) == [
        ("gone", GONE_NOTE),
        ("gone-approval", APPROVAL_GONE_NOTE),
    ]
    assert host.served == [("replayed", False)]


async def test_a_released_request_replayed_while_being_closed_is_reopened_after(
    host: Downlink,
) -> None:
    host.records.released = [Released("x")]
    host.records.name("x")
    host.records.hold = asyncio.Event()
    await host.connect()
    await host.advance(WINDOW + 0.1)  # "x" is being closed as gone
    await host.send(question_frame("x"))  # replayed late
    assert host.served == [] and host.requests.holds("x")
    host.records.hold.set()
    await turns()
    assert host.records.ended == [("x", GONE_NOTE)] and host.served == [("x", True)]
    # Once reopened it is an ordinary open request: a later replay does not ask it again,
    # even after it is answered.
    await host.drop()
    await host.connect(question_frame("x"))
    await host.answer("x")
    await host.advance(WINDOW + 0.1)
    assert host.served == [("x", True)] and not host.requests.holds("x")
