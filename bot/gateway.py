"""The HTTP API for agents outside the process: ask, read (long-poll), abort.

    POST   /v1/questions            {"questions":[...], "destination"?: {...}} -> 201 {id, state}
           (with Idempotency-Key and If-Match: * it only finds what the key asked: 200 or 412)
    GET    /v1/questions/{id}?wait=SECONDS                         -> 200 {id, state, answer?}
    DELETE /v1/questions/{id}                                      -> 200 {id, state: aborted}
    GET    /v1/audit?since=…&until=…                 -> the audit trail as JSON lines
    GET    /v1/openapi.json                                        -> the OpenAPI document

Questions live in the provider's pending store, owned by no process: they outlive the
process that asked them (a stop releases its waiters, it does not end the questions), and
with a durable store any process, a restarted one too, answers a ``GET`` or ``DELETE``.
Every route needs ``Authorization: Bearer <BOT_API_TOKEN>`` when a token is configured
(without one the bot listens on loopback only); it is checked before any of a request's
body is read, and a body is read up to ``MAX_BODY_BYTES`` only. With several tokens a
token sees only its own questions and their trail; the trail names the token that asked
(``api:<name>``; ``api`` on an open API).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from importlib import resources
from typing import Any, Final, Protocol, TypeVar

from aiohttp import web
from pydantic import ValidationError

from adapters.httpguard import BodyRule, RefusalLog, with_body_rule
from adapters.slack import (
    AuditEvent,
    QuestionStatus,
    Released,
    WaitReleased,
    plan_review_of,
    unknown_revised,
)
from bot.access import ApiTokens, OpenQuestionCaps, asked_by
from bot.api_answers import (
    error_answer,
    failure,
    not_found,
    problem,
    too_many,
    unauthorized,
    view_of,
    view_with_events,
    wait_of,
)
from bot.api_approvals import ApprovalPost, Approve, same_approval
from bot.api_body import (
    DeadlineDefaults,
    QuestionPost,
    body_problems,
    error_count,
    never_applied,
    read_body,
    validation_errors,
)
from bot.api_idempotency import KeyLocks, key_problem, same_request
from bot.api_taken import TakenUp
from bot.audit import audit_handler
from bot.questions.abort import AbortController, AbortSignal
from bot.questions.errors import (
    ASK_ABORTED,
    BAD_REVIEW,
    DELIVERY_FAILED,
    NO_PROVIDER,
    HarnessError,
    UserQuestionError,
)
from bot.questions.models import (
    AskOptions,
    AskUserQuestionRequest,
)
from bot.questions.service import UserQuestionService
from bot.webhooks import Webhooks

__all__ = ["ASKER", "MAX_WAIT", "Gateway", "Questions"]

MAX_WAIT: Final = 120.0
"""Longest long-poll a ``GET ?wait=`` may ask for, in seconds."""
ASKER: Final = web.RequestKey[str | None]("asker")
"""The name of the API token a request came with (``None`` on an open API)."""
RETRY_AFTER: Final = 5
"""Seconds a client over an open-question cap is told to wait (``Retry-After``)."""
POST_DEADLINE: Final = 30.0
"""How long ``POST`` waits for Slack to take the message before answering 202."""


class Questions(Protocol):
    """What the API needs of whoever holds the questions (``SlackQuestionProvider``)."""

    def request_id_for(self, key: str | None = None) -> str:
        """The id of the request asked with idempotency ``key``; a new id without a key."""
        ...

    @property
    def defaults(self) -> DeadlineDefaults:
        """The deadline a question gets where its request says nothing (``QUESTION_TIMEOUT``)."""
        ...

    async def status(self, request_id: str) -> QuestionStatus | None:
        """Where a question stands (asked by any process); ``None`` if unknown."""
        ...

    async def wait_ended(self, request_id: str) -> QuestionStatus:
        """Wait until a question ends (cancel to stop waiting)."""
        ...

    async def abort(
        self, request_id: str, note: str, *, by: str | None = None
    ) -> QuestionStatus | None:
        """Abort an open question (``by``: who, for the audit trail); ``None`` if unknown."""
        ...

    async def events(self, request_id: str) -> list[AuditEvent]:
        """A question's audit trail, oldest first."""
        ...

    def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every audit event with ``since <= at < until``, in the order appended."""
        ...


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_Post = TypeVar("_Post", QuestionPost, ApprovalPost)


class Gateway:
    """The ``/v1`` routes, bound to one service and the provider holding its questions."""

    def __init__(
        self,
        service: UserQuestionService,
        questions: Questions,
        *,
        tokens: Mapping[str, str] | None = None,
        caps: OpenQuestionCaps | None = None,
        max_body_bytes: int | None = None,
        logger: logging.Logger | None = None,
        refusals: RefusalLog | None = None,
        default_channel: str | None = None,
        approve: Approve | None = None,
        webhooks: Webhooks | None = None,
    ) -> None:
        self.webhooks = webhooks
        """Delivers the endings of questions asked with a ``callback``."""
        self._service = service
        self._approve = approve
        """Asks a tool approval of the operator's approvers (``DSH_APPROVERS``)."""
        self._default_channel = default_channel
        self._max_body = max_body_bytes
        self._questions = questions
        self._tokens = ApiTokens(tokens or {})
        self._caps = caps or OpenQuestionCaps(per_process=10_000, per_token=1_000)
        self._logger = logger or logging.getLogger("bot.gateway")
        self.refusals = refusals or RefusalLog(self._logger)
        self._failures = RefusalLog(self._logger)  # bugs: a traceback a minute per kind
        """Refused requests, counted per cause (logged at most once a minute each)."""
        self.long_polls = 0
        """``GET ?wait=`` requests waiting right now."""
        self._asks: dict[str, asyncio.Task[Any]] = {}
        self._waiting: dict[str, AbortController] = {}
        self._keys = KeyLocks()
        self._closing = False
        self._polls_ended = asyncio.Event()
        self._taken = TakenUp(self._caps, self._tokens, questions.wait_ended, self._logger)

    def add_routes(self, app: web.Application) -> None:
        """Add the ``/v1`` routes to ``app``.

        Each carries a ``BodyRule`` for the server's guard (``guard_middleware``): the token
        is checked before any of a body is read (a request without it gets its 401 at once),
        and a body is read up to ``MAX_BODY_BYTES`` only (413 past it).
        """
        rule = BodyRule(admit=self._admit, max_body=self._max_body)

        def ruled(handler: Handler) -> Handler:
            return with_body_rule(self._guard(handler), rule)

        router, expect = app.router, rule.expect
        router.add_post("/v1/questions", ruled(self.post_question), expect_handler=expect)
        router.add_post("/v1/approvals", ruled(self.post_approval), expect_handler=expect)
        router.add_get("/v1/questions/{id}", ruled(self.get_question), expect_handler=expect)
        router.add_delete("/v1/questions/{id}", ruled(self.delete_question), expect_handler=expect)
        trail = audit_handler(self._questions.audit, visible=self._owns)
        router.add_get("/v1/audit", ruled(trail), expect_handler=expect)
        router.add_get("/v1/openapi.json", ruled(self.openapi), expect_handler=expect)

    def close(self) -> None:
        """Refuse new questions, and stop waiting on the ones asked here (shutdown has begun).

        Questions asked over the API are owned by no process: they are released, not
        ended, and stay open (in the store and in Slack) for the next process to serve.
        """
        self._closing = True
        self._taken.close()
        for controller in self._waiting.values():
            controller.abort(Released())

    @property
    def taken_up(self) -> int:
        """Questions taken up at start that hold a slot of the caps now."""
        return self._taken.count

    def take_up(self, questions: Iterable[QuestionStatus]) -> int:
        """Count the open API questions among ``questions`` (taken up at start) in the
        open-question caps until each ends; how many."""
        return self._taken.take(questions)

    def end_polls(self) -> None:
        """Answer every long-poll still waiting with its question's current state (shutdown)."""
        self._polls_ended.set()

    @property
    def running(self) -> int:
        """Asks started by this process that have not ended yet."""
        return len(self._asks)

    def _admit(self, request: web.Request) -> web.Response | None:
        """The 401 for a request without a valid token; ``None`` (and ``ASKER`` set) when
        it may go on. Asked by the server's guard before the body is read, and again here
        should the routes be served without it."""
        request[ASKER] = None
        if self._tokens.required:
            header = request.headers.get("Authorization", "")
            scheme, _, given = header.partition(" ")
            if not header.isascii():
                return self._unauthorized("bad_authorization", "Authorization is not ASCII")
            name = self._tokens.identify(given.strip())
            if scheme.lower() != "bearer" or name is None:
                return self._unauthorized("unauthorized", "a valid bearer token is required")
            request[ASKER] = name
        return None

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            refused = self._admit(request)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except web.HTTPException:  # aiohttp's own answers
                raise
            except Exception as error:  # e.g. STORE_UNAVAILABLE during a Redis outage
                return failure(error, self._failures)

        return guarded

    def _owns(self, request: web.Request, request_id: str) -> bool:
        """Whether the request's token may see question ``request_id`` (and its trail)."""
        return self._tokens.owns(request[ASKER], request_id)

    def _may_revise(self, request: web.Request, post: QuestionPost) -> bool:
        """Whether the plan review ``post`` revises (if any) is one the request's token may
        see. Another token's is unknown to this one, as it is to ``GET``: the provider
        would show its plan and link its message, and would tell it from a made-up id.
        A body that is no plan review is left to the provider (``BAD_REVIEW`` for that,
        before it looks any earlier review up), as for an unknown id."""
        revised = post.revises
        if revised is None or self._owns(request, revised):
            return True
        return plan_review_of(post.questions) is None

    def _unauthorized(self, cause: str, message: str) -> web.Response:
        self.refusals.refused(cause, f"/v1: {message}")
        return unauthorized(message)

    async def openapi(self, request: web.Request) -> web.StreamResponse:
        """Serve the OpenAPI document kept beside this module."""
        text = resources.files("bot").joinpath("openapi.json").read_text("utf-8")
        return web.Response(text=text, content_type="application/json")

    async def post_question(self, request: web.Request) -> web.StreamResponse:
        """Ask a question; 201 once Slack has the message."""
        post = await self._body(request, QuestionPost)
        if isinstance(post, web.Response):
            return post

        def fresh() -> web.Response | None:
            # A new question: its deadline settings must be ones it can act on, with this
            # process's defaults (a retry's were checked where it was first asked).
            never = never_applied(post, self._questions.defaults)
            if never:
                return problem(
                    422, "ValidationError", "INVALID_REQUEST", never[0]["msg"], errors=never
                )
            if not self._may_revise(request, post):
                raise _unknown_revised(post.revises)  # answered by failure(), in _guard
            return None

        def run(options: AskOptions, signal: AbortSignal) -> Awaitable[Any]:
            options = options.model_copy(
                update={
                    "review": post.review,
                    "revises": post.revises,
                    "timeout": post.timeout,
                    "reminders": tuple(post.reminders or ()),
                    "escalate_after": post.escalate_after,
                    "escalate_to": post.escalate_to,
                }
            )
            ask = AskUserQuestionRequest(questions=post.questions, options=options, signal=signal)
            return self._service.ask(ask)

        same = functools.partial(same_request, post=post, default_channel=self._default_channel)
        return await self._take(request, post, same, fresh, run)

    async def post_approval(self, request: web.Request) -> web.StreamResponse:
        """Ask for a tool approval (Allow once / Reject); 201 once Slack has the panel."""
        approve = self._approve
        if approve is None:
            raise UserQuestionError("this bot asks no tool approvals", NO_PROVIDER)
        post = await self._body(request, ApprovalPost)
        if isinstance(post, web.Response):
            return post

        def run(options: AskOptions, signal: AbortSignal) -> Awaitable[Any]:
            return approve(post.view(), options, signal)

        same = functools.partial(same_approval, post=post, default_channel=self._default_channel)
        return await self._take(request, post, same, lambda: None, run)

    async def _body(self, request: web.Request, model: type[_Post]) -> _Post | web.Response:
        """The request's JSON body as ``model`` (wire names only), or the answer refusing it."""
        if self._closing:
            return _shutting_down()
        if request.content_type != "application/json":
            return problem(415, "RequestError", "UNSUPPORTED_MEDIA_TYPE", "send application/json")
        raw = await read_body(request, self._max_body)
        if raw is None:
            return problem(413, "RequestError", "TOO_LARGE", "the request body is too large")
        try:
            # Wire names only: ``multi_select`` is an unknown key here, not ``multiSelect``.
            post = model.model_validate_json(raw, by_alias=True, by_name=False)
        except ValidationError as exc:
            return problem(
                422,
                "ValidationError",
                "INVALID_REQUEST",
                f"the request body is not a valid {model.__name__.removesuffix('Post').lower()} "
                f"request ({error_count(exc.error_count())})",
                errors=validation_errors(exc),
            )
        refused = body_problems(json.loads(raw), post)
        if refused:
            return problem(
                422, "ValidationError", "INVALID_REQUEST", refused[0]["msg"], errors=refused
            )
        return post

    async def _take(
        self,
        request: web.Request,
        post: QuestionPost | ApprovalPost,
        same: Callable[[QuestionStatus], bool],
        fresh: Callable[[], web.Response | None],
        run: Callable[[AskOptions, AbortSignal], Awaitable[Any]],
    ) -> web.StreamResponse:
        """Ask what ``post`` asks under the request's Idempotency-Key: the question it
        already asked (``same`` tells a retry from a reuse), or a new one (``fresh`` checks
        it first) that ``run`` asks."""
        key = request.headers.get("Idempotency-Key")
        bad_key = key_problem(key)
        if bad_key is not None:
            self.refusals.refused("bad_idempotency_key", f"/v1: {bad_key}")
            return problem(400, "RequestError", "BAD_IDEMPOTENCY_KEY", bad_key)
        asker = request[ASKER]
        request_id = self._tokens.tagged_id(asker, key) or self._questions.request_id_for(
            f"api:{key}" if key else None
        )
        async with self._keys.held(request_id):  # retries with one key: only the first posts
            existing = await self._questions.status(request_id)
            if existing is not None and not same(existing):
                message = (
                    f"Idempotency-Key {key!r} was used for a different request (its body "
                    "differs); use a new key"
                )
                return problem(409, "RequestError", "IDEMPOTENCY_KEY_REUSED", message)
            unshown = None if existing is None else _failed_unshown(existing)
            if unshown is not None:
                # Slack (or the store) failed it before it was ever shown: the retry gets
                # the first answer's error again, not a 200 that reads as success.
                return error_answer(unshown)
            if existing is not None:
                response = web.json_response(view_of(existing), status=200)
                response.headers["Location"] = f"/v1/questions/{request_id}"
                return response
            if request.headers.get("If-Match", "").strip() == "*":
                # Only find what the key asked (a client that gave up on its POST and
                # would abort it), never ask it.
                message = "no question was asked with this Idempotency-Key"
                return problem(412, "RequestError", "NOT_ASKED", message)
            refused = fresh() or await self._callback(request_id, post.callback, asker)
            if refused is not None:
                return refused
            if self._closing:  # the stop began while the key was looked up
                return _shutting_down()
            refusal = self._caps.refusal(asker)
            if refusal is not None:
                self.refusals.refused("too_many_questions", f"/v1: {refusal}")
                return too_many(refusal, RETRY_AFTER)
            self._caps.take(request_id, asker)  # no await between the check and this
            return await self._start(request_id, post, asked_by(asker), run)

    async def _callback(
        self, request_id: str, url: str | None, asker: str | None
    ) -> web.Response | None:
        """Owe ``url`` a delivery when the question ends, or the 422 refusing it."""
        if url is None:
            return None
        webhooks = self.webhooks
        why = "this bot takes no callbacks" if webhooks is None else webhooks.refusal(url, asker)
        if why is not None:
            error = {"loc": ["callback"], "msg": why, "type": "callback_refused"}
            return problem(422, "ValidationError", "INVALID_REQUEST", why, errors=[error])
        assert webhooks is not None
        await webhooks.add(request_id, url, asker)
        return None

    async def webhook_view(self, request_id: str) -> dict[str, Any] | None:
        """What a webhook delivers: ``GET``'s body once ended, ``{}`` while open, ``None``
        for an unknown question."""
        question = await self._questions.status(request_id)
        if question is None or question.is_open:
            return None if question is None else {}
        return view_with_events(question, await self._questions.events(request_id))

    async def _start(
        self,
        request_id: str,
        post: QuestionPost | ApprovalPost,
        by: str,
        run: Callable[[AskOptions, AbortSignal], Awaitable[Any]],
    ) -> web.StreamResponse:
        posted = asyncio.get_running_loop().create_future()

        def on_posted(_: str) -> None:
            if not posted.done():
                posted.set_result(None)

        options = AskOptions(
            channel=post.destination.channel if post.destination else None,
            thread_ts=post.destination.thread_ts if post.destination else None,
            request_id=request_id,
            label=post.label,
            on_posted=on_posted,
            link=post.link,
            asked_by=by,
            detached=True,
        )
        controller = AbortController()
        task = asyncio.ensure_future(run(options, controller.signal))
        self._asks[request_id] = task
        self._waiting[request_id] = controller
        task.add_done_callback(lambda t: self._finished(request_id, t))
        done, _ = await asyncio.wait(
            {task, posted}, timeout=POST_DEADLINE, return_when="FIRST_COMPLETED"
        )
        question = await self._questions.status(request_id)
        if task in done and not posted.done():
            error = task.exception()
            # Handed over at a stop, its post not sent yet: open, posted by the next process.
            if error is not None and (question is None or not question.is_open):
                if question is None and self._closing and _aborted(error):
                    return _shutting_down()  # refused by the stop before it was stored
                raise error  # answered by _failure, in _guard
        status = 201 if posted.done() else 202
        view = view_of(question) if question is not None else {"id": request_id, "state": "pending"}
        response = web.json_response(view, status=status)
        response.headers["Location"] = f"/v1/questions/{request_id}"
        return response

    def _finished(self, request_id: str, task: asyncio.Task[Any]) -> None:
        self._asks.pop(request_id, None)
        self._waiting.pop(request_id, None)
        self._caps.give_back(request_id)
        _log_end(self._logger, request_id, task)

    async def get_question(self, request: web.Request) -> web.StreamResponse:
        """Read a question's state, waiting up to ``?wait=`` seconds for it to end."""
        request_id = request.match_info["id"]
        if not self._owns(request, request_id):
            return not_found(request_id)
        wait = wait_of(request, MAX_WAIT)
        if isinstance(wait, web.Response):
            return wait
        question = await self._questions.status(request_id)
        if question is None:
            return not_found(request_id)
        if question.is_open and wait > 0 and not self._polls_ended.is_set():
            self.long_polls += 1
            ended = asyncio.ensure_future(self._questions.wait_ended(request_id))
            released = asyncio.ensure_future(self._polls_ended.wait())
            try:
                await asyncio.wait({ended, released}, timeout=wait, return_when="FIRST_COMPLETED")
            finally:
                for task in (ended, released):
                    task.cancel()
                self.long_polls -= 1
            if ended.done() and not ended.cancelled() and ended.exception() is None:
                question = ended.result()
            else:
                question = await self._questions.status(request_id) or question
        return web.json_response(
            view_with_events(question, await self._questions.events(request_id))
        )

    async def delete_question(self, request: web.Request) -> web.StreamResponse:
        """Abort an open question (``ASK_ABORTED``); the Slack message says so."""
        request_id = request.match_info["id"]
        if not self._owns(request, request_id):
            return not_found(request_id)
        by = asked_by(request[ASKER])
        question = await self._questions.abort(request_id, "Cancelled by the asker.", by=by)
        if question is None:
            return not_found(request_id)
        status = 200 if question.state == "aborted" else 409
        return web.json_response(view_of(question), status=status)


