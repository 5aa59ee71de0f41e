"""The POSTs that ask (``/v1/questions``, ``/v1/approvals``) apart from their routes: the body
read as a request, the options it asks with, a retry's answer, how its waiter's end is logged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

from aiohttp import web
from pydantic import ValidationError

from adapters.slack import (
    CONSUME_REFUSALS,
    AuditEvent,
    QuestionStatus,
    plan_review_of,
    unknown_revised,
)
from bot.api.answers import error_answer, not_found, problem, view_of, view_with_events
from bot.api.approvals import ApprovalPost
from bot.api.body import (
    DeadlineDefaults,
    QuestionPost,
    body_problems,
    error_count,
    never_applied,
    validation_errors,
)
from bot.questions.abort import AbortSignal
from bot.questions.errors import (
    ASK_ABORTED,
    BAD_REVIEW,
    DELIVERY_FAILED,
    HarnessError,
    UserQuestionError,
)
from bot.questions.models import AskOptions, AskUserQuestionRequest
from bot.webhooks import Webhooks

Post = TypeVar("Post", QuestionPost, ApprovalPost)

__all__ = [
    "Questions",
    "aborted",
    "ask_options",
    "callback_refused",
    "consumed",
    "ended_view",
    "failed_unshown",
    "located",
    "question_request",
    "read_post",
    "replayed",
    "revises_unknown",
    "shutting_down",
    "unready",
]


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

    async def report_ending(
        self, request_id: str, report: Callable[[str, QuestionStatus | BaseException], None]
    ) -> bool:
        """Report how a question ends to ``report``, with no task waiting; ``False`` if unknown."""
        ...

    async def abort(
        self, request_id: str, note: str, *, by: str | None = None
    ) -> QuestionStatus | None:
        """Abort an open question (``by``: who, for the audit trail); ``None`` if unknown."""
        ...

    async def events(self, request_id: str) -> list[AuditEvent]:
        """A question's audit trail, oldest first."""
        ...

    async def consume(
        self, request_id: str, *, by: str | None, lifetime: float
    ) -> tuple[str | None, QuestionStatus | None]:
        """Consume an answered question's decision once; the refusal's code otherwise."""
        ...

    def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every audit event with ``since <= at < until``, in the order appended."""
        ...


async def ended_view(questions: Questions, request_id: str, ttl: float) -> dict[str, Any] | None:
    """``GET``'s body once the question has ended, ``{}`` while it is open, ``None`` if unknown."""
    question = await questions.status(request_id)
    if question is None or question.is_open:
        return None if question is None else {}
    return view_with_events(question, await questions.events(request_id), ttl)


async def consumed(questions: Questions, request_id: str, by: str, ttl: float) -> web.Response:
    """Consume an answered question's decision (once, within ``ttl`` of it): its view, or the
    refusal (410 when expired, 409 otherwise; 404 for an unknown question)."""
    code, question = await questions.consume(request_id, by=by, lifetime=ttl)
    if question is None:
        return not_found(request_id)
    if code is not None:
        status = 410 if code == "EXPIRED" else 409
        return problem(status, "RequestError", code, CONSUME_REFUSALS[code])
    return web.json_response(view_of(question, ttl))


def read_post(raw: bytes, model: type[Post]) -> Post | web.Response:
    """The body as ``model`` (wire names only: ``multi_select`` is an unknown key), or the 422
    that refuses it."""
    try:
        post = model.model_validate_json(raw, by_alias=True, by_name=False)
    except ValidationError as exc:
        what = model.__name__.removesuffix("Post").lower()
        count = error_count(exc.error_count())
        return problem(
            422,
            "ValidationError",
            "INVALID_REQUEST",
            f"the request body is not a valid {what} request ({count})",
            errors=validation_errors(exc),
        )
    refused = body_problems(json.loads(raw), post)
    if refused:
        return problem(422, "ValidationError", "INVALID_REQUEST", refused[0]["msg"], errors=refused)
    return post


