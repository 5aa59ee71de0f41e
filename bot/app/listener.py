"""The bot's HTTP listener: ``/healthz``, the API and (HTTP, sandbox modes) ``/slack/events``
behind one guard (hosts, body limits and timeouts, the connection cap)."""

from __future__ import annotations

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from adapters.connections import ListenerLimits, start_listener
from adapters.httpguard import BodyBudget, RefusalLog, guard_middleware
from adapters.slack.clicks.bolt_app import SLACK_MAX_BODY, events_handler
from bot.api.answers import request_problem
from bot.api.gateway import Gateway
from bot.app.health import Health
from bot.app.ports import listening
from bot.app.shutdown import handler_grace
from bot.settings.config import Settings

__all__ = ["listener_limits", "serve"]


async def serve(
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
    limits = listener_limits(settings)
    served = settings.served_hosts
    guard = guard_middleware(
        hosts=served.__contains__ if served is not None else None,
        refuse=request_problem,
        refusals=refusals,
        body_timeout=limits.body_timeout,
        max_body=_slack_body_limit,
        body_budget=BodyBudget(settings.max_unsigned_body_bytes),
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
        shutdown_timeout=handler_grace(settings) / 2,
    )
    # e.g. the port is taken: the error names PORT, and nothing is left open
    runner, _ = await listening(listener, setting="PORT", host=settings.host, port=settings.port)
    return runner


def _slack_body_limit(request: web.Request) -> int | None:
    """``/slack/events`` takes Slack's 1 MiB however large ``MAX_BODY_BYTES`` lets the API's
    bodies be: a larger, unsigned body is refused before it is read."""
    return SLACK_MAX_BODY if request.path == "/slack/events" else None


def listener_limits(settings: Settings) -> ListenerLimits:
    """The read timeouts and connection cap every listener of the bot applies."""
    return ListenerLimits(
        header_timeout=settings.header_timeout,
        body_timeout=settings.body_timeout,
        max_connections=settings.max_connections,
    )
