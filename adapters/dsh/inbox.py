"""The downlink's messages read into the open requests: 0.1.1 frames or 0.2 mux items; a
malformed one is skipped (logged at most once a minute) and nothing in one ends the connection."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

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
from adapters.dsh.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    OtherPayload,
    QuestionRequested,
    QuestionResolved,
    parse_frame,
)
from adapters.dsh.session_log import SESSION_EVENT, session_event
from adapters.httpguard import RefusalLog

_CANCEL_WAIT = 1.0
"""Seconds a ``cancel`` waits for its outcome in the session log (it may come just after)."""


class Inbox:
    """Hands each downlink message of a host to its open requests (and the sessions' log)."""

    def __init__(
        self,
        requests: OpenRequests,
        link: MuxLink,
        dialect: Callable[[], str | None],
        logger: logging.Logger,
        max_frame: int = 8 * 1024 * 1024,
    ) -> None:
        self._requests = requests
        self._link = link
        self._dialect = dialect
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
                "method": _head_field(head, "method|event"),
                "rpc_id": _head_field(head, "rpcId|eventId"),
            },
        )
        session, call = _head_field(head, "sessionId"), _head_field(head, "callId")
        if '"tool/call"' in head and session is not None and call is not None:
            self._link.log.unreadable(session, call)

    def _skipped(self, error: Exception) -> None:
        """Log a malformed frame, at most once a minute (a host could send millions)."""
        if self.skips.due("malformed_frame"):
            count = self.skips.counts["malformed_frame"]
            self._logger.warning(
                "dsh host: skipped a malformed frame",
                extra={"error": _parse_error(error), "skipped_so_far": count},
            )

    def on_message(self, text: str) -> None:
        """Handle one downlink message; nothing in it may end the connection."""
        if self._dialect() == "0.2":
            self._on_mux(text)
            return
        try:
            frame = parse_frame(text)
        except Exception as exc:  # whatever a frame makes the parser raise, it is one frame
            self._skipped(exc)
            return
        try:
            payload = frame.payload
            if isinstance(payload, QuestionRequested | ApprovalRequested):
                if isinstance(payload, QuestionRequested):
                    ask = HostAsk(frame.rpc_id, payload.session_id, list(payload.questions))
                else:
                    # Paired now: the log may forget it before the ask is served.
                    sid, aid, log = payload.session_id, payload.approval_id, self._link.log
                    ask = HostAsk(
                        frame.rpc_id,
                        sid,
                        approval=payload,
                        call=log.call_for(sid, aid),
                        call_known=log.knows(sid, aid),
                    )
                self._requests.requested(ask)
            elif isinstance(payload, QuestionResolved):
                self._requests.resolved(payload.question_rpc_id, payload.outcome)
            elif isinstance(payload, ApprovalResolved):
                self._requests.approval_resolved(payload)
                self._link.log.forget(payload.session_id, payload.approval_id)
            elif frame.method == SESSION_EVENT and isinstance(payload, OtherPayload):
                event = session_event(payload.model_extra or {})
                if event is not None:
                    self._link.log.observe(event)
        except Exception:  # a bug here must not drop the downlink
            self._logger.exception(
                "dsh host: could not handle a frame", extra={"rpc_id": frame.rpc_id}
            )

    def _on_mux(self, text: str) -> None:
        """Handle one 0.2 mux message: ``$events`` items and the followed session logs."""
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
                questions = list(value.question.questions) if value.question else []
                ask = HostAsk(
                    value.event_id,
                    value.session_id,
                    questions,
                    approval=value.approval,
                    call=call,
                    call_known=call is not None,
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


def _head_field(head: str, keys: str) -> str | None:
    """A string field (one of ``keys``, ``|``-separated) read from the head of a message."""
    found = re.search(rf'"(?:{keys})"\s*:\s*"([^"\\]{{1,200}})"', head)
    return found.group(1) if found else None


def _parse_error(exc: Exception) -> str:
    """Why a frame was skipped: the parser's ``ValueError``, or a parser gap named by its type."""
    error = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return error[:500]
