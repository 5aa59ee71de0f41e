"""A real bolt app, served on 127.0.0.1, talking to the Slack stand-in: the provider's test bed.

::

    async with SlackHarness() as h:
        task = h.ask({"questions": [...]})
        message = await h.posted()
        await h.click(message, h.alice, text="Deploy")
        answer = await task

Every Web API call goes to ``SlackStandIn`` (which refuses Block Kit outside Slack's
limits, as Slack does); the client paces its calls within Slack's rate limits, by default
at a time scale (``FAST_LIMITS``) where they do not slow tests down, and ``enforce=True``
switches the stand-in's enforcement on (load tests); every click is a signed, form-encoded
payload POSTed to the app's ``/slack/events``, as Slack sends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Any

from aiohttp import web

from adapters.slack.clicks.bolt_app import build_app, close_web_client, events_handler, web_client
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.records import Ephemeral, Message
from adapters.slack.sandbox.webapi import SlackStandIn
from adapters.slack.stores import PendingStore
from bot.questions.models import AskOptions, AskUserQuestionAnswer, AskUserQuestionRequest
from bot.questions.service import UserQuestionService

SECRET = "test-signing-secret"
FAST_LIMITS = SlackLimits(time_scale=1000.0)
"""Slack's limits a thousand times faster: the pacing of a few calls is not noticed."""


async def until(predicate: Callable[[], Any], *, within: float = 5.0, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy (fails after ``within`` s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.005)


async def message_ts_kept(store: PendingStore, within: float = 5.0) -> None:
    """Wait until an ask has stored its message's ts (written once Slack answers the post)."""
    for _ in range(int(within / 0.01)):
        if any(r.message_ts for r in await store.open_records()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no message ts stored within {within} s")


class SlackHarness:
    """Slack stand-in + bolt ``AsyncApp`` + ``SlackQuestionProvider`` + service."""

    def __init__(
        self,
        *,
        store: PendingStore | None = None,
        limits: SlackLimits = FAST_LIMITS,
        enforce: bool = False,
        client_timeout: float = 5,
        **provider_options: Any,
    ) -> None:
        enforced = RateLimiter(limits) if enforce else None
        self.slack = SlackStandIn(signing_secret=SECRET, rate_limits=enforced)
        self.limits = limits
        ws = self.slack.workspace
        self.alice = ws.add_user("alice").id
        self.bob = ws.add_user("bob").id
        self.carol = ws.add_user("carol").id
        self.channel = ws.add_channel("agents").id
        self._store = store
        self._client_timeout = client_timeout
        self._provider_options = provider_options
        self.runner: web.AppRunner | None = None
        self.tasks: list[asyncio.Task[AskUserQuestionAnswer]] = []

    async def __aenter__(self) -> SlackHarness:
        await self.slack.start()
        # As the bot makes its client: one kept session (closed on the way out).
        self.client = web_client(
            self.slack.token,
            base_url=self.slack.url,
            timeout=self._client_timeout,
            limits=self.limits,
        )
        try:
            self.app = await build_app(self.client, signing_secret=SECRET)
        except BaseException:
            await close_web_client(self.client)
            await self.slack.stop()
            raise
        options = {"channel": self.channel, **self._provider_options}
        self.provider = SlackQuestionProvider(self.app, store=self._store, **options)
        self.service = UserQuestionService()
        self.service.register_provider(self.provider)
        web_app = web.Application()

        web_app.router.add_post("/slack/events", events_handler(self.app, SECRET))
        self.runner = web.AppRunner(web_app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.events_url = f"http://127.0.0.1:{port}/slack/events"
        self.slack.interactivity_url = self.events_url
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.provider.aclose(grace=2.0)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.runner is not None:
            await self.runner.cleanup()
        await close_web_client(self.client)
        await self.slack.stop()

    # -- asking ---------------------------------------------------------------------------

    def ask(
        self,
        wire: dict[str, Any] | AskUserQuestionRequest,
        *,
        options: AskOptions | None = None,
        **request_fields: Any,
    ) -> asyncio.Task[AskUserQuestionAnswer]:
        """Start ``service.ask`` in a task (wire JSON or a request object)."""
        if isinstance(wire, AskUserQuestionRequest):
            request = wire
        else:
            request = AskUserQuestionRequest.model_validate(wire)
        for key, value in request_fields.items():
            setattr(request, key, value)
        if options is not None:
            request.options = options
        task = asyncio.ensure_future(self.service.ask(request))
        self.tasks.append(task)
        return task

    def top_messages(self, channel: str | None = None) -> list[Message]:
        """Messages posted at the top level of ``channel`` (not thread replies)."""
        ws = self.slack.workspace
        channels = [channel] if channel else list(ws.messages)
        return [
            m
            for c in channels
            for m in ws.messages.get(c, [])
            if m.thread_ts is None or m.thread_ts == m.ts
        ]

    async def posted(self, count: int = 1, channel: str | None = None) -> Message:
        """Wait until ``count`` top-level messages exist; return the newest."""
        messages = await until(
            lambda: (lambda ms: ms if len(ms) >= count else None)(self.top_messages(channel)),
            what=f"{count} message(s)",
        )
        newest: Message = messages[-1]
        return newest

    def current(self, message: Message) -> Message:
        """The message as it is now (after any ``chat.update``)."""
        return self.slack.workspace.message(message.channel, message.ts)

    async def updated(self, message: Message, edits: int = 1) -> Message:
        """Wait until ``message`` has been edited ``edits`` times; return it."""
        await until(lambda: len(self.current(message).edits) >= edits, what=f"{edits} edit(s)")
        return self.current(message)

    # -- acting as a person ---------------------------------------------------------------

    async def click(
        self,
        message: Message,
        user: str,
        *,
        values: dict[Any, Any] | None = None,
        **target: Any,
    ) -> tuple[int, str]:
        """``user`` clicks an element of the message as it is now; returns the HTTP answer."""
        payload = self.slack.click(self.current(message), user=user, values=values, **target)
        return await self.slack.deliver(payload)

    async def modal(self, user: str) -> Any:
        """Wait for the modal opened for ``user``; return the view."""
        ws = self.slack.workspace
        return await until(
            lambda: next((v for v in ws.views.values() if v.user == user), None),
            what=f"a modal for {user}",
        )

    async def type_into_modal(self, user: str, text: str) -> tuple[int, str]:
        """``user`` types ``text`` into the open modal's input and presses its submit."""
        view = await self.modal(user)
        payload = self.slack.submission(view.id, values={"aq1.text": text})
        return await self.slack.deliver(payload)

    def ephemerals(self, user: str) -> list[Ephemeral]:
        """Private notes shown to ``user``."""
        return self.slack.workspace.ephemerals_for(user)


def interactive_elements(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every actions/input element in ``blocks`` (empty for a finished record)."""
    found: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "actions":
            found.extend(block.get("elements", []))
        if block.get("type") == "input":
            found.append(block["element"])
        accessory = block.get("accessory")
        if isinstance(accessory, dict) and "action_id" in accessory:
            found.append(accessory)
    return found


def answering_elements(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The interactive elements that act on a question: all but link buttons (a URL
    button only opens its page), so empty for a finished record, which keeps its link."""
    return [e for e in interactive_elements(blocks) if "url" not in e]


def all_text(blocks: list[dict[str, Any]]) -> str:
    """All text in ``blocks`` joined (to look for what a person would read)."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "text" and isinstance(item, str):
                    parts.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(blocks)
    return "\n".join(parts)