def replayed(
    existing: QuestionStatus | None,
    same: Callable[[QuestionStatus], bool],
    key: str | None,
    request_id: str,
    lookup: bool,
    ttl: float = 900.0,
) -> web.Response | None:
    """The answer to a POST whose key already asked (``None`` for a new one): 409 for another
    body, the first error again for one Slack never showed, 409 for an answer already
    consumed, else 200 with the question; 412 for a lookup (``If-Match: *``) that finds
    nothing (it never asks)."""
    if existing is None:
        message = "no question was asked with this Idempotency-Key"
        return problem(412, "RequestError", "NOT_ASKED", message) if lookup else None
    if not same(existing):
        message = (
            f"Idempotency-Key {key!r} was used for a different request (its body differs); "
            "use a new key"
        )
        return problem(409, "RequestError", "IDEMPOTENCY_KEY_REUSED", message)
    unshown = failed_unshown(existing)  # not a 200 that reads as success
    if unshown is not None:
        return error_answer(unshown)
    if existing.consumed_at is not None:  # not a new approval: it was used
        message = (
            f"the answer asked with Idempotency-Key {key!r} was already consumed: it is not "
            "a new approval; ask again with a new key"
        )
        return problem(409, "RequestError", "ALREADY_CONSUMED", message)
    return located(view_of(existing, ttl), 200, request_id)


def located(view: dict[str, Any], status: int, request_id: str) -> web.Response:
    """A question's view with its ``Location``."""
    response = web.json_response(view, status=status)
    response.headers["Location"] = f"/v1/questions/{request_id}"
    return response


def callback_refused(
    webhooks: Webhooks | None, url: str | None, asker: str | None
) -> web.Response | None:
    """The 422 refusing ``url`` as a question's callback, or ``None`` when it may be one (the
    provider owes it the delivery when it asks)."""
    if url is None:
        return None
    why = "this bot takes no callbacks" if webhooks is None else webhooks.refusal(url, asker)
    if why is None:
        return None
    error = {"loc": ["callback"], "msg": why, "type": "callback_refused"}
    return problem(422, "ValidationError", "INVALID_REQUEST", why, errors=[error])


def unready(
    post: QuestionPost, defaults: DeadlineDefaults, owns: Callable[[str], bool]
) -> web.Response | None:
    """What refuses a new question: deadline settings it cannot act on with this process's
    defaults (422), or a plan review revising one the token may not see (as if unknown)."""
    never = never_applied(post, defaults)
    if never:
        return problem(422, "ValidationError", "INVALID_REQUEST", never[0]["msg"], errors=never)
    revised = post.revises
    if revised is not None and not owns(revised) and plan_review_of(post.questions) is not None:
        raise revises_unknown(revised)  # answered by failure(), in the gateway's guard
    return None


def question_request(
    post: QuestionPost, options: AskOptions, signal: AbortSignal
) -> AskUserQuestionRequest:
    """The seam's request ``post`` asks, with the options every POST shares."""
    options = options.model_copy(
        update={
            "review": post.review,
            "revises": post.revises,
            "timeout": post.timeout,
            "reminders": tuple(post.reminders or ()),
            "escalate_after": post.escalate_after,
            "escalate_to": post.escalate_to,
            "remind": tuple(post.remind or ()),
        }
    )
    return AskUserQuestionRequest(questions=post.questions, options=options, signal=signal)


def ask_options(
    post: QuestionPost | ApprovalPost, request_id: str, by: str, on_posted: Callable[[str], None]
) -> AskOptions:
    """The seam's options every POST asks with (detached: owned by no process)."""
    where = post.destination
    return AskOptions(
        channel=where.channel if where else None,
        thread_ts=where.thread_ts if where else None,
        request_id=request_id,
        label=post.label,
        on_posted=on_posted,
        link=post.link,
        callback=post.callback,
        asked_by=by,
        detached=True,
    )


def shutting_down() -> web.Response:
    """``503 ASK_ABORTED``: the bot is stopping and asks nothing new (retry: another process,
    or this one restarted, takes it)."""
    return problem(503, "UserQuestionError", ASK_ABORTED, "the bot is shutting down")


def failed_unshown(question: QuestionStatus) -> HarnessError | None:
    """The ``DELIVERY_FAILED`` a question failed with before Slack showed it, which its retries
    get again (nothing is posted under an ended key); ``None`` otherwise, also for a store
    failure: its message may have landed, so its retry gets the question as it ended."""
    error = question.error
    if question.state != "failed" or question.message is not None or error is None:
        return None
    return error if error.code == DELIVERY_FAILED else None


def revises_unknown(request_id: str | None) -> UserQuestionError:
    """The provider's ``BAD_REVIEW`` for a ``revises`` naming no known plan review (its
    own words: ``unknown_revised``)."""
    return UserQuestionError(unknown_revised(request_id or ""), BAD_REVIEW)


def aborted(error: BaseException) -> bool:
    """Whether ``error`` is the seam's ``ASK_ABORTED`` (what a stopping provider raises)."""
    return isinstance(error, HarnessError) and error.code == ASK_ABORTED
