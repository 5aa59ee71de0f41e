"""The Redis store's audit trail: streams, ``p:audit`` (every event) and ``p:events:{id}``.

Each event's JSON is the entry's field ``e``. The whole stream is trimmed to the retention as
it is appended to; a question's stream expires the retention after its last event. An event
that goes with a record's change is appended by that change's script (``event_args``, see
``redis_layout``); ``append_event`` is for an event without one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from typing import Final, cast

from adapters.slack.audit import AuditEvent
from adapters.slack.stores.redis_layout import RedisKeys, px
from adapters.slack.stores.redis_link import RedisLink, as_text

__all__ = ["RedisAudit", "event_args"]

_PAGE: Final = 500
"""Entries read per XRANGE."""


def _stream_lines(entries: object) -> list[tuple[str, str]]:
    """``(entry id, event JSON)`` of each entry XRANGE returned (field ``e``)."""
    lines: list[tuple[str, str]] = []
    for entry_id, fields in cast(list[tuple[str, dict[str, str]]], entries or []):
        lines.append((as_text(entry_id), as_text(fields["e"])))
    return lines


def _cutoff(retention: float) -> int:
    """The audit stream's ``MINID`` now: entries older than the retention go (ms)."""
    return max(0, int((time.time() - retention) * 1000))


def event_args(event: AuditEvent | None, retention: float) -> list[str | int]:
    """The last three ARGV of a record's script: the event (``''``: none), the audit
    stream's cutoff and the question stream's TTL (ms)."""
    return ["" if event is None else event.dump(), _cutoff(retention), px(retention)]


class RedisAudit:
    """Appends and reads the audit streams of one store."""

    def __init__(self, link: RedisLink, keys: RedisKeys, *, retention: float) -> None:
        self._link = link
        self._keys = keys
        self._retention = retention

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to the audit stream and to its question's own stream."""
        line = event.dump()
        trail = self._keys.events(event.request_id)
        cutoff = _cutoff(self._retention)

        async def write() -> None:
            pipe = self._link.client.pipeline(transaction=True)
            pipe.xadd(self._keys.audit, {"e": line}, minid=cutoff, approximate=True)
            pipe.xadd(trail, {"e": line})
            pipe.pexpire(trail, px(self._retention))
            await pipe.execute()

        await self._link.op("append an audit event", write)

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        trail = self._keys.events(request_id)
        entries = await self._link.op("read a trail", lambda: self._link.client.xrange(trail))
        return [AuditEvent.load(line) for _, line in _stream_lines(entries)]

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages).

        Stream ids are Redis's clock; a minute's margin on each side covers a skew with
        this host's, and each event's own ``at`` decides.
        """
        low = f"{max(0, int((since - 60) * 1000))}"
        high = "+" if until is None else f"{int((until + 60) * 1000)}"
        client = self._link.client
        while True:
            read = functools.partial(client.xrange, self._keys.audit, low, high, count=_PAGE)
            entries = _stream_lines(await self._link.op("read the audit stream", read))
            for _, line in entries:
                event = AuditEvent.load(line)
                if event.at >= since and (until is None or event.at < until):
                    yield event
            if len(entries) < _PAGE:
                return
            low = f"({entries[-1][0]}"
