"""The HTTP API (``/v1``) for agents outside the process: ask, read (long-poll), abort, audit.
Its questions are owned by no process (any answers them with a durable store); the token is
checked before any of a body is read."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aiohttp import web

from adapters.httpguard import BodyRule, RefusalLog, with_body_rule
from adapters.slack import (
    CONSUME_REFUSALS,
    ApprovalView,
    QuestionStatus,
    Released,
    SlackQuestionProvider,
)
from bot.api import answers, asking
from bot.api.access import ApiTokens, OpenQuestionCaps, PollCaps, asked_by
from bot.api.audit import Handler, audit_handler
from bot.api.body import ApprovalPost, Post, QuestionPost
from bot.api.openapi import document_text
from bot.api.taken import Held
from bot.questions.abort import AbortController, AbortSignal
from bot.questions.errors import ASK_ABORTED, HarnessError
from bot.questions.models import AskOptions, AskUserQuestionRequest
from bot.questions.service import UserQuestionService
from bot.webhooks import Webhooks

MAX_WAIT: Final = 120.0
"""Longest long-poll a ``GET ?wait=`` may ask for, in seconds."""
ASKER: Final = web.RequestKey[str | None]("asker")
"""The name of the API token a request came with (``None`` on an open API)."""
POST_DEADLINE: Final = 30.0
"""How long ``POST`` waits for Slack to take the message before answering 202."""


class Gateway:
    """The ``/v1`` routes, bound to one service and the provider holding its questions."""

    def __init__(
        self,
        service: UserQuestionService,
        questions: SlackQuestionProvider,
        *,
        tokens: Mapping[str, str],
        caps: OpenQuestionCaps,
        max_body_bytes: int | None,
        refusals: RefusalLog,
        default_channel: str | None,
        approve: Callable[[ApprovalView, AskOptions, AbortSignal], Awaitable[QuestionStatus]],
        webhooks: Webhooks,
        polls: tuple[int, int],
        approval_ttl: float,
    ) -> None:
        self.webhooks = webhooks  # delivers the endings of questions asked with a callback
        self._service = service
        self._approve = approve  # asks a tool approval: the provider's, with DSH_APPROVERS
        self._default_channel = default_channel
        self._max_body = max_body_bytes
        self._questions = questions
        self._tokens = ApiTokens(tokens)
        self._caps = caps
        self._logger = logging.getLogger("bot.gateway")
        self.refusals = refusals
        self._failures = RefusalLog(self._logger)  # bugs: a traceback a minute per kind
        self.polls = PollCaps(*polls)
        self._ttl = approval_ttl  # seconds an answer may be consumed after it was given
        self._asks: dict[str, AbortController] = {}  # asks being posted, by request id
        self._keys = asking.KeyLocks()
        self.polls_ended = asyncio.Event()  # set at shutdown: every long-poll answers now
        self.held = Held(self._caps, self._tokens, questions.report_ending, self._logger)

    def add_routes(self, app: web.Application) -> None:
        """Add the ``/v1`` routes, each with a ``BodyRule`` for the server's guard (the token
        checked before any of a body is read, at most ``MAX_BODY_BYTES`` read)."""
        rule = BodyRule(admit=self._admitted, max_body=self._max_body)
        routes: list[tuple[str, str, Handler]] = [
            ("POST", "/v1/questions", functools.partial(self.post, QuestionPost)),
            ("POST", "/v1/approvals", functools.partial(self.post, ApprovalPost)),
            ("GET", "/v1/questions/{id}", self.get_question),
            ("DELETE", "/v1/questions/{id}", self.delete_question),
            ("POST", "/v1/questions/{id}/consume", self.consume_question),
            ("GET", "/v1/audit", audit_handler(self._questions.audit, self._owns)),
            ("GET", "/v1/openapi.json", _openapi),
        ]
        for method, path, handler in routes:  # a GET answers HEAD too
            guarded = with_body_rule(self._guarded(handler), rule)
            app.router.add_routes([web.route(method, path, guarded, expect_handler=rule.expect)])

    def _admitted(self, request: web.Request) -> web.Response | None:
        """The 401 for a request without a valid token; ``None`` (``ASKER`` set) when it may. Asked
        by the server's guard before the body is read, and again by the route."""
        named = self._tokens.bearer(request.headers.get("Authorization", ""))
        if isinstance(named, tuple):
            self.refusals.refused(named[0], f"/v1: {named[1]}")
            return answers.unauthorized(named[1])
        request[ASKER] = named
        return None

    def _guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the token check, a question id the token may see (404 for one it
        may not), and the API's one error boundary (``failure``)."""

        async def guarded(request: web.Request) -> web.StreamResponse:
            refused = self._admitted(request)
            if refused is not None:
                return refused
            request_id = request.match_info.get("id")
            if request_id is not None and not self._owns(request, request_id):
                return answers.not_found(request_id)
            try:
                return await handler(request)
            except web.HTTPException:  # aiohttp's own answers
                raise
            except Exception as error:  # e.g. STORE_UNAVAILABLE during a Redis outage
                return answers.failure(error, self._failures)

        return guarded

    def close(self) -> None:
        """Refuse new questions; release the waiters of those asked here (they stay open)."""
        self.held.closing = True
        for controller in self._asks.values():
            controller.abort(Released())

    @property
    def running(self) -> int:
        """Questions asked by this process that have not ended yet (being posted, or held)."""
        held = self.held.asked
        return sum(1 for i in self._asks if i not in held) + sum(held.values())

    def _owns(self, request: web.Request, request_id: str) -> bool:
        """Whether the request's token may see question ``request_id`` (and its trail)."""
        return self._tokens.owns(request[ASKER], request_id)

    async def post(self, model: type[Post], request: web.Request) -> web.StreamResponse:
        """Ask what the JSON body asks as ``model`` (wire names only): a question, or a tool
        approval (Allow once / Reject); 201 once Slack has the message."""
        if self.held.closing:
            return asking.shutting_down()
        if request.content_type != "application/json":
            return answers.request_problem(415, "UNSUPPORTED_MEDIA_TYPE", "send application/json")
        # the server's guard has read it whole, within the route's BodyRule (413 otherwise)
        post = asking.read_post(await request.read(), model)
        if isinstance(post, web.Response):
            return post
        return await self._take(request, post)

    async def _take(self, request: web.Request, post: Post) -> web.StreamResponse:
        """Ask ``post`` under the request's Idempotency-Key: the question it asked (if it asks
        the same: a retry, not a reuse), or a new one."""
        key = request.headers.get("Idempotency-Key")
        bad_key = asking.key_problem(key)
        if bad_key is not None:
            self.refusals.refused("bad_idempotency_key", f"/v1: {bad_key}")
            return answers.request_problem(400, "BAD_IDEMPOTENCY_KEY", bad_key)
        asker = request[ASKER]
        request_id = self._tokens.tagged_id(asker, key) or self._questions.request_id_for(
            f"api:{key}" if key else None
        )
        async with self._keys.held(request_id):  # retries with one key: only the first posts
            existing = await self._questions.status(request_id)
            lookup = request.headers.get("If-Match", "").strip() == "*"
            channel = self._default_channel
            replay = asking.replayed(existing, post, channel, key, request_id, lookup, self._ttl)
            if replay is not None:
                return replay
            owns = functools.partial(self._owns, request)
            refused = asking.unready(post, self._questions, owns, self.webhooks, asker)
            if refused is not None:
                return refused
            if self.held.closing:  # the stop began while the key was looked up
                return asking.shutting_down()
            refusal = self._caps.refusal(asker)
            if refusal is not None:
                self.refusals.refused("too_many_questions", f"/v1: {refusal}")
                return answers.too_many(refusal)
            self._caps.take(request_id, asker)  # no await between the check and this
            return await self._start(request_id, post, asked_by(asker))

    async def _start(self, request_id: str, post: Post, by: str) -> web.StreamResponse:
        posted = asyncio.get_running_loop().create_future()
        controller = AbortController()

        def on_posted(_: str) -> None:
            if not posted.done():
                posted.set_result(None)
                controller.abort(Released())  # nothing waits on it here once posted

        options = asking.ask_options(post, request_id, by, on_posted)
        signal = controller.signal
        asks: Awaitable[Any]  # a question, or a tool approval
        if isinstance(post, QuestionPost):
            asked = AskUserQuestionRequest(questions=post.questions, options=options, signal=signal)
            asks = self._service.ask(asked)
        else:
            asks = self._approve(post.view(), options, signal)
        task = asyncio.ensure_future(self.held.ask(request_id, asks))
        self._asks[request_id] = controller
        task.add_done_callback(lambda t: self._finished(request_id, t))
        done, _ = await asyncio.wait(
            {task, posted}, timeout=POST_DEADLINE, return_when="FIRST_COMPLETED"
        )
        question = await self._questions.status(request_id)
        if task in done and not posted.done():
            error = task.exception()
            # Handed over at a stop, its post not sent yet: open, posted by the next process.
            if error is not None and (question is None or not question.is_open):
                stopped = isinstance(error, HarnessError) and error.code == ASK_ABORTED
                if question is None and self.held.closing and stopped:
                    return asking.shutting_down()  # refused by the stop before it was stored
                raise error  # answered by _failure, in _guard
        view = {"id": request_id, "state": "pending"}
        view = answers.view_of(question, self._ttl) if question is not None else view
        return asking.located(view, 201 if posted.done() else 202, request_id)

    def _finished(self, request_id: str, task: asyncio.Task[Any]) -> None:
        self._asks.pop(request_id, None)
        if request_id not in self.held.asked:  # ended before it was posted (or at a stop)
            self._caps.give_back(request_id)
            self.held.log_end(request_id, None if task.cancelled() else task.exception())

    async def get_question(self, request: web.Request) -> web.StreamResponse:
        """Read a question's state, waiting up to ``?wait=`` seconds for it to end."""
        request_id = request.match_info["id"]
        wait = answers.wait_of(request, MAX_WAIT)
        if isinstance(wait, web.Response):
            return wait
        question = await self._questions.status(request_id)
        if question is None:
            return answers.not_found(request_id)
        if question.is_open and wait > 0 and not self.polls_ended.is_set():
            asker = request[ASKER]
            held = self.polls.refusal(asker)
            if held is not None:
                self.refusals.refused("too_many_waits", "/v1: long-polls over their cap")
                refused = answers.too_many(f"{held} long-polls are waiting", "TOO_MANY_WAITS")
                refused.force_close()  # the connection too
                return refused
            with self.polls.held(asker):
                question = await _long_poll(self._questions, question, wait, self.polls_ended)
        return web.json_response(
            answers.view_of(question, self._ttl, await self._questions.events(request_id))
        )

    async def delete_question(self, request: web.Request) -> web.StreamResponse:
        """Abort an open question (``ASK_ABORTED``); the Slack message says so."""
        request_id = request.match_info["id"]
        by = asked_by(request[ASKER])
        question = await self._questions.abort(request_id, "Cancelled by the asker.", by=by)
        if question is None:
            return answers.not_found(request_id)
        status = 200 if question.state == "aborted" else 409
        return web.json_response(answers.view_of(question, self._ttl), status=status)

    async def consume_question(self, request: web.Request) -> web.StreamResponse:
        """Consume an answered question's decision, once and before its ``expiresAt``."""
        request_id = request.match_info["id"]
        by = asked_by(request[ASKER])
        code, question = await self._questions.consume(request_id, by=by, lifetime=self._ttl)
        if question is None:
            return answers.not_found(request_id)
        if code is not None:  # 410 when expired, 409 otherwise
            status = 410 if code == "EXPIRED" else 409
            return answers.request_problem(status, code, CONSUME_REFUSALS[code])
        return web.json_response(answers.view_of(question, self._ttl))


async def _openapi(request: web.Request) -> web.StreamResponse:
    return web.Response(text=document_text(), content_type="application/json")


async def _long_poll(
    questions: SlackQuestionProvider, question: QuestionStatus, wait: float, released: asyncio.Event
) -> QuestionStatus:
    """``question`` once it ends, or as it stands after ``wait`` seconds or once ``released``."""
    ended = asyncio.ensure_future(questions.wait_ended(question.id))
    release = asyncio.ensure_future(released.wait())
    try:
        await asyncio.wait({ended, release}, timeout=wait, return_when="FIRST_COMPLETED")
    finally:
        for task in (ended, release):
            task.cancel()
    if ended.done() and not ended.cancelled() and ended.exception() is None:
        return ended.result()
    return await questions.status(question.id) or question