def _shutting_down() -> web.Response:
    """``503 ASK_ABORTED``: the bot is stopping and asks nothing new (retry: another process,
    or this one restarted, takes it)."""
    return problem(503, "UserQuestionError", ASK_ABORTED, "the bot is shutting down")


def _failed_unshown(question: QuestionStatus) -> HarnessError | None:
    """The error ``question`` failed with when Slack refused its message, as its first
    ``POST`` was answered (502 ``DELIVERY_FAILED``); ``None`` for any other question. A
    retry with its key gets that error again: nothing is posted under a key whose question
    has ended. A question the store failed (``STORE_UNAVAILABLE``) is not replayed: its
    message may have landed while the store could not record it, and "retry" would be
    said for ever; its retry gets the question as it ended (200, ``failed``)."""
    error = question.error
    if question.state != "failed" or question.message is not None or error is None:
        return None
    return error if error.code == DELIVERY_FAILED else None


def _unknown_revised(request_id: str | None) -> UserQuestionError:
    """The provider's ``BAD_REVIEW`` for a ``revises`` naming no known plan review (its
    own words: ``unknown_revised``)."""
    return UserQuestionError(unknown_revised(request_id or ""), BAD_REVIEW)


def _aborted(error: BaseException) -> bool:
    """Whether ``error`` is the seam's ``ASK_ABORTED`` (what a stopping provider raises)."""
    return isinstance(error, HarnessError) and error.code == ASK_ABORTED


def openapi_paths() -> dict[str, set[str]]:
    """The paths and methods the OpenAPI document declares (for the agreement test)."""
    text = resources.files("bot").joinpath("openapi.json").read_text("utf-8")
    document = json.loads(text)
    return {
        path: {method.upper() for method in item if method != "parameters"}
        for path, item in document["paths"].items()
    }


def _log_end(
    logger: logging.Logger,
    request_id: str,
    task: asyncio.Task[Any],
) -> None:
    """Log how an API question's waiter ended: released at a stop, or the question's end."""
    if task.cancelled() or task.exception() is None:
        return
    error = task.exception()
    code = error.code if isinstance(error, HarnessError) else type(error).__name__
    if isinstance(error, WaitReleased):
        # A stop: the question stays open for the next process (one that ended as the
        # stop came raised its own outcome, and is logged as ended).
        logger.info("question released", extra={"request": request_id})
    else:
        logger.info("question ended", extra={"request": request_id, "code": code})
