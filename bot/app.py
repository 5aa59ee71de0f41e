"""Wiring: settings -> bolt app, Slack provider, service, HTTP server, and shutdown.

``start(settings)`` builds and starts everything for one mode and returns a ``Runtime``;
``Runtime.stop()`` ends it in order: refuse new questions, interrupt the pending ones
(their messages say so, their waiters get ``ASK_ABORTED``), drain, close.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.pending import MemoryPendingStore, PendingStore
from adapters.slack.provider import SlackQuestionProvider
from bot.config import Settings
from bot.gateway import Gateway
from bot.service import UserQuestionService

__all__ = ["Runtime", "start"]

logger = logging.getLogger("bot")

SANDBOX_BOT_TOKEN = "xoxb-sandbox-token"
SANDBOX_CHANNEL = "C0SANDBOX"


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

    async def stop(self) -> None:
        """Interrupt pending questions, drain background work, and close everything."""
        logger.info("shutting down", extra={"pending": self.provider.pending_count})
        self.gateway.close()
        await self.provider.aclose(grace=self.settings.shutdown_grace)
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
                    body.update(status())
        return web.json_response(body)

    return healthz


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

    client_args: dict[str, Any] = {"token": token, "timeout": 10}
    if api_url:
        client_args["base_url"] = api_url
    client = AsyncWebClient(**client_args)
    app = AsyncApp(
        client=client,
        signing_secret=signing_secret or "",
        process_before_response=True,
        request_verification_enabled=settings.mode != "socket",
        logger=logging.getLogger("slack_bolt"),
    )
    store = await _store(settings)
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
    gateway = Gateway(service, provider, token=token_secret)

    web_app = web.Application(client_max_size=settings.max_body_bytes)
    runtime_ref: dict[str, Any] = {}
    web_app.router.add_get("/healthz", _health(runtime_ref, settings.mode))
    gateway.add_routes(web_app)
    if settings.mode in ("http", "sandbox"):

        async def slack_events(request: web.Request) -> web.StreamResponse:
            bolt_response = await app.async_dispatch(await to_bolt_request(request))
            return await to_aiohttp_response(bolt_response)

        web_app.router.add_post("/slack/events", slack_events)

    runner = web.AppRunner(web_app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
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

    if sandbox is not None:
        await sandbox.connect_bot(f"{url}/slack/events", service=service)
        runtime.sandbox_url = sandbox.page_url
        runtime.closers.append(sandbox.stop)
    if settings.mode == "socket":
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        assert settings.slack_app_token is not None
        handler = AsyncSocketModeHandler(app, settings.slack_app_token.get_secret_value())
        await handler.connect_async()
        runtime.extras.append(handler)
        runtime.closers.append(handler.close_async)
    if settings.dsh_host_url:
        from adapters.dsh.client import DshHostClient

        dsh = DshHostClient(
            settings.dsh_host_url,
            service,
            provider=provider,
            token=settings.dsh_host_token.get_secret_value() if settings.dsh_host_token else None,
        )
        await dsh.start()
        runtime.extras.append(dsh)
        runtime.closers.append(dsh.stop)

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
