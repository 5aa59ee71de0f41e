"""The local Slack sandbox: the Web API stand-in plus a web page to act as people on it.

::

    sandbox = SandboxServer(signing_secret=secret, bot_token="xoxb-sandbox-token")
    api_url = await sandbox.start(port=0)     # AsyncWebClient(base_url=api_url)
    ...                                       # start the app; it serves /slack/events
    await sandbox.connect_bot(f"{app_url}/slack/events", service=service)
    print("open", sandbox.page_url)
    await sandbox.stop()

One aiohttp app serves ``SlackStandIn``'s routes (``/api/<method>``, ``/upload/…``,
``/response/…``) and the page's:

- ``GET /`` and ``GET /static/<file>``: the page (``static/``: plain HTML, JS and CSS).
- ``GET /sandbox/state?user=<id or name>``: what that person sees, as JSON: channels,
  messages (ephemeral ones included), the open modal, the demo agent. Every text in the
  Block Kit carries an ``html`` rendering from ``richtext`` (safe to insert).
- ``GET /sandbox/events``: Server-Sent Events, one per state change (``kind``, ``seq``);
  the page fetches the state again when one arrives.
- ``POST /sandbox/action`` ``{user, channel, ts, action_id, block_id, values}``: a click or
  a choice on a message; ``values`` (``[[block_id, action_id, selection], …]``) are the
  selections the page shows, which become ``state.values``.
- ``POST /sandbox/submit`` ``{user, view_id, values}``, ``POST /sandbox/close``
  ``{user, view_id}``: the open modal's Submit and Cancel.
- ``POST /sandbox/post`` ``{user, channel, text, thread_ts}``: a person writes a message
  (``/demo`` runs the demo agent instead).
- ``POST /sandbox/demo``: run the demo agent (after ``connect_bot(..., service=...)``; its
  tool approval step with ``approvals=`` the provider).

Clicks and submissions become the payloads Slack sends (``clicks``), signed with the app's
signing secret and POSTed to its ``/slack/events`` (``SlackStandIn.deliver``). The page's
POSTs must be JSON (``Content-Type: application/json``) from the page's own origin, so
another web site cannot act as a person here (``Origin`` is compared with the addresses the
sandbox serves, and a ``Host`` it does not serve is refused with 421 before any route, so
DNS rebinding cannot reach it either). The sandbox has no authentication: it listens on
loopback addresses only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import aiohttp
from aiohttp import web

from adapters.connections import ListenerLimits
from adapters.httpguard import is_loopback
from adapters.slack.render.mrkdwn import escape
from adapters.slack.sandbox import clicks
from adapters.slack.sandbox.demo import ApprovalAsker, Asker, DemoAgent
from adapters.slack.sandbox.records import (
    Change,
    Channel,
    Ephemeral,
    Message,
    SlackError,
    User,
    View,
)
from adapters.slack.sandbox.richtext import Names, mrkdwn_to_html, plain_to_html, with_html
from adapters.slack.sandbox.state import Workspace
from adapters.slack.sandbox.webapi import ACK_TIMEOUT, DEFAULT_TOKEN, SlackStandIn

__all__ = [
    "ACK_TIMEOUT_TEXT",
    "DEFAULT_CHANNEL",
    "DEFAULT_CHANNEL_NAME",
    "DEFAULT_PEOPLE",
    "STATIC_DIR",
    "Refusal",
    "SandboxServer",
]

DEFAULT_CHANNEL: Final = "C0SANDBOX"
DEFAULT_CHANNEL_NAME: Final = "agent-questions"
DEFAULT_PEOPLE: Final = (("alice", "Alice Moreau"), ("bob", "Bob Okafor"), ("carol", "Carol Lind"))
STATIC_DIR: Final = Path(__file__).resolve().parent / "static"
DEMO_COMMAND: Final = "/demo"
KEEPALIVE_SECONDS: Final = 15.0
MAX_POST_TEXT: Final = 4000
_STATIC_TYPES: Final = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
_NO_STORE: Final = {"Cache-Control": "no-store"}
_LOOPBACK_ORIGIN_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]")
ACK_TIMEOUT_TEXT: Final = "We had some trouble connecting. Try again?"
"""What Slack shows the person when the app did not answer within 3 seconds."""

logger = logging.getLogger("adapters.slack.sandbox")


class Refusal(Exception):
    """A request of the page that cannot be done: answered with ``status`` and ``error``."""

    def __init__(self, status: int, error: str, detail: str = "") -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.detail = detail


class SandboxServer:
    """``SlackStandIn`` with people, a channel, a web page to act as them, and a demo agent."""

    def __init__(
        self,
        *,
        signing_secret: str,
        bot_token: str = DEFAULT_TOKEN,
        channel: str = DEFAULT_CHANNEL,
        channel_name: str = DEFAULT_CHANNEL_NAME,
        people: Sequence[tuple[str, str]] = DEFAULT_PEOPLE,
        workspace: Workspace | None = None,
        limits: ListenerLimits | None = None,
    ) -> None:
        self.standin = SlackStandIn(
            workspace, token=bot_token, signing_secret=signing_secret, limits=limits
        )
        ws = self.standin.workspace
        self.people: list[User] = [
            ws.add_user(name, real_name=real_name) for name, real_name in people
        ]
        """The workspace's people, in the order the page lists them."""
        if channel not in ws.channels:
            ws.add_channel(channel_name, id=channel)
        self.channel = channel
        """The channel the page opens first (the bot's default destination)."""
        if self.people:
            ws.add_usergroup("reviewers", [p.id for p in self.people[:2]], name="Reviewers")
        self.demo: DemoAgent | None = None
        """The demo agent, once ``connect_bot`` was given a service."""
        self._streams: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._seq = itertools.count(1)
        self._stop_observing = self.standin.observe(self._on_change)
        self._actions = asyncio.Lock()
        self._origins: frozenset[str] = frozenset()
        router = self.standin.app.router
        router.add_get("/", self._page)
        router.add_get("/favicon.ico", self._favicon)
        router.add_get("/static/{name}", self._static)
        router.add_get("/sandbox/state", self._state)
        router.add_get("/sandbox/events", self._events)
        router.add_post("/sandbox/action", self._action)
        router.add_post("/sandbox/submit", self._submit)
        router.add_post("/sandbox/close", self._close)
        router.add_post("/sandbox/home", self._home)
        router.add_post("/sandbox/post", self._post)
        router.add_post("/sandbox/demo", self._demo)

    # Lifecycle.

    @property
    def workspace(self) -> Workspace:
        """The in-memory Slack workspace."""
        return self.standin.workspace

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 picks a free port); returns the Web API base URL.

        The sandbox has no authentication: ``host`` must be a loopback address.
        """
        if not is_loopback(host):
            raise ValueError(f"the sandbox listens on loopback addresses only, not {host!r}")
        url = await self.standin.start(host, port)
        port = self.standin.addresses[0][1]
        self._origins = _page_origins(host, port)
        return url

    async def connect_bot(
        self,
        interactivity_url: str,
        *,
        service: Asker | None = None,
        approvals: ApprovalAsker | None = None,
    ) -> None:
        """Send clicks to the app at ``interactivity_url``; ``service`` enables the demo,
        ``approvals`` (the provider's ``ask_approval``) its tool approval step."""
        self.standin.interactivity_url = interactivity_url
        if service is not None and self.demo is None:
            self.demo = DemoAgent(
                service, approvals=approvals, on_change=lambda: self._broadcast({"kind": "demo"})
            )

    async def stop(self) -> None:
        """Stop the demo, close the live streams and stop serving."""
        if self.demo is not None:
            await self.demo.aclose()
        for queue in list(self._streams):
            queue.put_nowait(None)
        self._stop_observing()
        await self.standin.stop()

    async def __aenter__(self) -> SandboxServer:
        """Start on a free port of 127.0.0.1."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop."""
        await self.stop()

    @property
    def api_url(self) -> str:
        """The Web API base URL for ``AsyncWebClient(base_url=...)``."""
        return self.standin.url

    @property
    def page_url(self) -> str:
        """The address of the page, ``http://127.0.0.1:<port>/``."""
        return self.standin.root_url

    # What a person sees.

    def person(self, ref: str | None) -> User:
        """The person ``ref`` names (an id or a name; the first person when ``None``)."""
        ws = self.workspace
        if not ref:
            if not self.people:
                raise Refusal(400, "no_people")
            return self.people[0]
        user = ws.users.get(ref) or next((u for u in ws.users.values() if u.name == ref), None)
        if user is None or user.is_bot or user.deleted:
            raise Refusal(404, "user_not_found", f"no person {ref!r} in the sandbox")
        return user

    def names(self) -> Names:
        """Display names for mentions."""
        ws = self.workspace
        return Names(
            users={u.id: u.name for u in ws.users.values()},
            channels={c.id: c.name for c in ws.channels.values() if not c.is_im},
            usergroups={g.id: g.handle for g in ws.usergroups.values()},
        )

    def state_for(self, user_id: str) -> dict[str, Any]:
        """Everything the page shows ``user_id``, as JSON-ready data."""
        ws = self.workspace
        me = ws.user(user_id)
        names = self.names()
        channels = [c for c in ws.channels.values() if c.has_member(me.id)]
        visible = {c.id for c in channels}
        messages = [
            self._message_view(m, names) for c in channels for m in ws.messages.get(c.id, [])
        ]
        messages += [
            self._message_view(e, names) for e in ws.ephemerals_for(me.id) if e.channel in visible
        ]
        messages.sort(key=lambda m: (m["channel"], float(m["ts"])))
        stack = ws.stacks.get(me.id, [])
        view = self._view_view(stack[-1], len(stack), names) if stack else None
        demo: dict[str, Any] = {"available": self.demo is not None}
        if self.demo is not None:
            demo.update(self.demo.snapshot())
        return {
            "team": {"id": ws.team_id, "domain": ws.domain},
            "bot": {"user_id": ws.bot_user.id, "name": ws.bot_user.name},
            "me": me.id,
            "people": [
                {"id": u.id, "name": u.name, "real_name": u.real_name or u.name}
                for u in self.people
            ],
            "default_channel": self.channel if self.channel in visible else None,
            "channels": [self._channel_view(c) for c in channels],
            "messages": messages,
            "view": view,
            "home": with_html(ws.home_views[me.id], names) if me.id in ws.home_views else None,
            "demo": demo,
            "connected": self.standin.interactivity_url is not None,
        }

    def _channel_view(self, channel: Channel) -> dict[str, Any]:
        ws = self.workspace
        if channel.is_im:
            kind, label = "im", ws.bot_user.name
        elif channel.is_mpim:
            others = sorted(ws.users[u].name for u in channel.members or () if u in ws.users)
            kind, label = "mpim", ", ".join(others)
        else:
            kind, label = "channel", channel.name
        return {"id": channel.id, "name": channel.name, "kind": kind, "label": label}

    def _message_view(self, message: Message | Ephemeral, names: Names) -> dict[str, Any]:
        ws = self.workspace
        ephemeral = isinstance(message, Ephemeral)
        author_id = ws.bot_user.id if ephemeral else message.user
        author = ws.users.get(author_id)
        view: dict[str, Any] = {
            "channel": message.channel,
            "ts": message.ts,
            "thread_ts": message.thread_ts,
            "author": {
                "id": author_id,
                "name": author.name if author else author_id,
                "is_bot": bool(message.bot_id),
            },
            "ephemeral": ephemeral,
            "text_html": mrkdwn_to_html(message.text, names),
            "blocks": with_html(message.blocks, names),
            "edited": False,
            "reply_count": 0,
            "files": [],
        }
        if isinstance(message, Message):
            view["edited"] = bool(message.edits)
            view["reply_count"] = len(message.replies)
            view["files"] = [
                {"name": str(f.get("name", "")), "title": str(f.get("title", ""))}
                for f in message.files
            ]
        return view

    def _view_view(self, view_id: str, depth: int, names: Names) -> dict[str, Any]:
        view = self.workspace.views[view_id]
        data = view.to_dict()

        def text(obj: object, fallback: str) -> str:
            raw = obj.get("text") if isinstance(obj, Mapping) else None
            return plain_to_html(raw if isinstance(raw, str) else fallback)

        return {
            "id": view.id,
            "hash": view.hash,
            "depth": depth,
            "title_html": text(data.get("title"), "App"),
            "submit_html": text(data["submit"], "Submit") if data.get("submit") else None,
            "close_html": text(data.get("close"), "Cancel"),
            "blocks": with_html(data["blocks"], names),
            "errors": dict(view.errors),
        }

    # Acting as a person.

    async def click(
        self,
        user: str,
        channel: str,
        ts: str,
        *,
        action_id: str,
        block_id: str | None = None,
        values: clicks.Values | None = None,
    ) -> tuple[int | None, str]:
        """``user`` clicks or changes an element of a message; returns the app's reply."""
        ws = self.workspace
        message: Message | Ephemeral | None = ws.find_message(channel, ts)
        if message is None:
            ephemeral = ws.find_ephemeral(ts)
            message = ephemeral if ephemeral and ephemeral.channel == channel else None
        if message is None:
            raise Refusal(404, "message_not_found")
        if isinstance(message, Ephemeral):
            if message.user != user:
                raise Refusal(403, "not_visible", "that ephemeral message is someone else's")
        elif not ws.channels[channel].has_member(user):
            raise Refusal(403, "not_in_channel")
        try:
            payload = self.standin.click(
                message, user=user, action_id=action_id, block_id=block_id, values=values
            )
        except LookupError as exc:
            raise Refusal(404, "element_not_found", str(exc)) from exc
        except ValueError as exc:
            raise Refusal(400, "invalid_selection", str(exc)) from exc
        return await self._deliver(payload)

    async def submit(
        self, user: str, view_id: str, values: clicks.Values | None = None
    ) -> tuple[int | None, str]:
        """``user`` presses Submit on their open modal; returns the app's reply."""
        view = self._own_view(user, view_id)
        try:
            payload = self.standin.submission(view.id, values=values)
        except ValueError as exc:
            raise Refusal(400, "invalid_selection", str(exc)) from exc
        return await self._deliver(payload)

    async def close_modal(self, user: str, view_id: str) -> None:
        """``user`` cancels their open modal (the app hears of it if it asked to)."""
        view = self._own_view(user, view_id)
        data = view.to_dict()
        self.workspace.close_view(view.id)
        if data.get("notify_on_close") and self.standin.interactivity_url is not None:
            ws = self.workspace
            payload = {
                "type": "view_closed",
                "team": {"id": ws.team_id, "domain": ws.domain},
                "user": ws.user_ref(user),
                "api_app_id": ws.app_id,
                "view": data,
                "is_cleared": False,
            }
            await self._deliver(payload)

    def post(self, user: str, channel: str, text: str, thread_ts: str | None = None) -> Message:
        """``user`` writes ``text`` in ``channel`` (escaped, as Slack's client does)."""
        ws = self.workspace
        conversation = ws.channels.get(channel)
        if conversation is None:
            raise Refusal(404, "channel_not_found")
        if not conversation.has_member(user):
            raise Refusal(403, "not_in_channel")
        if thread_ts is not None and ws.find_message(channel, thread_ts) is None:
            raise Refusal(404, "thread_not_found")
        return ws.post(conversation, text=escape(text), user=user, thread_ts=thread_ts)

    def start_demo(self) -> dict[str, Any]:
        """Run the demo agent once more; returns its snapshot."""
        if self.demo is None:
            raise Refusal(409, "demo_unavailable", "no bot is connected to the sandbox")
        self.demo.start()
        return self.demo.snapshot()

    def _own_view(self, user: str, view_id: str) -> View:
        try:
            view = self.workspace.find_view(view_id=view_id)
        except SlackError:
            raise Refusal(404, "view_not_found") from None
        if view.user != user:
            raise Refusal(403, "not_your_view")
        return view

    async def _deliver(self, payload: Mapping[str, Any]) -> tuple[int | None, str]:
        if self.standin.interactivity_url is None:
            raise Refusal(503, "no_app", "no bot is connected to the sandbox yet")
        # One interaction at a time, in the order they were made, as one Slack client does.
        kind = str(payload.get("type"))
        async with self._actions:
            try:
                status, body = await self.standin.deliver(payload)
            except (OSError, aiohttp.ClientError) as exc:
                logger.warning("the app is unreachable", extra={"error": repr(exc)})
                raise Refusal(502, "app_unreachable", str(exc) or type(exc).__name__) from exc
            except (ValueError, SlackError) as exc:
                logger.warning("the app answered wrongly", extra={"error": str(exc)})
                raise Refusal(502, "bad_app_response", str(exc)) from exc
        if status is None:
            logger.warning("the app did not answer within 3 s", extra={"type": kind})
        elif status != 200:
            logger.warning("the app refused an interaction", extra={"type": kind, "status": status})
        return status, body

    # Live updates.

    def _on_change(self, change: Change) -> None:
        data = change.data
        event: dict[str, Any] = {"kind": change.kind}
        for key in ("channel", "user", "ts", "view_id"):
            if isinstance(data.get(key), str):
                event[key] = data[key]
        message = data.get("message")
        if isinstance(message, Mapping) and isinstance(message.get("ts"), str):
            event["ts"] = message["ts"]
        self._broadcast(event)

    def _broadcast(self, event: dict[str, Any]) -> None:
        event = {**event, "seq": next(self._seq)}
        for queue in list(self._streams):
            queue.put_nowait(event)

    # HTTP.

    async def _page(self, request: web.Request) -> web.StreamResponse:
        return self._file("index.html")

    async def _favicon(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    async def _static(self, request: web.Request) -> web.StreamResponse:
        return self._file(request.match_info["name"])

    def _file(self, name: str) -> web.StreamResponse:
        suffix = Path(name).suffix
        path = STATIC_DIR / name
        if (
            "/" in name
            or "\\" in name
            or name.startswith(".")
            or suffix not in _STATIC_TYPES
            or not path.is_file()
        ):
            return web.json_response({"ok": False, "error": "not_found"}, status=404)
        return web.Response(
            body=path.read_bytes(),
            content_type=_STATIC_TYPES[suffix],
            charset="utf-8" if suffix in (".html", ".js", ".css", ".svg") else None,
            headers={
                **_NO_STORE,
                "Content-Security-Policy": _CSP,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
            },
        )

    async def _state(self, request: web.Request) -> web.StreamResponse:
        try:
            me = self.person(request.query.get("user"))
        except Refusal as refusal:
            return _refused(refusal)
        return web.json_response(self.state_for(me.id), headers=_NO_STORE)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._streams.add(queue)
        try:
            hello = json.dumps({"kind": "hello", "seq": 0})
            await response.write(f"retry: 1000\ndata: {hello}\n\n".encode())
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                if event is None:
                    break
                await response.write(f"data: {json.dumps(event)}\n\n".encode())
        except ConnectionError:
            pass  # the page went away
        finally:
            self._streams.discard(queue)
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    async def open_home(self, user: str) -> tuple[int, str]:
        """``user`` opens the app's Home tab: the app hears ``app_home_opened``."""
        if self.standin.interactivity_url is None:
            raise Refusal(503, "no_app", "no bot is connected to the sandbox yet")
        try:
            return await self.standin.open_home(user)
        except (OSError, aiohttp.ClientError) as exc:
            raise Refusal(502, "app_unreachable", str(exc) or type(exc).__name__) from exc

    async def click_home(
        self, user: str, *, action_id: str, block_id: str | None = None, view_id: str | None = None
    ) -> tuple[int | None, str]:
        """``user`` clicks a button of their Home tab, or of their open modal ``view_id``
        (a ``block_actions`` from a view)."""
        if view_id is None:
            view = self.workspace.home_views.get(user)
            if view is None:
                raise Refusal(404, "view_not_found")
        else:
            view = self._own_view(user, view_id).to_dict()
        try:
            payload = self.standin.click_view(user, view, action_id=action_id, block_id=block_id)
        except LookupError as exc:
            raise Refusal(404, "element_not_found", str(exc)) from exc
        return await self._deliver(payload)

    async def _home(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request, self._origins)
            user = self.person(_field(body, "user")).id
            status, text = await self.open_home(user)
        except Refusal as refusal:
            return _refused(refusal)
        return _app_reply(status, text)

    async def _action(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request, self._origins)
            user = self.person(_field(body, "user")).id
            if body.get("home") is True or _optional(body, "view_id"):
                status, text = await self.click_home(
                    user,
                    action_id=_field(body, "action_id"),
                    block_id=_optional(body, "block_id"),
                    view_id=_optional(body, "view_id"),
                )
                return _app_reply(status, text)
            status, text = await self.click(
                user,
                _field(body, "channel"),
                _field(body, "ts"),
                action_id=_field(body, "action_id"),
                block_id=_optional(body, "block_id"),
                values=_values(body.get("values")),
            )
        except Refusal as refusal:
            return _refused(refusal)
        return _app_reply(status, text)

    async def _submit(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request, self._origins)
            user = self.person(_field(body, "user")).id
            view_id = _field(body, "view_id")
            status, text = await self.submit(user, view_id, _values(body.get("values")))
        except Refusal as refusal:
            return _refused(refusal)
        reply = _app_reply(status, text)
        view = self.workspace.views.get(view_id)
        if status == 200 and view is not None and view.errors:
            return web.json_response(
                {"ok": False, "status": status, "error": "errors", "errors": view.errors}
            )
        return reply

    async def _close(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request, self._origins)
            user = self.person(_field(body, "user")).id
            await self.close_modal(user, _field(body, "view_id"))
        except Refusal as refusal:
            return _refused(refusal)
        return web.json_response({"ok": True})

    async def _post(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request, self._origins)
            user = self.person(_field(body, "user")).id
            channel = _field(body, "channel")
            text = body.get("text")
            if not isinstance(text, str) or not text.strip():
                raise Refusal(400, "no_text")
            if len(text) > MAX_POST_TEXT:
                raise Refusal(400, "msg_too_long")
            if text.strip() == DEMO_COMMAND:
                return web.json_response({"ok": True, "demo": self.start_demo()})
            message = self.post(user, channel, text, _optional(body, "thread_ts"))
        except Refusal as refusal:
            return _refused(refusal)
        return web.json_response({"ok": True, "ts": message.ts})

    async def _demo(self, request: web.Request) -> web.StreamResponse:
        try:
            await _json_body(request, self._origins)
            return web.json_response({"ok": True, "demo": self.start_demo()})
        except Refusal as refusal:
            return _refused(refusal)


def _refused(refusal: Refusal) -> web.Response:
    body = {"ok": False, "error": refusal.error}
    if refusal.detail:
        body["detail"] = refusal.detail
    return web.json_response(body, status=refusal.status)


def _page_origins(host: str, port: int) -> frozenset[str]:
    """The ``Origin``s of the page: the loopback names and the address it was started on,
    as a browser spells it (``http://127.0.0.2:3001``, ``http://[::1]:3001``)."""
    name = host.strip("[]").lower()
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(name)
        name = f"[{address.compressed}]" if address.version == 6 else address.compressed
    return frozenset(f"http://{n}:{port}" for n in {*_LOOPBACK_ORIGIN_HOSTS, name})


def _app_reply(status: int | None, text: str) -> web.Response:
    """The app's answer to a delivered interaction, for the page (Slack's text when the
    app did not answer in time)."""
    if status is None:
        return web.json_response(
            {"ok": False, "status": None, "error": ACK_TIMEOUT, "detail": ACK_TIMEOUT_TEXT},
            status=502,
        )
    if status == 200:
        return web.json_response({"ok": True, "status": status})
    detail = text[:300] if text else ""
    return web.json_response(
        {"ok": False, "status": status, "error": "app_error", "detail": detail}, status=502
    )


async def _json_body(request: web.Request, origins: frozenset[str]) -> dict[str, Any]:
    """The request's JSON object; only from the page itself (no cross-site form posts).

    A browser's ``Origin`` must be one of ``origins``, the addresses the sandbox serves.
    """
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower().rstrip("/") not in origins:
        raise Refusal(403, "cross_origin")
    if request.content_type != "application/json":
        raise Refusal(415, "json_required", "send Content-Type: application/json")
    if not request.body_exists:
        return {}
    try:
        body = await request.json()
    except ValueError:
        raise Refusal(400, "invalid_json") from None
    if not isinstance(body, dict):
        raise Refusal(400, "invalid_json", "expected a JSON object")
    return body


def _field(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise Refusal(400, "invalid_arguments", f"{key} is required")
    return value


def _optional(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Refusal(400, "invalid_arguments", f"{key} must be a string")
    return value


def _values(raw: object) -> dict[str | tuple[str, str], clicks.Selection]:
    """``[[block_id, action_id, selection], …]`` as ``clicks.Values``."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise Refusal(400, "invalid_arguments", "values must be a list")
    values: dict[str | tuple[str, str], clicks.Selection] = {}
    for entry in raw:
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[0], str)
            and isinstance(entry[1], str)
        ):
            raise Refusal(400, "invalid_arguments", "each value is [block_id, action_id, x]")
        selection = entry[2]
        if isinstance(selection, list):
            if not all(isinstance(item, str) for item in selection):
                raise Refusal(400, "invalid_arguments", "a selection lists option values")
            values[(entry[0], entry[1])] = list(selection)
        elif selection is None or isinstance(selection, str):
            values[(entry[0], entry[1])] = selection
        else:
            raise Refusal(400, "invalid_arguments", "a selection is a string, a list or null")
    return values
