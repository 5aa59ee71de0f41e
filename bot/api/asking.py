"""``POST /v1/questions`` apart from its route: the body read as a request, the seam's
options it asks with, the answers its endings get, and how its waiter's end is logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from adapters.slack import QuestionStatus, WaitReleased, unknown_revised
from bot.api.answers import error_answer, problem, view_of
from bot.api.body import QuestionPost, body_problems, error_count, validation_errors
from bot.api.idempotency import same_request
from bot.questions.errors import (
    ASK_ABORTED,
    BAD_REVIEW,
    DELIVERY_FAILED,
    HarnessError,
    UserQuestionError,
)
from bot.questions.models import AskOptions

__all__ = [
    "aborted",
    "ask_options",
    "failed_unshown",
    "located",
    "log_end",
    "read_post",
    "replayed",
    "revises_unknown",
    "shutting_down",
]


def read_post(raw: bytes) -> QuestionPost | web.Response:
    """The body as a ``QuestionPost``, or the 422 that refuses it (wire names only)."""
    try:
        # ``multi_select`` is an unknown key here, not ``multiSelect``.
        post = QuestionPost.model_validate_json(raw, by_alias=True, by_name=False)
    except ValidationError as exc:
        return problem(
            422,
            "ValidationError",
            "INVALID_REQUEST",
            f"the request body is not a valid question request ({error_count(exc.error_count())})",
            errors=validation_errors(exc),
        )
    refused = body_problems(raw, post)
    if refused:
        return problem(422, "ValidationError", "INVALID_REQUEST", refused[0]["msg"], errors=refused)
    return post


def replayed(
    existing: QuestionStatus | None,
    post: QuestionPost,
    key: str | None,
    default_channel: str | None,
    request_id: str,
    lookup: bool,
) -> web.Response | None:
    """The answer to a POST whose key already asked (``None`` for a new one): 409 for another
    body, the first error again for one Slack never showed, else 200 with the question; 412
    for a lookup (``If-Match: *``) that finds nothing (it never asks)."""
    if existing is None:
        message = "no question was asked with this Idempotency-Key"
        return problem(412, "RequestError", "NOT_ASKED", message) if lookup else None
    if not same_request(existing, post, default_channel):
        message = (
            f"Idempotency-Key {key!r} was used for a different request (its body differs); "
            "use a new key"
        )
        return problem(409, "RequestError", "IDEMPOTENCY_KEY_REUSED", message)
    unshown = failed_unshown(existing)  # not a 200 that reads as success
    if unshown is not None:
        return error_answer(unshown)
    return located(view_of(existing), 200, request_id)


def located(view: dict[str, Any], status: int, request_id: str) -> web.Response:
    """A question's view with its ``Location``."""
    response = web.json_response(view, status=status)
    response.headers["Location"] = f"/v1/questions/{request_id}"
    return response


def ask_options(
    post: QuestionPost, request_id: str, by: str, on_posted: Callable[[str], None]
) -> AskOptions:
    """The seam's options for asking ``post`` as ``request_id`` (detached: owned by no process)."""
    where = post.destination
    return AskOptions(
        channel=where.channel if where else None,
        thread_ts=where.thread_ts if where else None,
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
        asked_by=by,
        detached=True,
    )


def shutting_down() -> web.Response:
    """``503 ASK_ABORTED``: the bot is stopping and asks nothing new (retry: another process,
    or this one restarted, takes it)."""
    return problem(503, "UserQuestionError", ASK_ABORTED, "the bot is shutting down")


def failed_unshown(question: QuestionStatus) -> HarnessError | None:
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


def revises_unknown(request_id: str | None) -> UserQuestionError:
    """The provider's ``BAD_REVIEW`` for a ``revises`` naming no known plan review (its
    own words: ``unknown_revised``)."""
    return UserQuestionError(unknown_revised(request_id or ""), BAD_REVIEW)


def aborted(error: BaseException) -> bool:
    """Whether ``error`` is the seam's ``ASK_ABORTED`` (what a stopping provider raises)."""
    return isinstance(error, HarnessError) and error.code == ASK_ABORTED


def log_end(
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
