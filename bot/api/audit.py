"""The audit trail out of the store as JSON lines: ``GET /v1/audit`` (only what the caller's
token may see) and ``python -m bot audit`` (everything)."""

from __future__ import annotations

import contextlib
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Final

from aiohttp import web

from adapters.slack import AuditEvent
from bot.api.answers import request_problem

_log = logging.getLogger("bot.audit")

AUDIT_HELP: Final = """\
Export the audit trail of the configured store (STORE, STORE_PATH, REDIS_URL) as JSON
lines: every question asked, every click that changed something, every outcome with who
and the exact answer or reason, each with the SHA-256 of what people were shown.
It only reads: nothing is written to the store, and no heartbeat or orphan sweep runs.
"""

_AGE: Final = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_LAST: Final = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
"""The last time a range may name (``datetime`` ends at the year 9999)."""


def parse_time(text: str, now: float | None = None) -> float:
    """Seconds since the epoch for an ISO 8601 time (tried first: ``20261201`` is a day), epoch
    seconds, or an age before ``now``; anything not between 1970 and 9999 is a ``ValueError``."""
    value = text.strip()
    age = _AGE.fullmatch(value)
    if age is not None:
        moment = (time.time() if now is None else now) - float(age[1]) * _UNIT[age[2]]
    else:
        moment = _iso_or_number(text, value)
    if not (math.isfinite(moment) and 0 <= moment < _LAST):
        raise ValueError(f"{text!r} is out of range: a time between 1970 and 9999 is needed")
    return moment


def parse_range(
    since: str, until: str | None, now: float | None = None
) -> tuple[float, float | None]:
    """``(since, until)`` parsed (``parse_time``); a ``ValueError`` when ``until`` comes
    before ``since`` (a range that could hold nothing is a mistake, not an empty export)."""
    now = time.time() if now is None else now
    start = parse_time(since, now)
    end = None if until is None else parse_time(until, now)
    if end is not None and end < start:
        raise ValueError(f"until ({until!r}) is before since ({since!r})")
    return start, end


def _iso_or_number(text: str, value: str) -> float:
    with contextlib.suppress(ValueError):  # ISO 8601 (Z for UTC too); no zone: UTC
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))  # also "2024-06-01Z"
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use ISO 8601 (2026-12-01T08:00:00Z), epoch seconds,"
            " or an age such as 24h or 7d"
        ) from None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AuditSource = Callable[[float, float | None], AsyncIterator[AuditEvent]]
"""Yields the audit events of a time range (``since``, ``until``), oldest first."""
Visible = Callable[[web.Request, str], bool]
"""Whether a request may see the trail of the question with this id."""


def audit_handler(audit: AuditSource, visible: Visible) -> Handler:
    """``GET /v1/audit?since=…&until=…``: the events of that range as JSON lines (only
    those of questions ``visible`` to the request)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            if "since" not in request.query:
                raise ValueError("since is required (e.g. since=24h or since=2026-12-01)")
            since, until = parse_range(request.query["since"], request.query.get("until"))
        except ValueError as exc:
            return request_problem(400, "BAD_TIME", str(exc))
        found = audit(since, until)
        events = (e async for e in found if visible(request, e.request_id))
        event = await anext(events, None)  # a store outage is still a clean 503 here
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        sent = 0
        try:
            while event is not None:
                await response.write(f"{event.dump()}\n".encode())
                sent += 1
                event = await anext(events, None)
        except ConnectionError:  # the caller hung up: nothing to answer
            _log.info("GET /v1/audit: the caller left after %d events", sent)
            return response
        except Exception as exc:
            # The 200 and some lines are out: a second status cannot follow. Close the
            # connection without the stream's last chunk, so the caller sees a cut export
            # (aiohttp: ClientPayloadError), never a clean end of a partial one.
            _log.warning("GET /v1/audit broke off after %d events: %s", sent, exc)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response

    return handle
