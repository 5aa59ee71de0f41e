"""Wiring: settings -> bolt app, Slack provider, service, HTTP server, and shutdown.

``start(settings)`` builds and starts everything for one mode and returns a ``Runtime``;
``Runtime.stop()`` ends it in order: refuse new questions, release the questions owned by
no process (the API's, a dsh host's: they stay open for the next start), interrupt the
ones this process owns (their messages say so, their waiters get ``ASK_ABORTED``), drain,
close. At start the bot takes up the open questions owned by no process.

The whole stop has one deadline, ``SHUTDOWN_GRACE`` after it began (``_Deadline``): ending
the questions gets it less the HTTP drain (``_handler_grace``), and every step after gets
what is left of it, at least ``STEP_FLOOR``; a step not done in its time is abandoned and
logged ("shutdown: gave up on ..."), so an unresponsive Slack or Redis cannot hold the
process up.

Every part is entered once on one ``contextlib.AsyncExitStack`` and released in reverse
order: by ``Runtime.stop()``, or at once when a later part fails to start, so a failed start
leaves no server, socket, session or store behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dsh.client import DshHostClient
from adapters.httpguard import RefusalLog, guard_middleware
from adapters.listener import ListenerLimits, start_listener
from adapters.slack.clicks.bolt_app import (
    SLACK_MAX_BODY,
    build_app,
    close_web_client,
    events_handler,
    web_client,
)
from adapters.slack.pacing.budget import Budget, RedisBudget
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.stores import MemoryPendingStore, PendingStore, SqlitePendingStore
from bot import heap
from bot.access import OpenQuestionCaps
from bot.api_answers import request_problem
from bot.config import Settings
from bot.gateway import Gateway
from bot.health import Health
from bot.logs import redact_url
from bot.ports import listening
from bot.questions.service import UserQuestionService
from bot.socket_mode import SocketMode, not_slack_json, slack_reason
from bot.webhook_outbox import MemoryOutbox, Outbox, RedisOutbox, SqliteOutbox
from bot.webhooks import Webhooks

if TYPE_CHECKING:
    from adapters.slack.sandbox.site import SandboxServer
    from adapters.slack.stores.redis import RedisPendingStore
    from adapters.slack.stores.trail import TrailReader

__all__ = ["Runtime", "SocketMode", "open_store", "read_trail", "start"]

logger = logging.getLogger("bot")

SANDBOX_HOST = "127.0.0.1"
"""The sandbox (page and stand-in Web API) listens here and nowhere else."""
SANDBOX_CHANNEL = "C0SANDBOX"
HANDLER_GRACE = 0.5
"""At most this much of SHUTDOWN_GRACE goes to the HTTP requests still running at the end."""
STEP_FLOOR = 0.25
"""Each step of a stop gets at least this long, even once SHUTDOWN_GRACE is used up."""
DRAIN_MARGIN = 0.1
"""The provider's own grace at a stop ends this long before the step that runs it."""


class _Deadline:
    """When a stop must be over: ``grace`` seconds after it began (at ``begin``, or at the
    first ``left`` when a failed start releases its parts)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._at: float | None = None

    def begin(self) -> None:
        """The stop begins now (once)."""
        if self._at is None:
            self._at = asyncio.get_running_loop().time() + self.grace

    def left(self, reserve: float = 0.0) -> float:
        """Seconds until ``reserve`` seconds before the deadline (negative once past)."""
        self.begin()
        assert self._at is not None
        return self._at - reserve - asyncio.get_running_loop().time()


@dataclass(eq=False)
class Runtime:
    """A running bot: its parts, its address, and how to stop it."""

    settings: Settings
    service: UserQuestionService
    provider: SlackQuestionProvider
    gateway: Gateway
    app: AsyncApp
    store: PendingStore
    runner: web.AppRunner
    url: str
    resources: contextlib.AsyncExitStack = field(repr=False)
    """Everything ``start`` entered, released in reverse order by ``stop``."""
    sandbox: SandboxServer | None = None
    socket: SocketMode | None = None
    dsh: DshHostClient | None = None
    deadline: _Deadline = field(default_factory=lambda: _Deadline(0.0), repr=False)
    """The stop's deadline, shared by every step ``resources`` holds."""
    _stopping: bool = field(default=False, init=False, repr=False)

    @property
    def sandbox_url(self) -> str | None:
        """The sandbox's page (sandbox mode only)."""
        return self.sandbox.page_url if self.sandbox is not None else None

    async def stop(self) -> None:
        """Interrupt pending questions, drain background work, and close everything (once)."""
        if self._stopping:
            return
        self._stopping = True
        self.deadline.begin()
        await self.resources.aclose()
        logger.info("stopped")


