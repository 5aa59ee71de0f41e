"""What the HTTP API answers with: the error shape, the one error boundary, a question's view.

Every failure that reaches the API becomes an answer in ``failure``: the seam's errors keep
their ``{name, code, message}`` and get the HTTP status ``STATUS_OF_CODE`` gives their
code; anything else is a bug, answered 500 without detail. ``STORE_UNAVAILABLE`` is told
in fixed words (``STORE_DOWN``), in an answer and in a question's ``error`` alike: the
store's own message names its SQLite file or Redis address, which is for the log only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from adapters.httpguard import RefusalLog
from adapters.slack import AuditEvent, QuestionStatus
from bot.questions.errors import (
    ASK_ABORTED,
    ASK_TIMEOUT,
    BAD_INTENT,
    BAD_REVIEW,
    DELIVERY_FAILED,
    EMPTY_QUESTIONS,
    NO_PROVIDER,
    SLACK_LIMIT,
    STORE_UNAVAILABLE,
    HarnessError,
)

__all__ = [
    "STATUS_OF_CODE",
    "STORE_DOWN",
    "error_answer",
    "failure",
    "not_found",
    "problem",
    "request_problem",
    "too_many",
    "unauthorized",
    "view_of",
    "view_with_events",
    "wait_of",
]

STATUS_OF_CODE: Final = {
    EMPTY_QUESTIONS: 422,
    BAD_INTENT: 422,
    BAD_REVIEW: 422,
    SLACK_LIMIT: 422,
    NO_PROVIDER: 503,
    ASK_ABORTED: 409,
    ASK_TIMEOUT: 409,  # (POST) the question ended before its message was posted
    DELIVERY_FAILED: 502,
    STORE_UNAVAILABLE: 503,
}
"""The HTTP status of each seam error code that can reach the API; any other code is 500."""
STORE_DOWN: Final = "the pending store is unavailable; retry"
"""What a client is told of ``STORE_UNAVAILABLE`` (the store's own words are logged)."""


class _Problem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    code: str
    message: str
    errors: list[dict[str, Any]] | None = None
    retryAfter: int | None = None


def problem(status: int, name: str, code: str, message: str, **extra: Any) -> web.Response:
    """An error answer in the seam's shape: ``{name, code, message}`` (and ``errors``)."""
    body = _Problem(name=name, code=code, message=message, **extra)
    return web.json_response(body.model_dump(exclude_none=True), status=status)


def request_problem(status: int, code: str, message: str) -> web.Response:
    """A refusal of the HTTP layer in the seam's error shape (``name`` ``RequestError``)."""
    return problem(status, "RequestError", code, message)


def not_found(request_id: str) -> web.Response:
    """``404 NOT_FOUND`` for a question id this API does not know (or may not show)."""
    return problem(404, "RequestError", "NOT_FOUND", f"no question {request_id}")


def unauthorized(message: str) -> web.Response:
    """``401 UNAUTHORIZED`` with the ``WWW-Authenticate: Bearer`` challenge."""
    response = problem(401, "AuthError", "UNAUTHORIZED", message)
    response.headers["WWW-Authenticate"] = "Bearer"
    return response


def too_many(refusal: str, retry_after: int) -> web.Response:
    """``429 TOO_MANY_QUESTIONS``: ``Retry-After`` in the header and as ``retryAfter``."""
    message = f"{refusal}; retry once some have ended"
    response = problem(429, "RequestError", "TOO_MANY_QUESTIONS", message, retryAfter=retry_after)
    response.headers["Retry-After"] = str(retry_after)
    return response


def failure(error: Exception, refusals: RefusalLog) -> web.Response:
    """The one place a failure becomes an HTTP answer.

    The seam's errors keep their ``{name, code, message}`` with the status ``STATUS_OF_CODE``
    gives their code, but ``STORE_UNAVAILABLE``, whose message names the store's file or
    host: the client gets ``STORE_DOWN``, the log the store's words (at most once a minute).
    Anything else is a bug: logged with its traceback (at most once a minute per kind, so
    no client can flood the log), answered 500 without detail.
    """
    if isinstance(error, HarnessError):
        if error.code == STORE_UNAVAILABLE:
            what = "the pending store is unavailable (answered 503)"
            refusals.refused("store_unavailable", what, error=error.message)
        return error_answer(error)
    refusals.failed(f"{type(error).__name__} in /v1", error)
    return problem(500, "InternalError", "INTERNAL", "the bot could not handle the request")


def error_answer(error: HarnessError) -> web.Response:
    """A seam error as ``failure`` answers it, without logging anything (a question's
    stored error, given again to a retry)."""
    status = STATUS_OF_CODE.get(error.code, 500)
    return problem(status, error.name, error.code, _shown(error.code, error.message))


def view_of(status: QuestionStatus) -> dict[str, Any]:
    """A question as the API shows it (``queued``: its post waits for Slack's rate limits)."""
    view: dict[str, Any] = {"id": status.id, "state": "queued" if status.queued else status.state}
    if status.answer is not None:
        view["answer"] = status.answer.to_wire()
    if status.answered_by:
        view["answeredBy"] = status.answered_by
    if status.answered_by_name:
        view["answeredByName"] = status.answered_by_name
    if status.votes:
        view["votes"] = [vote.model_dump(mode="json", by_alias=True) for vote in status.votes]
    if status.error is not None:
        shown = status.error.to_dict()
        view["error"] = {**shown, "message": _shown(shown["code"], shown["message"])}
    if status.approval is not None:  # a tool approval: what was asked, and the decision
        what = status.approval
        asked = {"tool": what.tool_name, "reason": what.headline, "command": what.command}
        view["approval"] = {k: v for k, v in (asked | {"path": what.path}).items() if v}
        if status.decision is not None:
            view["decision"] = status.decision
    if status.note:
        view["note"] = status.note
    if status.message is not None:
        view["message"] = {"channel": status.message.channel, "ts": status.message.ts}
    view["createdAt"] = status.created_at
    if status.finished_at is not None:
        view["finishedAt"] = status.finished_at
    return view


def _shown(code: str, message: str) -> str:
    """An error's message as a client is shown it: ``STORE_DOWN`` for a store outage."""
    return STORE_DOWN if code == STORE_UNAVAILABLE else message


def view_with_events(status: QuestionStatus, events: Sequence[AuditEvent]) -> dict[str, Any]:
    """A question's view with its audit trail (``events``, oldest first)."""
    view = view_of(status)
    view["events"] = [
        event.model_dump(by_alias=True, exclude_none=True, mode="json") for event in events
    ]
    return view


def wait_of(request: web.Request, most: float) -> float | web.Response:
    """``?wait=`` in seconds (0 when absent), or the 400 that refuses it."""
    try:
        wait = float(request.query.get("wait", "0"))
        if not 0 <= wait <= most:
            raise ValueError
    except ValueError:
        return problem(
            400, "RequestError", "BAD_WAIT", f"wait must be a number of seconds, 0–{most:g}"
        )
    return wait
