"""The HTTP API for agents outside the process: ask, read (long-poll), abort.

    POST   /v1/questions            {"questions":[...], "destination"?: {...}} -> 201 {id, state}
    GET    /v1/questions/{id}?wait=SECONDS                         -> 200 {id, state, answer?}
    DELETE /v1/questions/{id}                                      -> 200 {id, state: aborted}
    GET    /v1/audit?since=…&until=…                 -> the audit trail as JSON lines
    GET    /v1/openapi.json                                        -> the OpenAPI document

Questions live in the provider's pending store, so with a shared store any process can
answer a ``GET`` or ``DELETE``. Every route needs ``Authorization: Bearer <BOT_API_TOKEN>``
when a token is configured (without one the bot listens on loopback only).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Final, Protocol

from aiohttp import web
from pydantic import ValidationError

from adapters.httpguard import RefusalLog
from adapters.slack import AuditEvent, QuestionStatus
from bot.access import ApiTokens, OpenQuestionCaps
from bot.api_answers import failure, not_found, problem, view_of
from bot.api_body import QuestionPost, body_problems, validation_errors
from bot.audit import audit_handler
from bot.questions.errors import (
    ASK_ABORTED,
    HarnessError,
)
from bot.questions.models import (
    AskOptions,
    AskUserQuestionRequest,
)
from bot.questions.service import UserQuestionService

__all__ = ["ASKER", "MAX_WAIT", "Gateway", "Questions"]

MAX_WAIT: Final = 120.0
"""Longest long-poll a ``GET ?wait=`` may ask for, in seconds."""
ASKER: Final = web.RequestKey[str | None]("asker")
"""The name of the API token a request came with (``None`` on an open API)."""
RETRY_AFTER: Final = 5
"""Seconds a client over an open-question cap is told to wait (``Retry-After``)."""
_IDEMPOTENCY_KEY: Final = re.compile(r"[\x20-\x7e]{1,255}")
POST_DEADLINE: Final = 30.0
"""How long ``POST`` waits for Slack to take the message before answering 202."""

class Questions(Protocol):
    """What the API needs of whoever holds the questions (``SlackQuestionProvider``)."""

    def request_id_for(self, key: str | None = None) -> str:
        """The id of the request asked with idempotency ``key``; a new id without a key."""
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
    ) -> None:
        self._service = service
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
        self._keys: dict[str, tuple[asyncio.Lock, int]] = {}
        self._closing = False
        self._polls_ended = asyncio.Event()

    def add_routes(self, app: web.Application) -> None:
        """Add the ``/v1`` routes to ``app``."""
        app.router.add_post("/v1/questions", self._guard(self.post_question))
        app.router.add_get("/v1/questions/{id}", self._guard(self.get_question))
        app.router.add_delete("/v1/questions/{id}", self._guard(self.delete_question))
        app.router.add_get("/v1/audit", self._guard(audit_handler(self._questions.audit)))
        app.router.add_get("/v1/openapi.json", self._guard(self.openapi))

    def close(self) -> None:
        """Refuse new questions (shutdown has begun)."""
        self._closing = True

    def end_polls(self) -> None:
        """Answer every long-poll still waiting with its question's current state (shutdown)."""
        self._polls_ended.set()

    @property
    def running(self) -> int:
        """Asks started by this process that have not ended yet."""
        return len(self._asks)

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
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
            try:
                return await handler(request)
            except web.HTTPException:  # aiohttp's own answers
                raise
            except Exception as error:  # e.g. STORE_UNAVAILABLE during a Redis outage
                return failure(error, self._failures)

        return guarded

    def _unauthorized(self, cause: str, message: str) -> web.Response:
        self.refusals.refused(cause, f"/v1: {message}")
        response = problem(401, "AuthError", "UNAUTHORIZED", message)
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    def _too_many(self, refusal: str) -> web.Response:
        self.refusals.refused("too_many_questions", f"/v1: {refusal}")
        message = f"{refusal}; retry once some have ended"
        response = problem(
            429, "RequestError", "TOO_MANY_QUESTIONS", message, retryAfter=RETRY_AFTER
        )
        response.headers["Retry-After"] = str(RETRY_AFTER)
        return response

    async def openapi(self, request: web.Request) -> web.StreamResponse:
        """Serve the OpenAPI document kept beside this module."""
        text = resources.files("bot").joinpath("openapi.json").read_text("utf-8")
        return web.Response(text=text, content_type="application/json")

    async def post_question(self, request: web.Request) -> web.StreamResponse:
        """Ask a question; 201 once Slack has the message."""
        if self._closing:
            return problem(503, "UserQuestionError", ASK_ABORTED, "the bot is shutting down")
        if request.content_type != "application/json":
            return problem(415, "RequestError", "UNSUPPORTED_MEDIA_TYPE", "send application/json")
        try:
            raw = await self._read_body(request)
        except web.HTTPRequestEntityTooLarge:
            raw = None
        if raw is None:
            return problem(413, "RequestError", "TOO_LARGE", "the request body is too large")
        try:
            # Wire names only: ``multi_select`` is an unknown key here, not ``multiSelect``.
            post = QuestionPost.model_validate_json(raw, by_alias=True, by_name=False)
        except ValidationError as exc:
            return problem(
                422,
                "ValidationError",
                "INVALID_REQUEST",
                f"the request body is not a valid question request ({exc.error_count()} errors)",
                errors=validation_errors(exc),
            )
        refused = body_problems(raw, post)
        if refused:
            return problem(
                422, "ValidationError", "INVALID_REQUEST", refused[0]["msg"], errors=refused
            )
        key = request.headers.get("Idempotency-Key")
        if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
            message = "Idempotency-Key is 1–255 printable ASCII characters"
            self.refusals.refused("bad_idempotency_key", f"/v1: {message}")
            return problem(400, "RequestError", "BAD_IDEMPOTENCY_KEY", message)
        asker = request[ASKER]
        request_id = self._tokens.tagged_id(asker, key) or self._questions.request_id_for(
            f"api:{key}" if key else None
        )
        # Retries with one key queue on one lock, so only the first posts; the lock is
        # forgotten when the last of them is done.
        lock, users = self._keys.get(request_id, (asyncio.Lock(), 0))
        self._keys[request_id] = (lock, users + 1)
        try:
            async with lock:
                existing = await self._questions.status(request_id)
                if existing is not None and not self._same_request(existing, post):
                    message = (
                        f"Idempotency-Key {key!r} was used for a different request (its "
                        "questions, label or destination differ); use a new key"
                    )
                    return problem(409, "RequestError", "IDEMPOTENCY_KEY_REUSED", message)
                if existing is not None:
                    response = web.json_response(view_of(existing), status=200)
                    response.headers["Location"] = f"/v1/questions/{request_id}"
                    return response
                refusal = self._caps.refusal(asker)
                if refusal is not None:
                    return self._too_many(refusal)
                self._caps.take(request_id, asker)  # no await between the check and this
                return await self._start(request_id, post)
        finally:
            lock, users = self._keys[request_id]
            if users == 1:
                del self._keys[request_id]
            else:
                self._keys[request_id] = (lock, users - 1)

    def _same_request(self, question: QuestionStatus, post: QuestionPost) -> bool:
        """Whether ``post`` asks what ``question`` asked (a retry, not a new request)."""
        destination = post.destination
        channel = destination.channel if destination else self._default_channel
        thread_ts = destination.thread_ts if destination else None
        return (
            list(question.questions) == post.questions
            and question.label == post.label
            and (channel is None or (question.channel, question.thread_ts) == (channel, thread_ts))
        )

    async def _read_body(self, request: web.Request) -> bytes | None:
        """The body, or ``None`` when it is larger than ``max_body_bytes``.

        The limit is the API's own: the server's (``client_max_size``) is larger, for
        Slack's payloads on ``/slack/events``; the server has already read the body (within
        its body timeout and its own limit).
        """
        length = request.content_length
        if self._max_body is not None and length is not None and length > self._max_body:
            return None
        body = await request.read()
        if self._max_body is not None and len(body) > self._max_body:
            return None
        return body

    async def _start(self, request_id: str, post: QuestionPost) -> web.StreamResponse:
        posted = asyncio.get_running_loop().create_future()

        def on_posted(_: str) -> None:
            if not posted.done():
                posted.set_result(None)

        options = AskOptions(
            channel=post.destination.channel if post.destination else None,
            thread_ts=post.destination.thread_ts if post.destination else None,
            request_id=request_id,
            label=post.label,
            review=post.review,
            revises=post.revises,
            on_posted=on_posted,
            timeout=post.timeout,
            reminders=tuple(post.reminders or ()),
            escalate_after=post.escalate_after,
            escalate_to=post.escalate_to,
            link=post.link,
            asked_by="api",
        )
        request = AskUserQuestionRequest(questions=post.questions, options=options)
        task = asyncio.ensure_future(self._service.ask(request))
        self._asks[request_id] = task
        task.add_done_callback(lambda t: self._finished(request_id, t))
        done, _ = await asyncio.wait(
            {task, posted}, timeout=POST_DEADLINE, return_when="FIRST_COMPLETED"
        )
        if task in done and not posted.done():
            error = task.exception()
            if error is not None:
                raise error  # answered by _failure, in _guard
        question = await self._questions.status(request_id)
        status = 201 if posted.done() else 202
        view = view_of(question) if question is not None else {"id": request_id, "state": "pending"}
        response = web.json_response(view, status=status)
        response.headers["Location"] = f"/v1/questions/{request_id}"
        return response

    def _finished(self, request_id: str, task: asyncio.Task[Any]) -> None:
        self._asks.pop(request_id, None)
        self._caps.give_back(request_id)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            code = error.code if isinstance(error, HarnessError) else type(error).__name__
            self._logger.info("question ended", extra={"request": request_id, "code": code})

    async def get_question(self, request: web.Request) -> web.StreamResponse:
        """Read a question's state, waiting up to ``?wait=`` seconds for it to end."""
        request_id = request.match_info["id"]
        if not self._tokens.owns(request[ASKER], request_id):
            return not_found(request_id)
        wait_raw = request.query.get("wait", "0")
        try:
            wait = float(wait_raw)
            if not 0 <= wait <= MAX_WAIT:
                raise ValueError
        except ValueError:
            return problem(
                400, "RequestError", "BAD_WAIT", f"wait must be a number of seconds, 0–{MAX_WAIT:g}"
            )
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
        view = view_of(question)
        view["events"] = [
            event.model_dump(by_alias=True, exclude_none=True, mode="json")
            for event in await self._questions.events(request_id)
        ]
        return web.json_response(view)

    async def delete_question(self, request: web.Request) -> web.StreamResponse:
        """Abort an open question (``ASK_ABORTED``); the Slack message says so."""
        request_id = request.match_info["id"]
        if not self._tokens.owns(request[ASKER], request_id):
            return not_found(request_id)
        question = await self._questions.abort(request_id, "Cancelled by the asker.", by="api")
        if question is None:
            return not_found(request_id)
        status = 200 if question.state == "aborted" else 409
        return web.json_response(view_of(question), status=status)


def openapi_paths() -> dict[str, set[str]]:
    """The paths and methods the OpenAPI document declares (for the agreement test)."""
    text = resources.files("bot").joinpath("openapi.json").read_text("utf-8")
    document = json.loads(text)
    return {
        path: {method.upper() for method in item if method != "parameters"}
        for path, item in document["paths"].items()
    }