def _logged(what: str, close: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """``close``, logging its failure instead of raising it, so the rest still closes."""

    async def closing() -> None:
        try:
            await close()
        except Exception as exc:
            logger.warning("error while closing", extra={"part": what, "error": repr(exc)})

    return closing


def _bounded(
    what: str,
    close: Callable[[], Awaitable[None]],
    deadline: _Deadline,
    *,
    doing: str,
    reserve: float = 0.0,
) -> Callable[[], Awaitable[None]]:
    """``close`` (logged as ``_logged``), abandoned when ``reserve`` seconds before
    ``deadline`` come (after ``STEP_FLOOR`` at least); ``doing`` says what was abandoned."""

    async def closing() -> None:
        seconds = max(deadline.left(reserve), STEP_FLOOR)
        timeout = asyncio.timeout(seconds)
        try:
            async with timeout:
                await _logged(what, close)()
        except TimeoutError:
            if not timeout.expired():
                raise
            logger.warning(
                f"shutdown: gave up on {doing} after {seconds:.2f} s",
                extra={"part": what, "shutdown_grace": deadline.grace},
            )

    return closing


async def open_store(settings: Settings) -> PendingStore:
    """The store ``settings`` choose (memory, SQLite or Redis), started."""
    store: PendingStore
    if settings.store == "memory":  # kept RETENTION_DAYS as the others (not silently 90)
        store = MemoryPendingStore(finished_ttl=settings.retention_days * 86400)
    else:
        store = _durable_store(settings)
    await store.start()
    return store


def read_trail(settings: Settings) -> contextlib.AbstractAsyncContextManager[TrailReader]:
    """The audit trail of the durable store ``settings`` choose, opened for reading only
    (``python -m bot audit``): it writes nothing and starts nothing, so an export run while
    a bot is down neither passes for a live process nor sweeps that bot's questions."""
    return _durable_store(settings).reading()


async def _outbox(settings: Settings) -> Outbox:
    """The webhook outbox, in the backend of the store ``settings`` choose."""
    if settings.store == "sqlite":
        return await SqliteOutbox.open(settings.store_path)
    if settings.store == "redis" and settings.redis_url is not None:
        from redis.asyncio import Redis

        client = Redis.from_url(settings.redis_url.get_secret_value())
        return RedisOutbox(client, settings.redis_prefix)
    return MemoryOutbox()


def _durable_store(settings: Settings) -> SqlitePendingStore | RedisPendingStore:
    """The SQLite or Redis store ``settings`` choose, not started."""
    retention = settings.retention_days * 86400
    if settings.store == "sqlite":
        return SqlitePendingStore(settings.store_path, retention=retention)
    if settings.store != "redis" or settings.redis_url is None:
        raise ValueError(f"the {settings.store} store is not kept beyond its process")
    from adapters.slack.stores.redis import RedisPendingStore

    return RedisPendingStore(
        settings.redis_url.get_secret_value(),
        prefix=settings.redis_prefix,
        finished_ttl=retention,
    )


def _budget(settings: Settings) -> Budget | None:
    """Several processes on one Redis share one app's rate-limit budget.

    A ``REDIS_URL`` redis-py cannot use (``?socket_timeout=abc``, an unknown scheme) is a
    startup error naming the setting, the password masked."""
    if settings.redis_url is None:
        return None
    url = settings.redis_url.get_secret_value()
    try:
        return RedisBudget.from_url(url, prefix=settings.redis_prefix)
    except (ValueError, TypeError) as exc:
        password = _password(url)
        reason = str(exc).replace(password, "***") if password else str(exc)
        raise RuntimeError(
            f"REDIS_URL={redact_url(url)} is not a usable Redis URL: {reason}"
        ) from None


def _password(url: str) -> str:
    """The password in ``url`` ("" when none, or when it does not parse)."""
    try:
        return urlsplit(url).password or ""
    except ValueError:
        return ""


async def start(settings: Settings) -> Runtime:
    """Build and start the bot for ``settings.mode``; returns the running ``Runtime``.

    When any part fails to start, the parts already started are released (in reverse
    order) before the error propagates.
    """
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
    deadline = _Deadline(settings.shutdown_grace)
    api_url = settings.slack_api_url
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    channel = settings.slack_channel
    if settings.mode == "sandbox":
        from adapters.slack.sandbox.site import SandboxServer

        signing_secret = secrets.token_hex(16)
        token = f"xoxb-sandbox-{secrets.token_hex(24)}"  # the stand-in's, new at every start
        # SLACK_CHANNEL, when set, is the id of the sandbox's channel: the default
        # destination and the page's channel are one conversation.
        sandbox = SandboxServer(
            signing_secret=signing_secret,
            bot_token=token,
            channel=channel or SANDBOX_CHANNEL,
            limits=_limits(settings),
        )
        stack.push_async_callback(
            _bounded("sandbox", sandbox.stop, deadline, doing="stopping the sandbox")
        )
        # The sandbox has no authentication: loopback only, whatever HOST says.
        api_url = await listening(
            sandbox.start(host=SANDBOX_HOST, port=settings.sandbox_port),
            setting="SANDBOX_PORT",
            host=SANDBOX_HOST,
            port=settings.sandbox_port,
        )
        channel = channel or SANDBOX_CHANNEL
    elif settings.mode == "http" and settings.slack_signing_secret is not None:
        signing_secret = settings.slack_signing_secret.get_secret_value()
    assert token is not None and channel is not None

    client = web_client(
        token,
        base_url=api_url,
        timeout=10,
        limits=SlackLimits(time_scale=settings.slack_rate_scale),
        budget=_budget(settings),
    )
    stack.push_async_callback(
        _bounded(
            "web client",
            lambda: close_web_client(client),
            deadline,
            doing="closing the Slack Web API session",
        )
    )
    store = await open_store(settings)  # a missing Redis is named before anything else
    stack.push_async_callback(
        _bounded("store", store.close, deadline, doing="closing the pending store")
    )
    app = await _app(client, settings, signing_secret)
    provider = SlackQuestionProvider(
        app,
        channel=channel,
        allowed_users=settings.slack_allowed_users or None,
        allowed_usergroups=settings.slack_allowed_usergroups or None,
        mention=settings.slack_mention,
        timeout=settings.question_timeout,
        store=store,
    )
    service = UserQuestionService()
    stack.callback(service.register_provider(provider))
    refusals = RefusalLog(logging.getLogger("bot.http"))
    webhooks = Webhooks(
        await _outbox(settings),
        lambda request_id: gateway.webhook_view(request_id),
        provider.wait_ended,
        settings.api_tokens,
        hosts=frozenset(settings.webhook_hosts),
        allow_private=settings.webhook_allow_private,
    )
    stack.push_async_callback(
        _bounded("webhooks", webhooks.stop, deadline, doing="stopping the webhooks")
    )
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
        approve=lambda view, options, signal: provider.ask_approval(
            view,
            options=options,
            approvers=settings.dsh_approvers or None,
            approver_groups=settings.dsh_approver_usergroups or None,
            signal=signal,
        ),
        webhooks=webhooks,
    )
    webhooks.start()
    # The open questions owned by no process (asked over the API before a restart, or
    # on another process) are this process's to serve too: their deadlines are kept here.
    adopted = await provider.resume()
    if adopted:
        counted = gateway.take_up(adopted)  # in the API's open-question caps until they end
        logger.info(
            f"took up {len(adopted)} open questions owned by no process ({counted} of the API)"
        )
    health = Health(settings.mode, provider)
    health.gateway = gateway
    runner = await _serve(settings, gateway, health, app, signing_secret, refusals)
    stack.push_async_callback(
        _bounded("http server", runner.cleanup, deadline, doing="closing the HTTP server")
    )
    port = runner.addresses[0][1]
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    url = f"http://{host}:{port}"
    runtime = Runtime(
        settings=settings,
        service=service,
        provider=provider,
        gateway=gateway,
        app=app,
        store=store,
        runner=runner,
        url=url,
        resources=stack,
        sandbox=sandbox,
        deadline=deadline,
    )
    if sandbox is not None:
        # The demo's tool approval names no approvers (DSH_APPROVERS are the dsh host's):
        # anyone who may answer in the sandbox may decide it.
        await sandbox.connect_bot(f"{url}/slack/events", service=service, approvals=provider)
    if settings.mode == "socket":
        assert settings.slack_app_token is not None
        socket = SocketMode(app, settings.slack_app_token.get_secret_value())
        stack.push_async_callback(
            _bounded(
                "socket mode", socket.close, deadline, doing="closing the Socket Mode connection"
            )
        )
        await socket.connect()
        runtime.socket = health.socket = socket
    if settings.dsh_host_url:
        dsh_token = settings.dsh_host_token
        dsh = DshHostClient(
            settings.dsh_host_url,
            service,
            provider=provider,
            token=dsh_token.get_secret_value() if dsh_token else None,
            protocol=settings.dsh_protocol,
            review=settings.dsh_review_policy,
            approvers=settings.dsh_approvers or None,
            approver_groups=settings.dsh_approver_usergroups or None,
        )
        stack.push_async_callback(
            _bounded("dsh host client", dsh.stop, deadline, doing="stopping the dsh host client")
        )
        await dsh.start()
        runtime.dsh = health.dsh = dsh
    # Entered last, so the first thing stop() does: refuse new questions, interrupt the
    # pending ones while Slack, the store and the server are all still there (the dsh host's
    # first: they are released, not ended, so a restarted bot takes them up again).
    dsh_client = runtime.dsh
    stack.push_async_callback(lambda: _interrupt(settings, provider, gateway, deadline, dsh_client))
    return runtime


