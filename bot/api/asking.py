"""The POSTs that ask (``/v1/questions``, ``/v1/approvals``) apart from their routes: the body
read as a request, a retry's answer, the options it asks with."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from adapters.slack import (
    CONSUME_REFUSALS,
    QuestionStatus,
    SlackQuestionProvider,
    plan_review_of,
    unknown_revised,
)
from bot.api.answers import error_answer, not_found, problem, view_of, view_with_events
from bot.api.body import (
    ApprovalPost,
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
    "aborted",
    "ask_options",
    "callback_refused",
    "consumed",
    "ended_view",
    "located",
    "question_request",
    "read_post",
    "replayed",
    "shutting_down",
    "unready",
]


async def ended_view(
    questions: SlackQuestionProvider, request_id: str, ttl: float
) -> dict[str, Any] | None:
    """``GET``'s body once the question has ended, ``{}`` while it is open, ``None`` if unknown."""
    question = await questions.status(request_id)
    if question is None or question.is_open:
        return None if question is None else {}
    return view_with_events(question, await questions.events(request_id), ttl)


async def consumed(
    questions: SlackQuestionProvider, request_id: str, by: str, ttl: float
) -> web.Response:
    """Consume an answered question's decision (once, within ``ttl`` of it): its view, or the
    refusal (410 when expired, 409 otherwise; 404 for an unknown question)."""
    code, question = await questions.consume(request_id, by=by, lifetime=ttl)
    if question is None:
        return not_found(request_id)
    if code is not None:
        status = 410 if code == "EXPIRED" else 409
        return problem(status, "RequestError", code, CONSUME_REFUSALS[code])
    return web.json_response(view_of(question, ttl))


def _invalid(message: str, errors: list[dict[str, Any]]) -> web.Response:
    return problem(422, "ValidationError", "INVALID_REQUEST", message, errors=errors)


def read_post(raw: bytes, model: type[Post]) -> Post | web.Response:
    """The body as ``model`` (wire names only: ``multi_select`` is an unknown key), or the 422
    that refuses it."""
    try:
        post = model.model_validate_json(raw, by_alias=True, by_name=False)
    except ValidationError as exc:
        what = model.__name__.removesuffix("Post").lower()
        count = error_count(exc.error_count())
        message = f"the request body is not a valid {what} request ({count})"
        return _invalid(message, validation_errors(exc))
    refused = body_problems(json.loads(raw), post)
    return _invalid(refused[0]["msg"], refused) if refused else post


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
    error = existing.error  # a DELIVERY_FAILED Slack never showed: not a 200 read as success
    unshown = existing.state == "failed" and existing.message is None
    if unshown and error is not None and error.code == DELIVERY_FAILED:
        return error_answer(error)
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
    return _invalid(why, [{"loc": ["callback"], "msg": why, "type": "callback_refused"}])


def unready(
    post: QuestionPost, defaults: DeadlineDefaults, owns: Callable[[str], bool]
) -> web.Response | None:
    """What refuses a new question: deadline settings it cannot act on with this process's
    defaults (422), or a plan review revising one the token may not see (as if unknown)."""
    never = never_applied(post, defaults)
    if never:
        return _invalid(never[0]["msg"], never)
    revised = post.revises
    if revised is not None and not owns(revised) and plan_review_of(post.questions) is not None:
        # the provider's own BAD_REVIEW, answered by failure(), in the gateway's guard
        raise UserQuestionError(unknown_revised(revised), BAD_REVIEW)
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


def aborted(error: BaseException) -> bool:
    """Whether ``error`` is the seam's ``ASK_ABORTED`` (what a stopping provider raises)."""
    return isinstance(error, HarnessError) and error.code == ASK_ABORTED
