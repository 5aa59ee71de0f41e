"""The mux's messages read into the open requests and the sessions' logs; a malformed one is
skipped (logged at most once a minute) and nothing in one ends the connection."""

from __future__ import annotations

import asyncio
import logging
import re

from adapters.dsh.asks import HostAsk
from adapters.dsh.link import MuxLink
from adapters.dsh.mux import (
    EVENTS_STREAM,
    LOG_PREFIX,
    Cancel,
    Ready,
    Waterfall,
    events_value,
    parse_mux,
)
from adapters.dsh.open_requests import OpenRequests
from adapters.httpguard import RefusalLog

_CANCEL_WAIT = 1.0
"""Seconds a ``cancel`` waits for its outcome in the session log (it may come just after)."""


class Inbox:
    """Hands each downlink message of a host to its open requests (and the sessions' log)."""

    def __init__(
        self,
        requests: OpenRequests,
        link: MuxLink,
        logger: logging.Logger,
        max_frame: int = 8 * 1024 * 1024,
    ) -> None:
        self._requests = requests
        self._link = link
        self._logger = logger
        self._max_frame = max_frame
        self.skips = RefusalLog(logger)
        """Malformed frames skipped, counted (``counts``) and logged once a minute."""

    def too_big(self, text: str) -> None:
        """Log a message skipped as too big; if it was a ``tool/call``, no earlier call of its
        callId may be shown for it (its approval says the command could not be read)."""
        head = text[:2000]
        self._logger.warning(
            "dsh host: skipped a downlink message over the size limit",
            extra={
                "bytes": len(text.encode("utf-8")),
                "limit": self._max_frame,
                "method": _head_field(head, "event"),
                "rpc_id": _head_field(head, "eventId"),
            },
        )
        stream, call = _head_field(head, "streamId") or "", _head_field(head, "callId")
        if '"tool/call"' in head and stream.startswith(LOG_PREFIX) and call is not None:
            self._link.log.unreadable(stream.removeprefix(LOG_PREFIX), call)

    def _skipped(self, error: Exception) -> None:
        """Log a malformed frame, at most once a minute (a host could send millions)."""
        if self.skips.due("malformed_frame"):
            count = self.skips.counts["malformed_frame"]
            self._logger.warning(
                "dsh host: skipped a malformed frame",
                extra={"error": _parse_error(error), "skipped_so_far": count},
            )

    def on_message(self, text: str) -> None:
        """Handle one message (``$events`` items, followed session logs); nothing in it may
        end the connection."""
        try:
            frame = parse_mux(text)
            if frame.stream_id.startswith(LOG_PREFIX):
                if frame.kind == "item":
                    self._link.log_item(frame.stream_id, frame.value)
                return
            if frame.stream_id != EVENTS_STREAM or frame.kind != "item":
                self._logger.warning(
                    "dsh host: a stream ended",
                    extra={"stream": frame.stream_id[:100], "kind": frame.kind},
                )
                return
            value = events_value(frame.value)
        except Exception as exc:  # whatever a frame makes the parser raise, it is one frame
            self._skipped(exc)
            return
        try:
            if isinstance(value, Ready):
                self._link.ready(value.client_id)
            elif isinstance(value, Waterfall):
                call = self._link.asked(value)
                ask = HostAsk(
                    value.event_id,
                    value.session_id,
                    list(value.questions),
                    approval=value.approval,
                    call=call,
                )
                self._requests.requested(ask)
            elif isinstance(value, Cancel) and self._requests.holds(value.event_id):
                task = asyncio.get_running_loop().create_task(self._cancelled(value.event_id))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())
        except Exception:  # a bug here must not drop the downlink
            self._logger.exception("dsh host: could not handle a frame")

    async def _cancelled(self, event_id: str) -> None:
        """The host withdrew a request: end its ask with the outcome its log shows."""
        loop = asyncio.get_running_loop()
        until = loop.time() + _CANCEL_WAIT
        while (outcome := self._link.log.outcome(event_id)) is None and loop.time() < until:
            await self._link.log.changed(until - loop.time())
        self._requests.resolved(event_id, outcome or "cancelled")


def _head_field(head: str, key: str) -> str | None:
    """A string field ``key`` read from the head of a message."""
    found = re.search(rf'"{key}"\s*:\s*"([^"\\]{{1,200}})"', head)
    return found.group(1) if found else None


def _parse_error(exc: Exception) -> str:
    """Why a frame was skipped: the parser's ``ValueError``, or a parser gap named by its type."""
    error = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return error[:500]
