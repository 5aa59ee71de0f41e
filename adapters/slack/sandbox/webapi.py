"""A local stand-in for Slack's Web API, served by aiohttp on 127.0.0.1.

::

    async with SlackStandIn() as slack:          # binds 127.0.0.1 on a free port
        alice = slack.workspace.add_user("alice")
        client = AsyncWebClient(token=slack.token, base_url=slack.url)
        posted = await client.chat_postMessage(channel=alice.id, blocks=[...], text="…")
        message = slack.workspace.message(posted["channel"], posted["ts"])
        payload = slack.click(message, user=alice.id, text="Approve")

Routes: ``/api/<method>`` (the methods of ``methods.WebApi``; a bearer token is required),
``/upload/<file id>`` (the URL ``files.getUploadURLExternal`` hands out) and
``/response/<token>`` (``response_url``s minted for interaction payloads). Every request is
recorded in ``calls``; ``faults`` can make any route rate-limit, fail, drop the connection or
stall. With ``rate_limits`` set (a ``RateLimiter``) Web API calls over Slack's published
limits get 429 with ``Retry-After``, as Slack answers them (logged with fault ``"limit"``).
State lives in ``workspace``; ``subscribe()`` / ``observe()`` report every change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final

import aiohttp
from aiohttp import web

from adapters.connections import ListenerLimits, start_listener
from adapters.httpguard import LOOPBACK_NAMES, RefusalLog, guard_middleware
from adapters.slack.sandbox import clicks
from adapters.slack.sandbox.blockcheck import check_message, view_problems
from adapters.slack.sandbox.calllog import Call, CallLog
from adapters.slack.sandbox.faults import Faults
from adapters.slack.sandbox.methods import WebApi
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.records import Change, Ephemeral, Message, SlackError
from adapters.slack.sandbox.signing import (
    block_actions_payload,
    build_event_request,
    send_interaction,
    view_submission_payload,
)
from adapters.slack.sandbox.state import Clock, Workspace

__all__ = ["ACK_DEADLINE", "ACK_TIMEOUT", "DEFAULT_TOKEN", "SlackStandIn"]

DEFAULT_TOKEN: Final = "xoxb-sandbox-token"
ACK_DEADLINE: Final = 3.0
"""Seconds Slack waits for the app's answer to an interaction (slack-platform.md §2.1)."""
ACK_TIMEOUT: Final = "ack_timeout"
"""The body ``deliver`` returns, with status ``None``, when the app missed ``ACK_DEADLINE``."""
_LATE_BY: Final = web.RequestKey("late_by", float)
"""Seconds a ``slow_stored`` fault holds the answer after the call was made."""
_GONE: Final = frozenset({"invalid_token", "expired_url", "used_url"})


