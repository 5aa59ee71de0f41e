"""Guards every HTTP listener of the project shares: refusal logs, Host checks, read limits."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import HttpVersion11, web

__all__ = [
    "LOOPBACK_NAMES",
    "BodyBudget",
    "BodyRule",
    "RefusalLog",
    "Refuse",
    "guard_middleware",
    "host_name",
    "is_loopback",
    "served_hosts",
    "with_body_rule",
]

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
"""The names a loopback-only server answers to."""
REFUSAL_INTERVAL: Final = 60.0
"""Seconds between two log lines about refusals of one cause."""

Refuse = Callable[[int, str, str], web.StreamResponse]
"""Builds a refusal in the server's own error shape: ``(status, code, message)``."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Admit = Callable[[web.Request], web.StreamResponse | None]
"""A route's answer to a request it refuses whatever its body says; ``None``: admitted."""

_RULE: Final = "_httpguard_body_rule"
"""The attribute of a handler ``with_body_rule`` made that holds its rule."""
_ADMISSION: Final = web.RequestKey[web.StreamResponse | None]("httpguard_admission")
"""A request's admission, once asked (``Expect: 100-continue`` asks before the guard)."""


@dataclass(frozen=True, slots=True)
class BodyRule:
    """What a route checks before the guard reads a request's body (``with_body_rule``)."""

    admit: Admit | None = None
    """Asked first: a refusal (a missing or wrong token) is the answer, no byte of the body
    read nor waited for; ``None``: every request is admitted."""
    max_body: int | None = None
    """The route's body limit, when smaller than the server's: a ``Content-Length`` over
    it is refused before the body is read, a chunked body once it runs over."""

    def admission(self, request: web.Request) -> web.StreamResponse | None:
        """``admit``'s answer for ``request`` (asked once per request)."""
        if self.admit is None:
            return None
        if _ADMISSION not in request:
            request[_ADMISSION] = self.admit(request)
        return request[_ADMISSION]

    async def expect(self, request: web.Request) -> None:
        """The route's ``expect_handler``: ``100 Continue`` only when the body will be read
        (admitted, its ``Content-Length`` within the limit); otherwise the client is not
        asked for its body and the guard answers with the refusal."""
        if self.admission(request) is not None or _over(request.content_length, self.max_body):
            return
        expect = request.headers.get("Expect", "")
        if request.version != HttpVersion11:
            return
        if expect.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own bytes are still to come


class BodyBudget:
    """Bytes of unauthenticated request bodies being read at once: a body over ``small``
    takes its length (its limit if chunked) from ``total``, or is refused (503) unread."""

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


def _rule_of(request: web.Request) -> BodyRule | None:
    """The body rule of the route ``request`` was routed to, if it has one."""
    rule = getattr(request.match_info.handler, _RULE, None)
    return rule if isinstance(rule, BodyRule) else None


def _over(length: int | None, limit: int | None) -> bool:
    return limit is not None and (length or 0) > limit


def _smallest(*limits: int | None) -> int | None:
    given = [limit for limit in limits if limit is not None]
    return min(given) if given else None


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
    if not value or not value.isascii():
        return None
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return None
        name, rest = value[1:end], value[end + 1 :]
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and len(rest) <= 6):
        return None
    return name.rstrip(".") or None


class RefusalLog:
    """Logs refused requests at most once per ``interval`` seconds per cause."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = REFUSAL_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        """Refusals per cause since start."""

    def due(self, cause: str) -> int:
        """Count one more of ``cause``; when it is time to log it, how many came since it
        was last logged (this one included), else 0."""
        self.counts[cause] = self.counts.get(cause, 0) + 1
        self._since[cause] = self._since.get(cause, 0) + 1
        now = self._clock()
        last = self._last.get(cause)
        if last is not None and now - last < self._interval:
            return 0
        self._last[cause] = now
        return self._since.pop(cause)

    def refused(self, cause: str, message: str, **facts: Any) -> None:
        """Count a refusal; log it unless this cause was logged within the interval."""
        if count := self.due(cause):
            self._logger.warning(
                f"refused: {message}", extra={"cause": cause, "refused": count, **facts}
            )

    def failed(self, cause: str, error: BaseException) -> None:
        """Log an unexpected error with its traceback, at most once per interval per cause."""
        if self.due(cause):
            self._logger.error(
                "the server could not handle a request",
                exc_info=(type(error), error, error.__traceback__),
                extra={"cause": cause},
            )


def guard_middleware(
    *,
    hosts: Callable[[str], bool] | None,
    refuse: Refuse,
    refusals: RefusalLog,
    body_timeout: float | None,
    streamed: Callable[[web.Request], bool] | None = None,
    max_body: Callable[[web.Request], int | None] | None = None,
    body_budget: BodyBudget | None = None,
) -> Any:
    """An ``aiohttp`` middleware: Host check (``hosts``; ``None``: any), body read in full
    within ``body_timeout`` before the handler (not for ``streamed`` requests), body limits
    (``max_body``, a route's ``BodyRule``: refused before any byte is read when the length
    says so), ``body_budget`` for routes without a token, and no uncaught tracebacks."""

    def closing(cause: str, why: str, status: int, code: str, text: str) -> web.StreamResponse:
        """A refusal counted under ``cause``, its connection closed (the body left unread)."""
        refusals.refused(cause, why)
        response = refuse(status, code, text)
        response.force_close()
        return response

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if hosts is not None:
            name = host_name(request.headers.get("Host", ""))
            if name is None or not hosts(name):
                shown = request.headers.get("Host", "")[:80].encode("ascii", "replace").decode()
                refusals.refused("unknown_host", "a Host this server does not serve", host=shown)
                return refuse(421, "MISDIRECTED", f"this server does not serve host {shown!r}")
        routed = request.match_info.http_exception is None  # 404 and 405 read nothing
        picked = streamed is not None and streamed(request)
        reads_body = request.body_exists and routed and not picked
        rule = _rule_of(request)
        if rule is not None:
            refusal = rule.admission(request)
            if refusal is not None:  # e.g. no token: answered before any of the body is read
                return refusal
        limit = _smallest(
            None if max_body is None else max_body(request),
            None if rule is None else rule.max_body,
        )
        if _over(request.content_length, limit):
            why = "a request body over its route's limit"
            return closing(
                "too_large", why, 413, "TOO_LARGE", f"the request body is over {limit} bytes"
            )
        # Nobody is authenticated yet (no token on the route): the body counts in the budget.
        budget = body_budget if reads_body and not (rule and rule.admit) else None
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
            if body_timeout is not None and reads_body:
                try:
                    async with asyncio.timeout(body_timeout):
                        await request.read()
                except TimeoutError:
                    message = f"the request body did not arrive within {body_timeout:g} s"
                    why = "a request body not sent in time"
                    return closing("slow_body", why, 408, "BODY_TIMEOUT", message)
                except web.HTTPRequestEntityTooLarge:
                    why = "a request body over the server's limit"
                    return closing(
                        "too_large", why, 413, "TOO_LARGE", "the request body is too large"
                    )
                except web.RequestPayloadError:
                    why = "a body that does not decode as its headers say"
                    message = "the body does not decode as its Content-Encoding says"
                    request.content.feed_eof()  # nothing more is read (aiohttp would, and fail)
                    return closing("bad_body", why, 400, "BAD_BODY", message)
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


def served_hosts(names: Iterable[str]) -> Callable[[str], bool]:
    """A ``hosts`` check for ``guard_middleware``: exactly these names (any case)."""
    allowed = frozenset(name.lower().strip("[]").rstrip(".") for name in names)
    return allowed.__contains__
