"""The bot's side of a dsh 0.2 host: login (``/connect``, its cookies), the mux's streams
read into the open requests and the sessions' logs (a malformed frame is skipped, logged at
most once a minute), answers and their delivery (no receipts: delivered once its session's
log shows it)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlencode

import aiohttp

from adapters.dsh.asks import UNCONFIRMED_NOTE, HostAsk
from adapters.dsh.host import HTTP_FAILURES, Host, describe
from adapters.dsh.mux import (
    CONNECT_PATH,
    EVENTS_STREAM,
    LOG_PREFIX,
    RESULT_PATH,
    Cancel,
    Ready,
    Waterfall,
    events_value,
    follow_frame,
    open_frame,
    parse_mux,
    result_body,
)
from adapters.dsh.session_log import SessionLog, ToolCall
from adapters.httpguard import RefusalLog

if TYPE_CHECKING:
    from adapters.dsh.open_requests import OpenRequests

_CONFIRM_WAIT: Final = 2.0
"""Seconds an answer the host took may go unseen in its log before the message says so."""
_REPLAY_WAIT: Final = 2.0
"""Seconds after ``ready`` by which the host has replayed every pending request."""
_MAX_FOLLOWED: Final = 256
_CANCEL_WAIT: Final = 1.0
"""Seconds a ``cancel`` waits for its outcome in the session log (it may come just after)."""
_Post = Literal["taken", "stale", "failed", "refused"]
_POST_TIMEOUT: Final = aiohttp.ClientTimeout(total=10.0)
NO_CONNECT: Final = (
    "the host has no /connect (HTTP {status}): it is not a dsh web host speaking the 0.2 "
    "protocol, which the bot needs (dsh 0.1.2a3 and later); dsh 0.1.1-rc.2 is no longer "
    "supported: upgrade dsh"
)


@dataclass(frozen=True, slots=True)
class Delivery:
    """How sending a response went: ``taken`` (its session's log shows it), ``False`` (the
    request ended otherwise) or ``None`` (not delivered); whether it ``reached`` the host;
    whether the host ``settled`` the request meanwhile."""

    taken: bool | None
    reached: bool = False
    settled: bool = False


class LoginRefused(Exception):
    """The host refused the login (the message says why and what to check)."""

    expected = True


class HostLogin:
    """The login of one host and its cookies: the launch token's dies with its socket, the
    browser's (``/?token=``) outlives a host restart."""

    def __init__(self, host: Host, token: str | None) -> None:
        self._host = host
        self._token = token
        self.cookie: str | None = None
        """The cookie answers on the current socket carry."""
        self._browser: str | None = None
        self._fallback = False

    async def login(self) -> dict[str, str]:
        """Log in (``/connect``): the socket's headers, else ``LoginRefused``. The first login
        keeps the browser cookie, tried once when a restarted host refuses the old token."""
        token = self._token or ""
        answering = urlencode({"token": token, "interactions": "answer"})  # an API client
        status, cookie = await self._get(f"{CONNECT_PATH}?{answering}")
        if status in (302, 303):
            self.cookie, self._fallback = cookie, False
            if self._browser is None:
                status, browser = await self._get("/?" + urlencode({"token": token}))
                self._browser = browser if status == 303 and browser else None
            return {"Cookie": cookie} if cookie else {}
        if status == 401 and self._browser is not None and not self._fallback:
            self._fallback, self.cookie = True, self._browser
            self._host.logger.warning(
                "dsh host: the launch token was refused (did the host restart?); "
                "connecting with the browser cookie it gave before"
            )
            return {"Cookie": self._browser}
        if status == 401:
            self._browser = None
            raise LoginRefused(
                "the host refused the launch token: HTTP 401 (a dsh 0.2 host makes a new token "
                "on every start: set DSH_HOST_TOKEN, or DSH_HOST_URL to the whole URL it prints)"
            )
        if status in (404, 405) or 200 <= status < 300:
            raise LoginRefused(NO_CONNECT.format(status=status))
        raise LoginRefused(f"the host refused the login: HTTP {status}")

    async def _get(self, path: str) -> tuple[int, str]:
        """GET ``path`` without following redirects: the status, and the cookies it set."""
        async with self._host.http().get(
            self._host.base + path, allow_redirects=False, timeout=_POST_TIMEOUT
        ) as response:
            cookies = "; ".join(f"{k}={m.value}" for k, m in response.cookies.items())
            return response.status, cookies

    def opened(self) -> None:
        """A new socket: a later refusal of the token may fall back on the browser cookie."""
        self._fallback = False

    def closed(self) -> None:
        """The socket closed: the ``/connect`` cookie dies with it."""
        if self.cookie != self._browser:
            self.cookie = None


