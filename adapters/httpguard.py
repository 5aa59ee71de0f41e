"""Guards every HTTP listener of the project shares: refusal logs, Host checks, read limits."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
"""The names a loopback-only server answers to."""

Refuse = Callable[[int, str, str], web.StreamResponse]
"""Builds a refusal in the server's own error shape: ``(status, code, message)``."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Admit = Callable[[web.Request], web.StreamResponse | None]
"""A route's answer to a request it refuses whatever its body says; ``None``: admitted."""

_HOST: Final = re.compile(r"(?:\[(?P<bracketed>[^\]]*)\]|(?P<name>[^:\[][^:]*)?)(?::\d{1,5})?")
"""A ``Host`` header: a name or a bracketed address, then maybe a port."""
_RULE: Final = "_httpguard_body_rule"
"""The attribute of a handler ``with_body_rule`` made that holds its rule."""
_ADMISSION: Final = web.RequestKey[web.StreamResponse | None]("httpguard_admission")
"""A request's admission, once asked (``Expect: 100-continue`` asks before the guard)."""


@dataclass(frozen=True, slots=True)
class BodyRule:
    """What a route checks before the guard reads a request's body (``with_body_rule``)."""

    admit: Admit
    """Asked first: its refusal (no token) is the answer, no byte of the body read."""
    max_body: int | None
    """The route's body limit, when smaller than the server's."""

    def admission(self, request: web.Request) -> web.StreamResponse | None:
        """``admit``'s answer for ``request`` (asked once per request)."""
        if _ADMISSION not in request:
            request[_ADMISSION] = self.admit(request)
        return request[_ADMISSION]

    async def expect(self, request: web.Request) -> None:
        """The route's ``expect_handler``: ``100 Continue`` only when the body will be read
        (admitted, within the limit); else the guard answers with the refusal."""
        if self.admission(request) is None and not _over(request.content_length, self.max_body):
            await _default_expect_handler(request)


class BodyBudget:
    """Bytes of unauthenticated bodies read at once: a body over ``small`` takes its length
    (its limit if chunked) from ``total``, or is refused (503) unread."""

    def __init__(self, total: int, small: int = 65_536) -> None:
        self.total, self.small, self.taken = total, small, 0

    def take(self, length: int | None, limit: int | None) -> int:
        """What the body was charged (1: a small one, never refused); 0: refused."""
        size = length if length is not None else (limit or self.total)
        if size <= self.small:
            return 1
        if self.taken + size > self.total:
            return 0
        self.taken += size
        return size

    def give(self, charge: int) -> None:
        """Give back what ``take`` charged, once the body's request is answered."""
        if charge > 1:
            self.taken -= charge


def with_body_rule(handler: Handler, rule: BodyRule) -> Handler:
    """``handler``, carrying ``rule`` for ``guard_middleware`` to apply before the body is
    read (register the route with ``expect_handler=rule.expect`` too)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return await handler(request)

    setattr(handle, _RULE, rule)
    return handle


def _over(length: int | None, limit: int | None) -> bool:
    return limit is not None and (length or 0) > limit


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The host name of a ``Host`` header (lower case, no port, no brackets); ``None`` if
    it is not a well-formed ``host[:port]``."""
    value = header.strip().lower()
    match = _HOST.fullmatch(value) if value.isascii() else None
    name = match and (match["bracketed"] if match["bracketed"] is not None else match["name"])
    return (name or "").rstrip(".") or None


@dataclass(eq=False)
class RefusalLog:
    """Logs refused requests at most once per ``interval`` seconds per cause."""

    logger: logging.Logger
    _: KW_ONLY
    interval: float = 60.0
    clock: Callable[[], float] = time.monotonic
    counts: dict[str, int] = field(default_factory=dict, init=False)
    """Refusals per cause since start."""
    _last: dict[str, float] = field(default_factory=dict, init=False, repr=False)
    _since: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def due(self, cause: str) -> int:
        """Count one more of ``cause``; when it is time to log it, how many came since it
        was last logged (this one included), else 0."""
        self.counts[cause] = self.counts.get(cause, 0) + 1
        self._since[cause] = self._since.get(cause, 0) + 1
        now = self.clock()
        last = self._last.get(cause)
        if last is not None and now - last < self.interval:
            return 0
        self._last[cause] = now
        return self._since.pop(cause)

    def refused(self, cause: str, message: str, **facts: Any) -> None:
        """Count a refusal; log it unless this cause was logged within the interval."""
        if count := self.due(cause):
            self.logger.warning(
                f"refused: {message}", extra={"cause": cause, "refused": count, **facts}
            )

    def failed(self, cause: str, error: BaseException) -> None:
        """Log an unexpected error with its traceback, at most once per interval per cause."""
        if self.due(cause):
            self.logger.error(
                "the server could not handle a request",
                exc_info=(type(error), error, error.__traceback__),
                extra={"cause": cause},
            )