class SlackStandIn:
    """Slack's Web API, ``response_url``s and file uploads, in memory, over real HTTP."""

    def __init__(
        self,
        workspace: Workspace | None = None,
        *,
        token: str = DEFAULT_TOKEN,
        clock: Clock = time.time,
        seed: int = 0,
        signing_secret: str | None = None,
        interactivity_url: str | None = None,
        rate_limits: RateLimiter | None = None,
        limits: ListenerLimits | None = None,
    ) -> None:
        self.workspace = workspace if workspace is not None else Workspace(clock=clock, seed=seed)
        self.token = token
        self.tokens: set[str] = {token}
        """Bearer tokens accepted; anything else gets ``invalid_auth``."""
        self.faults = Faults(seed)
        self.rate_limits = rate_limits
        """Slack's rate limits, enforced when set (off by default)."""
        self.calls = CallLog()
        self.connections: set[tuple[str, int]] = set()
        """The client addresses (host, port) Web API calls came from: one per connection."""
        self.signing_secret = signing_secret
        self.interactivity_url = interactivity_url
        """Where ``deliver`` POSTs signed payloads (the app's ``/slack/events``)."""
        self.api = WebApi(self.workspace, upload_url=lambda fid: f"{self.root_url}upload/{fid}")
        self.refusals = RefusalLog(logging.getLogger("adapters.slack.sandbox.http"))
        """Refused requests (foreign Host, slow bodies, malformed HTTP), counted per cause."""
        self.limits = limits or ListenerLimits()
        """Read timeouts and the connection cap of the listener."""
        self._served: frozenset[str] = LOOPBACK_NAMES
        self.app = web.Application(
            middlewares=[
                guard_middleware(
                    hosts=lambda name: name in self._served,
                    refuse=_refuse,
                    refusals=self.refusals,
                    body_timeout=self.limits.body_timeout,
                    # Uploads (up to Slack's 1 GB) are read as a stream by ``_upload``.
                    streamed=lambda request: request.path.startswith("/upload/"),
                )
            ]
        )
        self.app.router.add_route("*", "/api/{method}", self._api)
        self.app.router.add_post("/upload/{file_id}", self._upload)
        self.app.router.add_post("/response/{token:.+}", self._response_url)
        self._runner: web.AppRunner | None = None
        self._root: str | None = None
        self._queues: dict[asyncio.Queue[Change], Callable[[], None]] = {}

    # Lifecycle.

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 picks a free port); returns the API base URL."""
        if self._runner is not None:
            return self.url
        self._served = LOOPBACK_NAMES | {host.lower().strip("[]")}
        # A short shutdown: ``stop()`` should not wait out a long injected delay.
        runner = await start_listener(
            self.app,
            host,
            port,
            limits=self.limits,
            refusals=self.refusals,
            shutdown_timeout=1.0,
        )
        self._runner = runner
        bound_port = runner.addresses[0][1]
        self._root = f"http://{f'[{host}]' if ':' in host else host}:{bound_port}/"
        return self.url

    async def stop(self) -> None:
        """Stop serving and close every subscription."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for queue in list(self._queues):
            self.unsubscribe(queue)

    async def __aenter__(self) -> SlackStandIn:
        """Start on a free port."""
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
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>/`` once started."""
        if self._root is None:
            raise RuntimeError("the Slack stand-in is not started")
        return self._root

    @property
    def addresses(self) -> list[Any]:
        """The socket addresses served, as ``(host, port, …)`` tuples."""
        return list(self._runner.addresses) if self._runner is not None else []

    @property
    def url(self) -> str:
        """The Web API base URL for ``AsyncWebClient(base_url=...)``."""
        return f"{self.root_url}api/"

    # Observers.

    def observe(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback`` on every state change; returns the function that stops it."""
        return self.workspace.observe(callback)

    def subscribe(self) -> asyncio.Queue[Change]:
        """A queue that receives every state change from now on."""
        queue: asyncio.Queue[Change] = asyncio.Queue()
        self._queues[queue] = self.workspace.observe(queue.put_nowait)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change]) -> None:
        """Stop feeding ``queue``."""
        stop = self._queues.pop(queue, None)
        if stop is not None:
            stop()

    # Acting as a person.

    def new_trigger_id(self, user: str, *, view_id: str | None = None) -> str:
        """A trigger id for an interaction by ``user``: valid once, for three seconds."""
        return self.workspace.issue_trigger(user, view_id=view_id)

    def new_response_url(
        self,
        channel: str,
        user: str,
        message_ts: str | None = None,
        *,
        is_ephemeral: bool = False,
    ) -> str:
        """A ``response_url`` for an interaction by ``user`` on a message (five uses)."""
        token = self.workspace.issue_response_url(
            channel, user, message_ts, is_ephemeral=is_ephemeral
        )
        return f"{self.root_url}response/{token}"

    def click(
        self,
        message: Message | Ephemeral,
        *,
        user: str,
        action_id: str | None = None,
        block_id: str | None = None,
        text: str | None = None,
        values: clicks.Values | None = None,
    ) -> dict[str, Any]:
        """The ``block_actions`` payload of ``user`` clicking an element of ``message``.

        The element is found by ``action_id``/``block_id`` or by the ``text`` on a button or
        an option (choosing that option). ``values`` are the selections of the message's
        stateful elements (see ``clicks``); ``state.values`` covers all of them. A fresh
        trigger id and ``response_url`` are minted.
        """
        is_ephemeral = isinstance(message, Ephemeral)
        if is_ephemeral and message.user != user:
            raise ValueError(f"{user} cannot see ephemeral message {message.ts}")
        blocks = message.blocks
        try:
            target, option = clicks.find_target(
                blocks, action_id=action_id, block_id=block_id, text=text
            )
        except LookupError:
            # A click on a version of the message the page still showed (it changed a
            # moment ago, as after a simultaneous click): Slack delivers it all the same.
            blocks = _shown(message, action_id, block_id)
            target, option = clicks.find_target(blocks, action_id=action_id, block_id=block_id)
        chosen = clicks.with_choice(target, option, values or {})
        action = clicks.action_entry(
            target, clicks.selection_of(target, chosen), f"{self.workspace.clock():.6f}"
        )
        channel = self.workspace.channels[message.channel]
        return block_actions_payload(
            self.workspace.user_ref(user),
            {"id": channel.id, "name": channel.name},
            message.to_dict(),
            action,
            state_values=clicks.state_values(blocks, chosen),
            trigger_id=self.new_trigger_id(user),
            response_url=self.new_response_url(
                channel.id, user, message.ts, is_ephemeral=is_ephemeral
            ),
            is_ephemeral=is_ephemeral,
            team={"id": self.workspace.team_id, "domain": self.workspace.domain},
            api_app_id=self.workspace.app_id,
        )

    def click_view(
        self,
        user: str,
        view: Mapping[str, Any],
        *,
        action_id: str | None = None,
        block_id: str | None = None,
        text: str | None = None,
    ) -> dict[str, Any]:
        """The ``block_actions`` payload of ``user`` clicking a button of ``view`` (a view
        object: an open modal, or their Home tab), found as ``click`` finds one."""
        target, option = clicks.find_target(
            view.get("blocks") or [], action_id=action_id, block_id=block_id, text=text
        )
        chosen = clicks.with_choice(target, option, {})
        ws = self.workspace
        action = clicks.action_entry(
            target, clicks.selection_of(target, chosen), f"{ws.clock():.6f}"
        )
        modal = view.get("type") == "modal"
        return {
            "type": "block_actions",
            "user": ws.user_ref(user),
            "api_app_id": ws.app_id,
            "team": {"id": ws.team_id, "domain": ws.domain},
            "container": {"type": "view", "view_id": view["id"]},
            "trigger_id": self.new_trigger_id(user, view_id=view["id"] if modal else None),
            "view": dict(view),
            "actions": [action],
            "state": {"values": {}},
        }

    def submission(self, view_id: str, *, values: clicks.Values | None = None) -> dict[str, Any]:
        """The ``view_submission`` payload of the view's user pressing Submit."""
        view = self.workspace.find_view(view_id=view_id)
        view.values = clicks.state_values(view.definition.get("blocks") or [], values or {})
        return view_submission_payload(
            self.workspace.user_ref(view.user),
            view.to_dict(),
            view.values,
            trigger_id=self.new_trigger_id(view.user, view_id=view.id),
            team={"id": self.workspace.team_id, "domain": self.workspace.domain},
            api_app_id=self.workspace.app_id,
        )

    async def deliver(self, payload: Mapping[str, Any]) -> tuple[int | None, str]:
        """Sign and POST ``payload`` to ``interactivity_url``; apply a submission's answer.

        For ``view_submission`` the app's ``response_action`` is applied as Slack would:
        ``errors``, ``update``, ``push``, ``clear``, or (empty body) close the view.
        Slack waits ``ACK_DEADLINE`` seconds and no longer: an app that answers later gets
        ``(None, ACK_TIMEOUT)``, the person sees an error and the answer is ignored.
        """
        if self.interactivity_url is None or self.signing_secret is None:
            raise RuntimeError("set interactivity_url and signing_secret to deliver payloads")
        try:
            async with aiohttp.ClientSession() as session, asyncio.timeout(ACK_DEADLINE):
                status, body = await send_interaction(
                    session, self.interactivity_url, payload, self.signing_secret
                )
        except TimeoutError:
            return None, ACK_TIMEOUT
        if payload.get("type") == "view_submission" and status == 200:
            self._apply_view_response(payload["view"]["id"], body)
        return status, body

    async def deliver_event(self, event: Mapping[str, Any]) -> tuple[int, str]:
        """Sign and POST an Events API ``event_callback`` with ``event`` to the app."""
        if self.interactivity_url is None or self.signing_secret is None:
            raise RuntimeError("set interactivity_url and signing_secret to deliver events")
        body, headers = build_event_request(
            event,
            self.signing_secret,
            team_id=self.workspace.team_id,
            api_app_id=self.workspace.app_id,
        )
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.interactivity_url, data=body.encode(), headers=headers) as response,
        ):
            return response.status, await response.text()

    async def open_home(self, user: str) -> tuple[int, str]:
        """``user`` opens the app's Home tab: the ``app_home_opened`` event."""
        event: dict[str, Any] = {
            "type": "app_home_opened",
            "user": user,
            "channel": f"D{user[1:]}",
            "tab": "home",
            "event_ts": f"{self.workspace.clock():.6f}",
        }
        previous = self.workspace.home_views.get(user)
        if previous is not None:
            event["view"] = previous
        return await self.deliver_event(event)

    def _apply_view_response(self, view_id: str, body: str) -> None:
        answer = json.loads(body) if body.strip() else {}
        action = answer.get("response_action") if isinstance(answer, dict) else None
        ws = self.workspace
        view = ws.find_view(view_id=view_id)
        if action == "errors":
            ws.set_view_errors(view_id, answer.get("errors") or {})
        elif action in ("update", "push"):
            problems = [str(p) for p in view_problems(answer.get("view"))]
            if problems:
                raise ValueError(f"the app answered with an invalid view: {problems}")
            if action == "update":
                ws.update_view(view, answer["view"])
            else:
                ws.push_view(view.user, answer["view"])
        else:
            ws.close_view(view_id, everything=action == "clear")

    # HTTP.

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.connections.add((str(peer[0]), int(peer[1])))
        try:
            params = await _params(request)
        except ValueError:
            return self._answer(method, {}, {"ok": False, "error": "invalid_json"})
        header = request.headers.get("Authorization", "")
        body_token = params.pop("token", None)
        faulted = await self._fault(request, method, params)
        if isinstance(faulted, web.StreamResponse):
            return faulted
        token = header[len("Bearer ") :].strip() if header.startswith("Bearer ") else body_token
        if not token:
            return self._answer(method, params, {"ok": False, "error": "not_authed"}, faulted)
        if token not in self.tokens:
            return self._answer(method, params, {"ok": False, "error": "invalid_auth"}, faulted)
        retry_after = (
            self.rate_limits.check(method, params, conversation=self._conversation_id)
            if self.rate_limits
            else None
        )
        if retry_after is not None:
            return self._limited(method, params, retry_after, "limit")
        answer = self.api.call(method, params)
        late = request.get(_LATE_BY)
        if late:  # "slow_stored": done and stored, but the answer comes only now
            await asyncio.sleep(late)
        return self._answer(method, params, answer, faulted)

    def _conversation_id(self, ref: str) -> str:
        """The id of the conversation ``ref`` names (``#name``, ``C…``, a user's DM), as Slack
        counts per conversation; a ref that names none stays as it is. A user id opens their
        DM, as the post itself would."""
        try:
            return self.workspace.channel(ref, users_open_dm=True).id
        except SlackError:
            return ref

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        # Slack takes files up to 1 GB, far past aiohttp's 1 MB request cap: read the body
        # as a stream, up to the length reserved by files.getUploadURLExternal.
        reserved = self.workspace.files.get(file_id)
        limit = (reserved.length if reserved is not None else 0) + 1
        chunks: list[bytes] = []
        size = 0
        while size < limit and (chunk := await request.content.read(min(1 << 20, limit - size))):
            chunks.append(chunk)
            size += len(chunk)
        content = b"".join(chunks)
        params = {"file_id": file_id, "length": len(content)}
        faulted = await self._fault(request, "upload", params)
        if isinstance(faulted, web.StreamResponse):
            return faulted
        try:
            self.workspace.receive_upload(file_id, content)
        except SlackError as refusal:
            self._log("upload", params, 404, {"ok": False, "error": refusal.code}, faulted)
            return web.Response(status=404, text=refusal.code, content_type="text/plain")
        self._log("upload", params, 200, {"ok": True}, faulted)
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    async def _response_url(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        try:
            body = await request.json()
        except ValueError:
            body = None
        params = {"token": token, **(body if isinstance(body, dict) else {})}
        faulted = await self._fault(request, "response_url", params)
        if isinstance(faulted, web.StreamResponse):
            return faulted
        status, answer = self._respond(token, body)
        self._log("response_url", params, status, answer, faulted)
        return web.json_response(answer, status=status)

    def _respond(self, token: str, body: object) -> tuple[int, dict[str, Any]]:
        if not isinstance(body, dict):
            return 400, {"ok": False, "error": "invalid_payload"}
        blocks = body.get("blocks")
        problems = check_message(blocks or [], body.get("text")) if blocks is not None else []
        if problems:
            return 400, {"ok": False, "error": "invalid_blocks", "errors": problems}
        try:
            self.workspace.respond(token, body)
        except SlackError as refusal:
            return (404 if refusal.code in _GONE else 400), {"ok": False, "error": refusal.code}
        return 200, {"ok": True}

    async def _fault(
        self, request: web.Request, method: str, params: dict[str, Any]
    ) -> web.StreamResponse | str | None:
        """An injected failure response, the name of a delay that passed, or ``None``."""
        fault = self.faults.draw(method)
        if fault is None:
            return None
        if fault.kind == "delay":
            await asyncio.sleep(fault.delay)
            return fault.kind
        if fault.kind == "slow_stored":
            request[_LATE_BY] = fault.delay
            return fault.kind
        if fault.kind == "drop":
            self._log(method, params, 0, None, fault.kind)
            if request.transport is not None:
                request.transport.close()
            return web.Response()
        if fault.kind == "ratelimit":
            return self._limited(method, params, fault.retry_after, fault.kind)
        if fault.kind == "rate_limited":  # chat.postMessage's own code: HTTP 200, no header
            return self._answer(method, params, {"ok": False, "error": "rate_limited"}, fault.kind)
        answer = {"ok": False, "error": "internal_error"}
        self._log(method, params, fault.status, answer, fault.kind)
        return web.json_response(answer, status=fault.status)

    def _limited(
        self, method: str, params: dict[str, Any], retry_after: int, why: str
    ) -> web.Response:
        answer = {"ok": False, "error": "ratelimited"}
        self._log(method, params, 429, answer, why)
        return web.json_response(answer, status=429, headers={"Retry-After": str(retry_after)})

    def _answer(
        self,
        method: str,
        params: dict[str, Any],
        answer: dict[str, Any],
        fault: str | None = None,
    ) -> web.Response:
        self._log(method, params, 200, answer, fault)
        return web.json_response(answer)

    def _log(
        self,
        method: str,
        params: dict[str, Any],
        status: int,
        answer: dict[str, Any] | None,
        fault: str | None,
    ) -> None:
        self.calls.record(Call(method, params, status, answer, fault, self.workspace.clock()))


def _refuse(status: int, code: str, message: str) -> web.Response:
    """A refusal of the HTTP layer, in the Web API's ``{ok, error}`` shape."""
    return web.json_response({"ok": False, "error": code.lower(), "detail": message}, status=status)


async def _params(request: web.Request) -> dict[str, Any]:
    """Query string plus JSON or form body, the ways slack_sdk sends parameters."""
    params: dict[str, Any] = dict(request.query)
    if not request.body_exists:
        return params
    if request.content_type == "application/json":
        body = await request.json()
        if isinstance(body, dict):
            params.update(body)
    else:
        form = await request.post()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    return params


def _shown(message: Message | Ephemeral, action_id: str | None, block_id: str | None) -> Any:
    """The blocks of the latest earlier version of ``message`` holding the element a page
    names by its ``block_id`` (``LookupError`` when no version does)."""
    earlier = message.edits if isinstance(message, Message) and block_id else []
    for revision in reversed(earlier):
        if any(t.block_id == block_id for t in clicks.targets(revision.blocks)):
            return revision.blocks
    raise LookupError(f"no version of the message holds block {block_id!r} ({action_id})")