async def _app(client: AsyncWebClient, settings: Settings, signing_secret: str | None) -> AsyncApp:
    """The bolt app; Slack refusing the token or being out of reach is a clear startup error."""
    try:
        return await build_app(
            client,
            signing_secret=signing_secret or "",
            verify_requests=settings.mode != "socket",
        )
    except SlackApiError as exc:
        unexpected = not_slack_json(exc, "auth.test", client)
        if unexpected is not None:  # a wrong SLACK_API_URL, a proxy's error page
            raise RuntimeError(unexpected) from exc
        reason = slack_reason(exc) or "no reason given"
        raise RuntimeError(f"Slack refused SLACK_BOT_TOKEN (auth.test: {reason})") from exc
    except (aiohttp.ClientError, TimeoutError) as exc:
        detail = str(exc) or type(exc).__name__
        raise RuntimeError(f"cannot reach Slack's Web API (auth.test): {detail}") from exc


async def _serve(
    settings: Settings,
    gateway: Gateway,
    health: Health,
    app: AsyncApp,
    signing_secret: str | None,
    refusals: RefusalLog,
) -> web.AppRunner:
    """Serve ``/healthz``, the API and (HTTP, sandbox) ``/slack/events`` on ``HOST:PORT``."""
    # MAX_BODY_BYTES limits the API (the gateway enforces it); Slack's payloads on
    # /slack/events carry whole messages and modals and need more room.
    limits = _limits(settings)
    served = settings.served_hosts
    guard = guard_middleware(
        hosts=served.__contains__ if served is not None else None,
        refuse=request_problem,
        refusals=refusals,
        body_timeout=limits.body_timeout,
        max_body=_slack_body_limit,
    )
    web_app = web.Application(
        client_max_size=max(settings.max_body_bytes, SLACK_MAX_BODY), middlewares=[guard]
    )
    web_app.router.add_get("/healthz", health.handle)
    gateway.add_routes(web_app)
    if settings.mode in ("http", "sandbox"):
        events = events_handler(app, signing_secret or "", refusals=refusals)
        web_app.router.add_post("/slack/events", events)
    # Handlers still running at shutdown get a short grace, not aiohttp's default minute.
    listener = start_listener(
        web_app,
        settings.host,
        settings.port,
        limits=limits,
        refusals=refusals,
        # aiohttp waits this twice: for the handler to finish, then for it to be cancelled.
        shutdown_timeout=_handler_grace(settings) / 2,
    )
    # e.g. the port is taken: the error names PORT, and nothing is left open
    runner, _ = await listening(listener, setting="PORT", host=settings.host, port=settings.port)
    return runner