class MuxLink:
    """Login, the ``$events`` clientId, each downlink message handed to the open requests
    (and the sessions' log), followed session logs, and sending answers."""

    def __init__(
        self,
        host: Host,
        token: str | None,
        requests: OpenRequests,
        max_frame: int = 8 * 1024 * 1024,
    ) -> None:
        self._host = host
        self._logger = host.logger
        self._requests = requests
        self._max_frame = max_frame
        self.log = SessionLog()
        self.auth = HostLogin(host, token)
        self.skips = RefusalLog(host.logger)
        """Malformed frames skipped, counted (``counts``) and logged once a minute."""
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self.client_id: str | None = None
        self._ready = asyncio.Event()
        self._ready_at: float | None = None
        self._followed: dict[str, bool] = {}  # session → snapshot seen

    async def opened(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """A new socket: the host's replay begins; open ``$events`` (the host then replays
        every pending request)."""
        self._requests.opened()
        self._ws, self.client_id, self._ready_at = ws, None, None
        self.auth.opened()
        self._ready.clear()
        self._followed.clear()
        await ws.send_json(open_frame(EVENTS_STREAM, "$events", {}))

    def closed(self) -> None:
        """The socket closed: its replay window no longer runs; its clientId and cookie are
        dead."""
        self._requests.closed()
        self._ws = self.client_id = None
        self.auth.closed()
        self._ready.clear()

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
            self.log.unreadable(stream.removeprefix(LOG_PREFIX), call)

    def on_message(self, text: str) -> None:
        """Handle one message (``$events`` items, followed session logs); nothing in it may
        end the connection."""
        try:
            frame = parse_mux(text)
            if frame.stream_id.startswith(LOG_PREFIX):  # a followed session's log
                session_id = frame.stream_id.removeprefix(LOG_PREFIX)
                snapshot = frame.kind == "item" and self.log.item(session_id, frame.value)
                if snapshot and session_id in self._followed:
                    self._followed[session_id] = True
                return
            if frame.stream_id != EVENTS_STREAM or frame.kind != "item":
                self._logger.warning(
                    "dsh host: a stream ended",
                    extra={"stream": frame.stream_id[:100], "kind": frame.kind},
                )
                return
            value = events_value(frame.value)
        except Exception as exc:  # whatever a frame makes the parser raise, it is one frame
            if self.skips.due("malformed_frame"):  # at most once a minute: millions may come
                # Why: the parser's ValueError, or a parser gap named by its type.
                why = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                self._logger.warning(
                    "dsh host: skipped a malformed frame",
                    extra={
                        "error": why[:500],
                        "skipped_so_far": self.skips.counts["malformed_frame"],
                    },
                )
            return
        try:
            if isinstance(value, Ready):  # answers on this socket carry its clientId
                self.client_id = value.client_id
                self._ready_at = asyncio.get_running_loop().time()
                self._ready.set()
            elif isinstance(value, Waterfall):  # remembered, its session's log followed
                self.log.asked(value)
                self.follow(value.session_id)
                call_id = value.call_id
                ask = HostAsk(
                    value.event_id,
                    value.session_id,
                    list(value.questions),
                    approval=value.approval,
                    call=self.log.call(value.session_id, call_id) if call_id else None,
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
        while (outcome := self.log.outcome(event_id)) is None and loop.time() < until:
            await self.log.changed(until - loop.time())
        self._requests.resolved(event_id, outcome or "cancelled")

    def follow(self, session_id: str) -> None:
        """Follow a session's log on this socket (once; at most ``_MAX_FOLLOWED`` at once)."""
        ws = self._ws
        if ws is None or session_id in self._followed:
            return
        if len(self._followed) >= _MAX_FOLLOWED:
            self._logger.warning(
                "dsh host: following too many sessions; not following another",
                extra={"session": session_id, "limit": _MAX_FOLLOWED},
            )
            return
        self._followed[session_id] = False
        task = asyncio.get_running_loop().create_task(ws.send_json(follow_frame(session_id)))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def call_of(
        self, session_id: str, call_id: str | None, wait: float = 5.0
    ) -> ToolCall | None:
        """The tool call ``call_id`` of the session, waiting up to ``wait`` s for its log."""
        if call_id is None:
            return None
        loop = asyncio.get_running_loop()
        until = loop.time() + wait
        self.follow(session_id)
        while (call := self.log.call(session_id, call_id)) is None:
            if self._followed.get(session_id) or loop.time() >= until:
                return None
            await self.log.changed(min(0.25, until - loop.time()))
        return call

    async def respond(
        self,
        event_id: str,
        outcome: dict[str, Any],
        *,
        settled: Callable[[], bool],
        overdue: Callable[[str], Awaitable[object]] | None = None,
    ) -> Delivery:
        """Send ``outcome`` (once taken, never again), then wait for the log: taken once it
        shows this outcome; not on another, or when the host withdrew the request."""
        noted = False

        async def note(text: str) -> None:
            nonlocal noted
            if not noted and overdue is not None:
                noted = True
                await overdue(text)

        loop = asyncio.get_running_loop()
        delay = 0.25
        while True:
            if (verdict := self.log.verdict(event_id, outcome)) is not None:
                return Delivery(verdict)
            if settled():
                return Delivery(False)
            if self._host.stopping():
                return Delivery(None)
            client_id = self.client_id
            if client_id is not None and not self._requests.replayed(event_id):
                # Sent only once this socket's replay brought it: the host takes (and drops)
                # an answer to a request it no longer has.
                ready_at = self._ready_at  # this socket's replay is over without it: gone
                if ready_at is not None and loop.time() - ready_at > _REPLAY_WAIT:
                    return Delivery(None, settled=True)
                await asyncio.sleep(0.25)
                continue
            if client_id is None:
                state: _Post = "failed"
            else:
                post = asyncio.ensure_future(self._post(client_id, event_id, outcome))
                if not (await asyncio.wait({post}, timeout=_CONFIRM_WAIT / 2))[0]:
                    await note("")  # the host is slow to take it (frozen?): say so now
                state = await post
            if state == "taken":
                break
            if state == "refused":
                return Delivery(None)
            await note("")
            if state == "stale":
                self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), delay)
            except TimeoutError:
                delay = min(delay * 2, self._host.backoff_max)
        since = loop.time()
        while (verdict := self.log.verdict(event_id, outcome)) is None:
            if settled():
                return Delivery(False, reached=True)
            if self._host.stopping():
                return Delivery(None, reached=True)
            if loop.time() - since > _CONFIRM_WAIT:
                await note(UNCONFIRMED_NOTE)
            await self.log.changed(0.25)
        return Delivery(verdict)

    async def _post(self, client_id: str, event_id: str, outcome: dict[str, Any]) -> _Post:
        body = result_body(str(uuid.uuid4()), client_id, event_id, outcome)
        headers = {"Cookie": self.auth.cookie} if self.auth.cookie else {}
        try:
            async with self._host.http().post(
                self._host.base + RESULT_PATH, json=body, headers=headers, timeout=_POST_TIMEOUT
            ) as response:
                if response.status in (401, 403):
                    return "stale"
                if response.status != 200:
                    raise ValueError(f"HTTP {response.status}")
                reply = await response.json(content_type=None)
        except (ValueError, *HTTP_FAILURES) as exc:
            self._logger.warning(
                "dsh host: could not send a response; retrying",
                extra={"rpc_id": event_id, "error": describe(exc)},
            )
            return "failed"
        result = reply.get("result") if isinstance(reply, dict) else None
        if isinstance(result, dict) and result.get("ok") is True:
            return "taken"
        error = str(result.get("error") if isinstance(result, dict) else reply)[:300]
        if self.client_id != client_id or "event stream" in error:
            return "stale"  # the socket changed under it: send again with the new clientId
        self._logger.error(
            "dsh host: response not taken", extra={"rpc_id": event_id, "error": error}
        )
        return "refused"


def _head_field(head: str, key: str) -> str | None:
    """A string field ``key`` read from the head of a message."""
    found = re.search(rf'"{key}"\s*:\s*"([^"\\]{{1,200}})"', head)
    return found.group(1) if found else None
