"""Wiring: settings -> bolt app, Slack provider, service, HTTP server; every part entered on one
``AsyncExitStack`` and released in reverse order, also when a later part fails to start."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import secrets
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from adapters.dsh.client import DshHostClient
from adapters.httpguard import RefusalLog
from adapters.slack.clicks.bolt_app import build_app, close_web_client, web_client
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.stores import PendingStore
from bot.api.access import OpenQuestionCaps
from bot.api.gateway import Gateway
from bot.app.embedded import wired
from bot.app.listener import listener_limits, listening, serve
from bot.app.shutdown import Deadline, bounded, interrupt
from bot.app.socket_mode import SocketMode, refusal
from bot.app.storage import budget, open_store, outbox
from bot.questions.service import UserQuestionService
from bot.settings.config import Settings

if TYPE_CHECKING:
    from adapters.slack.sandbox.site import SandboxServer

logger = logging.getLogger("bot")

HEALTH_STORE_TIMEOUT: Final = 3.0
"""Longest ``/healthz`` waits for the store before it calls it unreachable, in seconds."""
SANDBOX_HOST = "127.0.0.1"
"""The sandbox (page and stand-in Web API) listens here and nowhere else."""


@dataclass(eq=False)
class Runtime:
    """A running bot: its parts, its address, and how to stop it."""

    settings: Settings
    service: UserQuestionService
    provider: SlackQuestionProvider
    gateway: Gateway
    app: AsyncApp
    store: PendingStore
    runner: web.AppRunner = field(init=False)
    url: str = field(init=False)
    resources: contextlib.AsyncExitStack = field(init=False, repr=False)
    """Everything ``start`` entered, released in reverse order by ``stop``."""
    deadline: Deadline = field(repr=False)
    """The stop's deadline, shared by every step ``resources`` holds."""
    sandbox: SandboxServer | None = None
    socket: SocketMode | None = None
    dsh: DshHostClient | None = None
    _stopping: bool = field(default=False, init=False, repr=False)

    @property
    def sandbox_url(self) -> str | None:
        """The sandbox's page (sandbox mode only)."""
        return self.sandbox.page_url if self.sandbox is not None else None

    async def health(self, request: web.Request) -> web.StreamResponse:
        """``GET /healthz``: mode, store, the questions pending (``owned`` by this process,
        ``unowned``: any process's) and open, the waiters, the Web API queue, each connection;
        503 and ``ok: false`` while the store is unreachable."""
        body: dict[str, object] = {"ok": True, "mode": self.settings.mode}
        try:
            async with asyncio.timeout(HEALTH_STORE_TIMEOUT):
                count = await self.store.open_count()
        except Exception as exc:  # HarnessError(STORE_UNAVAILABLE), RedisError, TimeoutError
            body.update(ok=False, store="unreachable", error=type(exc).__name__)
        else:
            body.update(
                store="ok",
                pending=count.mine + count.unowned,
                owned=count.mine,
                unowned=count.unowned,
                open=count.total,
            )
        body["waiters"] = self.store.watch_count
        body["longPolls"] = self.gateway.polls.count
        scheduler = getattr(self.provider.client, "scheduler", None)
        if scheduler is not None:  # Web API calls waiting for Slack's rate limits
            body["webApiQueue"] = scheduler.depths()
        if self.socket is not None:
            body.update(await self.socket.status())
        if self.dsh is not None:
            body.update(self.dsh.status())
        return web.json_response(body, status=200 if body["ok"] else 503)

    async def stop(self) -> None:
        """Interrupt pending questions, drain background work, and close everything (once)."""
        if self._stopping:
            return
        self._stopping = True
        self.deadline.begin()
        await self.resources.aclose()
        logger.info("stopped")


async def start(settings: Settings) -> Runtime:
    """Build and start the bot for ``settings.mode``; a part that fails to start releases the
    ones already started (in reverse order) before the error propagates."""
    async with contextlib.AsyncExitStack() as stack:
        runtime = await _enter(settings, stack)
        runtime.resources = stack.pop_all()
    for label, value in settings.describe():
        if label == "slack api" and runtime.sandbox is not None:
            value = f"SLACK_API_URL={value} is ignored in sandbox mode (the sandbox's own is used)"
        logger.info(f"{label}: {value}")
    if runtime.sandbox is not None:
        logger.info(
            f"sandbox: {runtime.sandbox.page_url} (loopback only, whatever HOST says; its "
            "stand-in Web API takes a random token made at this start)"
        )
    logger.info(f"listening on {runtime.url}")
    return runtime