def guard_middleware(
    *,
    hosts: Callable[[str], bool] | None,
    refuse: Refuse,
    refusals: RefusalLog,
    body_timeout: float,
    streamed: Callable[[web.Request], bool] | None = None,
    max_body: Callable[[web.Request], int | None] | None = None,
    body_budget: BodyBudget | None = None,
) -> Any:
    """An ``aiohttp`` middleware: Host check (``hosts``; ``None``: any), body read in full in
    ``body_timeout`` (not ``streamed`` ones), limits (``max_body``, a ``BodyRule``: refused unread
    by length), ``body_budget`` for routes without a token, no uncaught tracebacks."""

    def closing(cause: str, why: str, status: int, code: str, text: str) -> web.StreamResponse:
        """A refusal counted under ``cause``, its connection closed (the body left unread)."""
        refusals.refused(cause, why)
        response = refuse(status, code, text)
        response.force_close()
        return response

    async def read(request: web.Request) -> web.StreamResponse | None:
        """Read the body within ``body_timeout`` (and its limit); a refusal if it cannot be."""
        try:
            async with asyncio.timeout(body_timeout):
                await request.read()
        except TimeoutError:
            why, message = "a request body not sent in time", "the request body did not arrive"
            message += f" within {body_timeout:g} s"
            return closing("slow_body", why, 408, "BODY_TIMEOUT", message)
        except web.HTTPRequestEntityTooLarge:
            why, message = "a request body over the server's limit", "the request body is too large"
            return closing("too_large", why, 413, "TOO_LARGE", message)
        except web.RequestPayloadError:
            why = "a body that does not decode as its headers say"
            message = "the body does not decode as its Content-Encoding says"
            request.content.feed_eof()  # nothing more is read (aiohttp would, and fail)
            return closing("bad_body", why, 400, "BAD_BODY", message)
        return None

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if hosts is not None:
            name = host_name(request.headers.get("Host", ""))
            if name is None or not hosts(name):
                shown = request.headers.get("Host", "")[:80].encode("ascii", "replace").decode()
                refusals.refused("unknown_host", "a Host this server does not serve", host=shown)
                return refuse(421, "MISDIRECTED", f"this server does not serve host {shown!r}")
        rule: BodyRule | None = getattr(request.match_info.handler, _RULE, None)
        if rule is not None and (refusal := rule.admission(request)) is not None:
            return refusal  # e.g. no token: answered before any of the body is read
        limits = (max_body(request) if max_body else None, rule.max_body if rule else None)
        limit = min((given for given in limits if given is not None), default=None)
        if _over(request.content_length, limit):
            why, message = "a request body over its route's limit", f"over {limit} bytes"
            return closing("too_large", why, 413, "TOO_LARGE", f"the request body is {message}")
        routed = request.match_info.http_exception is None  # 404 and 405 read nothing
        reads_body = request.body_exists and routed and not (streamed and streamed(request))
        # Nobody is authenticated yet (no token on the route): the body counts in the budget.
        budget = body_budget if reads_body and rule is None else None
        charge = 0 if budget is None else budget.take(request.content_length, limit)
        if budget is not None and not charge:
            why, message = "unauthenticated bodies over their budget", "too many request bodies"
            response = closing("bodies_busy", why, 503, "BUSY", f"{message} are arriving; retry")
            response.headers["Retry-After"] = "1"
            return response
        try:
            if limit is not None and reads_body:
                # A chunked body has no length to refuse it by: read up to the limit, no further.
                request = request.clone(client_max_size=limit)
            if reads_body and (refusal := await read(request)) is not None:
                return refusal
            try:
                return await handler(request)
            except web.HTTPException:
                raise
            except Exception as error:  # a bug: one traceback a minute, the client gets JSON
                route = request.match_info.route.resource
                where = route.canonical if route is not None else request.path
                refusals.failed(f"{type(error).__name__} in {where}", error)
                return refuse(500, "INTERNAL", "the server failed to handle the request")
        finally:
            if budget is not None:
                budget.give(charge)

    return guard