def _slack_body_limit(request: web.Request) -> int | None:
    """``/slack/events`` takes Slack's 1 MiB however large ``MAX_BODY_BYTES`` lets the API's
    bodies be: a larger, unsigned body is refused before it is read."""
    return SLACK_MAX_BODY if request.path == "/slack/events" else None


def _limits(settings: Settings) -> ListenerLimits:
    """The read timeouts and connection cap every listener of the bot applies."""
    return ListenerLimits(
        header_timeout=settings.header_timeout,
        body_timeout=settings.body_timeout,
        max_connections=settings.max_connections,
    )


def _handler_grace(settings: Settings) -> float:
    """The part of ``SHUTDOWN_GRACE`` left to requests still being handled at the end."""
    return min(HANDLER_GRACE, settings.shutdown_grace / 4)


async def _interrupt(
    settings: Settings,
    provider: SlackQuestionProvider,
    gateway: Gateway,
    deadline: _Deadline,
    dsh: DshHostClient | None = None,
) -> None:
    """Refuse new questions, end the pending ones this process owns (``ASK_ABORTED``),
    answer the long-polls; by ``deadline`` less the HTTP drain.

    The API's waiters (``gateway.close``) and a dsh host's requests are released first:
    left pending for the next bot, not ended. Given up at the deadline (an unresponsive
    store or Slack), the questions not ended yet stay as the store has them.
    """
    logger.info("shutting down", extra={"pending": provider.pending_count})
    reserve = _handler_grace(settings)
    gateway.close()

    async def release_and_end() -> None:
        if dsh is not None:
            await _logged("dsh host client", dsh.stop)()
        try:  # SHUTDOWN_GRACE in all: what the dsh client took is not given again
            # (its own grace ends a little before this step's, so its drain, which cancels
            # what is still running, is not itself cut short)
            await provider.aclose(grace=max(0.0, deadline.left(reserve + DRAIN_MARGIN)))
        except Exception as exc:  # e.g. the store is unreachable: still close the rest
            logger.warning("could not interrupt the pending questions", extra={"error": repr(exc)})

    try:
        ending = _bounded(
            "questions",
            release_and_end,
            deadline,
            doing="ending this process's pending questions",
            reserve=reserve,
        )
        await ending()
    finally:
        gateway.end_polls()  # long-polls on questions of other processes answer now


async def run(settings: Settings, *, ready: asyncio.Event | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop cleanly.

    The signals are handled from the start: one during startup (the Socket Mode connect
    can take its 30 s) cancels the start, which releases what it opened, and returns as a
    stop does. A second signal while stopping has its default effect.
    """
    import signal

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    starting = asyncio.ensure_future(start(settings))
    signals = (signal.SIGTERM, signal.SIGINT)

    def on_signal(signum: int) -> None:
        for handled in signals:
            loop.remove_signal_handler(handled)
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
            if not stop.is_set() or _cancelling():
                raise  # cancelled from outside, not by a signal
            logger.info("stopped during startup")
            return
        try:
            frozen = heap.settle()  # what start built lives as long as the process (bot/heap.py)
            logger.info("heap: %d objects kept out of full garbage collections", frozen)
            if runtime.sandbox_url:
                print(f"\n  Sandbox ready: open {runtime.sandbox_url}\n", flush=True)
            print(f"bot listening on {runtime.url}", flush=True)
            if ready is not None:
                ready.set()
            await stop.wait()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
            await runtime.stop()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
