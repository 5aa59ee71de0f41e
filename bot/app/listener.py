"""The bot's HTTP listener: ``/healthz``, the API and (HTTP, sandbox modes) ``/slack/events``
behind one guard (hosts, body limits and timeouts, the connection cap); ports that will not open
are errors naming the setting to change."""

from __future__ import annotations

import errno
import socket
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web

from adapters.connections import ListenerLimits, start_listener
from adapters.httpguard import BodyBudget, guard_middleware
from adapters.slack.clicks.bolt_app import SLACK_MAX_BODY, events_handler
from bot.api.answers import request_problem
from bot.app.shutdown import handler_grace
from bot.settings.config import Settings
from bot.settings.text import show

if TYPE_CHECKING:
    from bot.app.runtime import Runtime

T = TypeVar("T")


async def serve(runtime: Runtime, signing_secret: str | None) -> web.AppRunner:
    """Serve ``runtime``'s ``/healthz``, API and (HTTP, sandbox) ``/slack/events`` on
    ``HOST:PORT``, refusals counted in its gateway's log."""
    settings, refusals = runtime.settings, runtime.gateway.refusals
    # MAX_BODY_BYTES limits the API (the gateway enforces it); Slack's payloads on
    # /slack/events carry whole messages and modals and need more room.
    limits = listener_limits(settings)
    served = settings.served_hosts
    guard = guard_middleware(
        hosts=served.__contains__ if served is not None else None,
        refuse=request_problem,
        refusals=refusals,
        body_timeout=limits.body_timeout,
        # /slack/events takes Slack's 1 MiB however large MAX_BODY_BYTES lets the API's be
        max_body=lambda request: SLACK_MAX_BODY if request.path == "/slack/events" else None,
        body_budget=BodyBudget(settings.max_unsigned_body_bytes),
    )
    web_app = web.Application(
        client_max_size=max(settings.max_body_bytes, SLACK_MAX_BODY), middlewares=[guard]
    )
    web_app.router.add_get("/healthz", runtime.health)
    runtime.gateway.add_routes(web_app)
    if settings.mode in ("http", "sandbox"):
        events = events_handler(runtime.app, signing_secret or "", refusals=refusals)
        web_app.router.add_post("/slack/events", events)
    # Handlers still running at shutdown get a short grace, not aiohttp's default minute.
    listener = start_listener(
        web_app,
        settings.host,
        settings.port,
        limits=limits,
        refusals=refusals,
        # aiohttp waits this twice: for the handler to finish, then for it to be cancelled.
        shutdown_timeout=handler_grace(settings.shutdown_grace) / 2,
    )
    # e.g. the port is taken: the error names PORT, and nothing is left open
    return await listening(listener, setting="PORT", host=settings.host, port=settings.port)


def listener_limits(settings: Settings) -> ListenerLimits:
    """The read timeouts and connection cap every listener of the bot applies."""
    return ListenerLimits(
        header_timeout=settings.header_timeout,
        body_timeout=settings.body_timeout,
        max_connections=settings.max_connections,
    )


class PortUnavailable(OSError):
    """A server could not listen on ``host:port``; the message names the setting."""

    def __str__(self) -> str:
        return str(self.strerror)


async def listening(opening: Awaitable[T], *, setting: str, host: str, port: int) -> T:
    """Await ``opening`` (a server starting on ``host:port``); a refused bind names ``setting``
    (``PORT``, ``SANDBOX_PORT``), a host name that does not resolve names ``HOST``."""
    try:
        return await opening
    except OSError as exc:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if isinstance(exc, socket.gaierror):  # getaddrinfo: its errno is an EAI_* code
            message = (
                f"HOST: {show(host)} does not resolve to an address ({exc.strerror}). Set HOST to "
                "an IP address of this machine (127.0.0.1, or 0.0.0.0 for all) or a name "
                "that resolves to one."
            )
        elif exc.errno == errno.EADDRINUSE:
            message = (
                f"{setting}: {where} is already in use (another bot, or another program). "
                f"Set {setting} to a free port, or to 0 for any free port."
            )
        elif exc.errno == errno.EADDRNOTAVAIL:
            message = f"HOST: {host} is not an address of this machine, so {where} cannot be used."
        elif exc.errno == errno.EACCES:
            message = (
                f"{setting}: {where} needs privileges this process lacks (ports below 1024). "
                f"Set {setting} to 1024 or above."
            )
        else:
            raise
        raise PortUnavailable(exc.errno, message) from exc