async def _enter(settings: Settings, stack: contextlib.AsyncExitStack) -> Runtime:
    """Start every part on ``stack`` (the caller owns it); the last entered is the first out."""
    sandbox: SandboxServer | None = None
    signing_secret: str | None = None
    deadline = Deadline(settings.shutdown_grace)

    def closes(what: str, close: Callable[[], Awaitable[None]], doing: str) -> None:
        """``close`` runs at the stop, bounded by the deadline; ``doing`` names it in the log."""
        stack.push_async_callback(bounded, what, close, deadline, doing=doing)

    api_url = settings.slack_api_url
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    channel = settings.slack_channel
    if settings.mode == "sandbox":
        from adapters.slack.sandbox.site import DEFAULT_CHANNEL, SandboxServer

        signing_secret = secrets.token_hex(16)
        token = f"xoxb-sandbox-{secrets.token_hex(24)}"  # the stand-in's, new at every start
        # SLACK_CHANNEL, when set, is the id of the sandbox's channel: the default
        # destination and the page's channel are one conversation.
        channel = channel or DEFAULT_CHANNEL
        sandbox = SandboxServer(
            signing_secret=signing_secret,
            bot_token=token,
            channel=channel,
            limits=listener_limits(settings),
        )
        closes("sandbox", sandbox.stop, "stopping the sandbox")
        # The sandbox has no authentication: loopback only, whatever HOST says.
        api_url = await listening(
            sandbox.start(host=SANDBOX_HOST, port=settings.sandbox_port),
            setting="SANDBOX_PORT",
            host=SANDBOX_HOST,
            port=settings.sandbox_port,
        )
    elif settings.mode == "http" and settings.slack_signing_secret is not None:
        signing_secret = settings.slack_signing_secret.get_secret_value()
    assert token is not None and channel is not None

    client = web_client(
        token,
        base_url=api_url,
        timeout=10,
        limits=SlackLimits(time_scale=settings.slack_rate_scale),
        budget=budget(settings),
    )
    closes("web client", lambda: close_web_client(client), "closing the Slack Web API session")
    store = await open_store(settings)  # a missing Redis is named before anything else
    closes("store", store.close, "closing the pending store")
    try:  # Slack refusing the token or being out of reach is a clear startup error
        app = await build_app(
            client,
            signing_secret=signing_secret or "",
            verify_requests=settings.mode != "socket",
        )
    except SlackApiError as exc:  # a refused token, a wrong SLACK_API_URL, a proxy's page
        raise RuntimeError(refusal(exc, "auth.test", client, "SLACK_BOT_TOKEN")) from exc
    except (aiohttp.ClientError, TimeoutError) as exc:
        detail = str(exc) or type(exc).__name__
        raise RuntimeError(f"cannot reach Slack's Web API (auth.test): {detail}") from exc
    provider = SlackQuestionProvider(
        app,
        channel=channel,
        allowed_users=settings.slack_allowed_users or None,
        allowed_usergroups=settings.slack_allowed_usergroups or None,
        mention=settings.slack_mention,
        remind=settings.slack_remind,
        timeout=settings.question_timeout,
        store=store,
    )
    service = UserQuestionService()
    stack.callback(service.register_provider(provider))
    refusals = RefusalLog(logging.getLogger("bot.http"))
    webhooks = wired(
        provider,
        await outbox(settings),
        settings.api_tokens,
        hosts=settings.webhook_hosts,
        allow_private=settings.webhook_allow_private,
        approval_ttl=settings.approval_ttl,
    )
    closes("webhooks", webhooks.stop, "stopping the webhooks")
    gateway = Gateway(
        service,
        provider,
        tokens=settings.api_tokens,
        caps=OpenQuestionCaps(
            per_process=settings.max_open_questions,
            per_token=settings.max_open_per_token,
        ),
        max_body_bytes=settings.max_body_bytes,
        refusals=refusals,
        default_channel=channel,
        polls=(settings.max_polls_per_token, settings.max_connections * 7 // 8 or 1),
        approval_ttl=settings.approval_ttl,
        approve=lambda view, options, signal: provider.ask_approval(
            view,
            options=options,
            approvers=settings.dsh_approvers or None,
            approver_groups=settings.dsh_approver_usergroups or None,
            signal=signal,
        ),
        webhooks=webhooks,
    )
    # The open questions owned by no process (asked over the API before a restart, or
    # on another process) are this process's to serve too: their deadlines are kept here.
    adopted = await provider.resume()
    if adopted:
        counted = gateway.held.take(adopted)  # in the API's open-question caps until they end
        logger.info(
            f"took up {len(adopted)} open questions owned by no process ({counted} of the API)"
        )
    runtime = Runtime(
        settings=settings,
        service=service,
        provider=provider,
        gateway=gateway,
        app=app,
        store=store,
        sandbox=sandbox,
        deadline=deadline,
    )
    runner = await serve(runtime, signing_secret)
    closes("http server", runner.cleanup, "closing the HTTP server")
    runtime.runner = runner
    runtime.url = url = f"http://{settings.bracketed_host}:{runner.addresses[0][1]}"
    if sandbox is not None:
        # The demo's tool approval names no approvers (DSH_APPROVERS are the dsh host's):
        # anyone who may answer in the sandbox may decide it.
        await sandbox.connect_bot(f"{url}/slack/events", service=service, approvals=provider)
    if settings.mode == "socket":
        assert settings.slack_app_token is not None
        socket = SocketMode(app, settings.slack_app_token.get_secret_value())
        closes("socket mode", socket.close, "closing the Socket Mode connection")
        await socket.connect()
        runtime.socket = socket
    if settings.dsh_host_url:
        dsh_token = settings.dsh_host_token
        dsh = DshHostClient(
            settings.dsh_host_url,
            service,
            provider=provider,
            token=dsh_token.get_secret_value() if dsh_token else None,
            review=settings.dsh_review_policy,
            approvers=settings.dsh_approvers or None,
            approver_groups=settings.dsh_approver_usergroups or None,
        )
        closes("dsh host client", dsh.stop, "stopping the dsh host client")
        await dsh.start()
        runtime.dsh = dsh
    # Entered last, so the first thing stop() does: refuse new questions, interrupt the
    # pending ones while Slack, the store and the server are all still there (the dsh host's
    # first: they are released, not ended, so a restarted bot takes them up again).
    stack.push_async_callback(interrupt, runtime)
    return runtime


async def run(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT, then stop cleanly; a signal during startup cancels the start
    (which releases what it opened), a second one while stopping has its default effect."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    starting = asyncio.ensure_future(start(settings))
    signals = (signal.SIGTERM, signal.SIGINT)

    def unhandle() -> None:
        for handled in signals:
            loop.remove_signal_handler(handled)

    def on_signal(signum: int) -> None:
        unhandle()
        if not starting.done():
            logger.info(f"{signal.Signals(signum).name} during startup: stopping")
            starting.cancel()
        stop.set()

    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        try:
            runtime = await starting
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not stop.is_set() or (task is not None and task.cancelling()):
                raise  # cancelled from outside, not by a signal
            logger.info("stopped during startup")
            return
        try:
            frozen = settle_heap()  # what start built lives as long as the process
            logger.info("heap: %d objects kept out of full garbage collections", frozen)
            if runtime.sandbox_url:
                print(f"\n  Sandbox ready: open {runtime.sandbox_url}\n", flush=True)
            print(f"bot listening on {runtime.url}", flush=True)
            await keep_heap(stop)
        finally:
            unhandle()
            await runtime.stop()
    finally:
        unhandle()


def settle_heap() -> int:
    """Collect, then freeze what survives out of the collector's full passes (``gc.freeze``):
    what start built lives as long as the process, and walking it stalled every click."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


try:
    _MALLOC_TRIM: Callable[[int], int] | None = ctypes.CDLL(None).malloc_trim
except (OSError, AttributeError, TypeError):  # not glibc (macOS, musl): nothing to call
    _MALLOC_TRIM = None


def trim_heap() -> bool:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``: a burst of
    requests leaves freed memory it keeps otherwise); whether any were (``False``: no-op)."""
    return _MALLOC_TRIM is not None and bool(_MALLOC_TRIM(0))


async def keep_heap(stop: asyncio.Event, every: float = 60.0) -> None:
    """``trim_heap`` every ``every`` seconds until ``stop`` is set (``python -m bot``)."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        trim_heap()
