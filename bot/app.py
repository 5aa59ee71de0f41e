"""Wiring: settings -> bolt app, Slack provider, service, HTTP server, and shutdown.

``start(settings)`` builds and starts everything for one mode and returns a ``Runtime``;
``Runtime.stop()`` ends it in order: refuse new questions, interrupt the pending ones
(their messages say so, their waiters get ``ASK_ABORTED``), drain, close.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from adapters.slack.bolt_app import build_app, close_web_client, events_handler, web_client
from adapters.slack.pending import MemoryPendingStore, PendingStore
from adapters.slack.provider import SlackQuestionProvider
from bot.config import Settings
from bot.gateway import Gateway
from bot.questions.service import UserQuestionService

__all__ = ["Runtime", "start"]

logger = logging.getLogger("bot")

SANDBOX_BOT_TOKEN = "xoxb-sandbox-token"
SANDBOX_CHANNEL = "C0SANDBOX"
SLACK_MAX_BODY_BYTES = 1_048_576
"""Largest request body the server takes (Slack's interaction payloads fit well within)."""
SOCKET_CONNECT_TIMEOUT = 30.0
"""Longest wait for the Socket Mode WebSocket to open at startup, in seconds."""


@dataclass
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
    dispose_provider: Any
    extras: list[Any] = field(default_factory=list)
    closers: list[Any] = field(default_factory=list)
    sandbox_url: str | None = None
    _stopping: bool = field(default=False, init=False, repr=False)

    async def stop(self) -> None:
        """Interrupt pending questions, drain background work, and close everything (once)."""
        if self._stopping:
            return
        self._stopping = True
        logger.info("shutting down", extra={"pending": self.provider.pending_count})
        self.gateway.close()
        try:
            await self.provider.aclose(grace=self.settings.shutdown_grace)
        except Exception as exc:  # e.g. the store is unreachable: still close the rest
            logger.warning("could not interrupt the pending questions", extra={"error": repr(exc)})
        self.gateway.end_polls()  # long-polls on questions of other processes answer now
        for close in reversed(self.closers):
            try:
                await close()
            except Exception as exc:  # keep closing the rest
                logger.warning("error while closing", extra={"error": repr(exc)})
        self.dispose_provider()
        await self.runner.cleanup()
        await self.store.close()
        logger.info("stopped")


async def _store(settings: Settings) -> PendingStore:
    if settings.redis_url is None:
        store: PendingStore = MemoryPendingStore()
    else:
        from adapters.slack.redis_store import RedisPendingStore

        store = RedisPendingStore(
            settings.redis_url.get_secret_value(), prefix=settings.redis_prefix
        )
    await store.start()
    return store


def _health(runtime_ref: dict[str, Any], mode: str) -> Any:
    async def healthz(request: web.Request) -> web.StreamResponse:
        runtime: Runtime | None = runtime_ref.get("runtime")
        body: dict[str, Any] = {"ok": True, "mode": mode}
        if runtime is not None:
            body["pending"] = runtime.provider.pending_count
            for extra in runtime.extras:
                status = getattr(extra, "status", None)
                if callable(status):
                    facts = status()
                    if inspect.isawaitable(facts):
                        facts = await facts
                    body.update(facts)
        return web.json_response(body)

    return healthz


class _SocketMode:
    """bolt's Socket Mode handler, with its connection state for ``/healthz``."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def status(self) -> dict[str, Any]:
        """``{"socket": "connected" | "disconnected"}``."""
        connected = await self.handler.client.is_connected()
        return {"socket": "connected" if connected else "disconnected"}

    async def close(self) -> None:
        """Close the WebSocket and the handler's HTTP session."""
        await self.handler.close_async()


async def _connect_socket_mode(app: AsyncApp, app_token: str) -> _SocketMode:
    """Open the Socket Mode connection; a refused app token fails here, not in a retry loop."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handler: Any = AsyncSocketModeHandler(  # slack_sdk's socket client is untyped
        app, app_token, logger=logging.getLogger("slack_bolt.socket_mode")
    )
    socket = _SocketMode(handler)
    try:
        # slack_sdk's connect() retries a failed apps.connections.open forever; ask once
        # first so a wrong SLACK_APP_TOKEN is a startup error with Slack's reason.
        try:
            handler.client.wss_uri = await handler.client.issue_new_wss_url()
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            raise RuntimeError(
                f"Socket Mode: Slack refused SLACK_APP_TOKEN in apps.connections.open "
                f"({error or 'no reason given'})"
            ) from exc
        await asyncio.wait_for(handler.connect_async(), SOCKET_CONNECT_TIMEOUT)
    except BaseException:
        await socket.close()
        raise
    return socket


async def start(settings: Settings) -> Runtime:
    """Build and start the bot for ``settings.mode``; returns the running ``Runtime``."""
    sandbox: Any = None
    signing_secret: str | None = None
    api_url = settings.slack_api_url
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    channel = settings.slack_channel
    if settings.mode == "sandbox":
        from adapters.slack.sandbox.server import SandboxServer

        signing_secret = secrets.token_hex(16)
        sandbox = SandboxServer(
            signing_secret=signing_secret, bot_token=SANDBOX_BOT_TOKEN, channel=SANDBOX_CHANNEL
        )
        api_url = await sandbox.start(host=settings.host, port=settings.sandbox_port)
        token = SANDBOX_BOT_TOKEN
        channel = channel or SANDBOX_CHANNEL
    elif settings.mode == "http" and settings.slack_signing_secret is not None:
        signing_secret = settings.slack_signing_secret.get_secret_value()
    assert token is not None and channel is not None

    client = web_client(token, base_url=api_url, timeout=10)

    async def release(store: PendingStore | None) -> None:
        """Undo a start that failed before the ``Runtime`` exists."""
        if store is not None:
            await store.close()
        await close_web_client(client)
        if sandbox is not None:
            await sandbox.stop()

    try:
        store = await _store(settings)  # a missing Redis is named before anything else
    except BaseException:
        await release(None)
        raise
    try:
        app = await build_app(
            client,
            signing_secret=signing_secret or "",
            verify_requests=settings.mode != "socket",
        )
    except BaseException as exc:
        await release(store)
        if isinstance(exc, SlackApiError):
            error = exc.response.get("error") if exc.response is not None else exc
            raise RuntimeError(f"Slack refused SLACK_BOT_TOKEN (auth.test: {error})") from exc
        if isinstance(exc, aiohttp.ClientError | TimeoutError):
            detail = str(exc) or type(exc).__name__
            raise RuntimeError(f"cannot reach Slack's Web API (auth.test): {detail}") from exc
        raise
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
    dispose = service.register_provider(provider)
    token_secret = settings.bot_api_token.get_secret_value() if settings.bot_api_token else None
    gateway = Gateway(service, provider, token=token_secret, max_body_bytes=settings.max_body_bytes)

    # MAX_BODY_BYTES limits the API (the gateway enforces it); Slack's payloads on
    # /slack/events carry whole messages and modals and need more room.
    web_app = web.Application(client_max_size=max(settings.max_body_bytes, SLACK_MAX_BODY_BYTES))
    runtime_ref: dict[str, Any] = {}
    web_app.router.add_get("/healthz", _health(runtime_ref, settings.mode))
    gateway.add_routes(web_app)
    if settings.mode in ("http", "sandbox"):

        web_app.router.add_post("/slack/events", events_handler(app, signing_secret or ""))

    # Handlers still running at shutdown get a short grace, not aiohttp's default minute.
    runner = web.AppRunner(
        web_app,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=max(1.0, settings.shutdown_grace),
    )
    try:
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
    except BaseException:  # e.g. the port is taken: release what was opened
        await runner.cleanup()
        await release(store)
        raise
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
        dispose_provider=dispose,
    )
    runtime_ref["runtime"] = runtime
    runtime.closers.append(lambda: close_web_client(client))  # closed last: after the rest

    if sandbox is not None:
        await sandbox.connect_bot(f"{url}/slack/events", service=service)
        runtime.sandbox_url = sandbox.page_url
        runtime.closers.append(sandbox.stop)
    try:
        if settings.mode == "socket":
            assert settings.slack_app_token is not None
            socket = await _connect_socket_mode(app, settings.slack_app_token.get_secret_value())
            runtime.extras.append(socket)
            runtime.closers.append(socket.close)
        if settings.dsh_host_url:
            from adapters.dsh.client import DshHostClient

            dsh_token = settings.dsh_host_token
            dsh = DshHostClient(
                settings.dsh_host_url,
                service,
                provider=provider,
                token=dsh_token.get_secret_value() if dsh_token else None,
            )
            await dsh.start()
            runtime.extras.append(dsh)
            runtime.closers.append(dsh.stop)
    except BaseException:
        await runtime.stop()  # a failed start leaves no server, socket or store behind
        raise

    for label, value in settings.describe():
        logger.info(f"{label}: {value}")
    logger.info(f"listening on {url}")
    return runtime


async def run(settings: Settings, *, ready: asyncio.Event | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop cleanly."""
    import signal

    runtime = await start(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if runtime.sandbox_url:
        print(f"\n  Sandbox ready: open {runtime.sandbox_url}\n", flush=True)
    print(f"bot listening on {runtime.url}", flush=True)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await runtime.stop()
