"""The bot's parts against the real dsh host: Slack stand-in, bolt app, provider, dsh client.

As ``tests/dsh/test_dsh_client.py`` wires them, but the host is ``dsh web`` itself (``real_host``)
with the scripted model, and the agent's user is a ``HostDriver``: it starts turns and reads
the session log, where the host records every outcome (0.2 sends no receipts)::

    rig = await make_real_rig()
    sid, call = await rig.turn(ask(QUESTION))
    message = await rig.message()
    await rig.click(message, "Blue")
    assert json.loads((await rig.driver.tool_result(sid, call))["text"]) == {...}

``via_proxy=True`` puts a TCP relay between the client and the host, so a test can drop the
client's socket (``rig.proxy.cut()`` / ``restore()``) while the host runs on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dsh.client import DshHostClient
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.sandbox import Message, SlackStandIn, clicks
from adapters.slack.stores import PendingStore
from bot.questions.service import UserQuestionService
from tests.dsh.test_dsh_client import eventually, interactive, shown
from tests.dsh_driver import HostDriver
from tests.dsh_model import Step, call_id
from tests.dsh_real import RealHost
from tests.slack.stores.test_store_contract import _Proxy

__all__ = ["RealRig", "RealRigFactory", "make_real_rig"]

SECRET = "dsh-real-signing-secret"
BOT_TOKEN = "xoxb-real-host"


@dataclass
class RealRig:
    """Everything between the real host and the person, wired as the bot wires it."""

    host: RealHost
    driver: HostDriver
    slack: SlackStandIn
    provider: SlackQuestionProvider
    client: DshHostClient
    channel: str
    alice: str
    proxy: _Proxy | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def turn(self, *steps: Step, plan: bool = False) -> tuple[str, str]:
        """A new session whose turn runs ``steps``: its id and its first tool call's id."""
        sid = await self.driver.create_session()
        await self.driver.follow(sid)
        tag = self.host.model.script(*steps)
        await (self.driver.plan if plan else self.driver.prompt)(sid, f"go {tag}")
        return sid, call_id(tag)

    @property
    def posts(self) -> int:
        return len(self.slack.calls("chat.postMessage"))

    def questions(self) -> list[Message]:
        """The bot's top-level messages in the channel, oldest first."""
        history = self.slack.workspace.history(self.channel)
        return [m for m in history if m.thread_ts is None and m.bot_id is not None]

    async def message(self, n: int = 1, within: float = 10.0) -> Message:
        """The ``n``-th message, once it is posted."""
        await eventually(lambda: len(self.questions()) >= n, f"message {n}", within)
        return self.questions()[n - 1]

    async def click(self, message: Message, text: str, values: clicks.Values | None = None) -> None:
        """Alice clicks the button shown as ``text`` (``values``: her choices in the form)."""
        status, body = await self.slack.deliver(
            self.slack.click(message, user=self.alice, text=text, values=values)
        )
        assert status == 200, body

    async def submit_modal(self, text: str) -> None:
        """Alice types ``text`` into the modal the app opened for her and submits it."""
        stack = await eventually(lambda: self.slack.workspace.stacks.get(self.alice), "a modal")
        payload = self.slack.submission(stack[-1], values={"aq1.text": text})
        status, body = await self.slack.deliver(payload)
        assert status == 200, body

    async def final(self, message: Message, within: float = 10.0) -> str:
        """The message's text once it has no buttons left."""
        await eventually(lambda: not interactive(message), "the message to close", within)
        return shown(message.blocks)


RealRigFactory = Callable[..., Awaitable[RealRig]]


async def _serve_bolt(app: AsyncApp) -> web.AppRunner:
    async def events(request: web.Request) -> web.StreamResponse:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", events)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.fixture
async def make_real_rig(live_host: RealHost) -> AsyncIterator[RealRigFactory]:
    """Builds rigs on the module's real host; each is stopped after the test."""
    rigs: list[RealRig] = []

    async def build(
        *, store: PendingStore | None = None, via_proxy: bool = False, **options: Any
    ) -> RealRig:
        slack = SlackStandIn(token=BOT_TOKEN, signing_secret=SECRET)
        await slack.start()
        closers: list[Callable[[], Awaitable[None]]] = [slack.stop]
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
        runner = await _serve_bolt(app)
        closers.append(runner.cleanup)
        slack.interactivity_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"

        async def close_provider() -> None:
            await provider.aclose(grace=2.0)
            dispose()

        closers.append(close_provider)
        url, proxy = live_host.launch_url, None
        if via_proxy:
            proxy = _Proxy("127.0.0.1", live_host.port)
            await proxy.start()
            closers.append(proxy.cut)
            url = url.replace(f":{live_host.port}/", f":{proxy.port}/")
        options = {"backoff_initial": 0.05, "backoff_max": 0.5, "replay_window": 1.0, **options}
        client = DshHostClient(url, service, provider=provider, **options)
        await client.start()
        closers.append(client.stop)
        driver = HostDriver(live_host)
        await driver.login()
        closers.append(driver.close)
        rig = RealRig(live_host, driver, slack, provider, client, channel, alice, proxy, closers)
        rigs.append(rig)
        await eventually(lambda: client.status().get("dsh") == "connected", "the client to connect")
        return rig

    yield build
    for rig in rigs:
        for close in reversed(rig.closers):
            await close()
