"""What the HTTP API answers with: the error shape, the one error boundary (``failure``), a
question's view; ``STORE_UNAVAILABLE`` is told in fixed words (the store's own are logged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from adapters.httpguard import RefusalLog
from adapters.slack import AuditEvent, QuestionStatus, Vote
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
from bot.questions.models import AskUserQuestionAnswer

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
RETRY_AFTER: Final = 5
"""Seconds a client over a cap (open questions, long-polls) is told to wait."""
STORE_DOWN: Final = "the pending store is unavailable; retry"
"""What a client is told of ``STORE_UNAVAILABLE`` (the store's own words are logged)."""


class Problem(BaseModel):
    """An error answer: the seam's ``{name, code, message}``, and what some answers add."""

    model_config = ConfigDict(extra="forbid")
    name: str
    code: str
    message: str
    errors: list[dict[str, Any]] | None = None
    retryAfter: int | None = Field(
        default=None, description="With 429: seconds to wait before retrying (as Retry-After)"
    )


class Message(BaseModel):
    """Where the question's message is in Slack."""

    channel: str
    ts: str


class Approval(BaseModel):
    """A tool approval (``POST /v1/approvals``): what was asked."""

    tool: str
    reason: str
    command: str | None = None
    path: str | None = None


class Question(BaseModel):
    """A question as the API shows it (``view_of``); the OpenAPI document's ``Question``."""

    model_config = ConfigDict(alias_generator=to_camel, serialize_by_alias=True)
    id: str
    state: Literal["queued", "pending", "answered", "cancelled", "aborted", "failed"] = Field(
        description="queued: the message still waits for Slack's rate limits to be posted; "
        "pending: posted, waiting for an answer."
    )
    answer: AskUserQuestionAnswer | None = None
    answered_by: str | None = Field(None, description="Who answered or dismissed it (user id).")
    answered_by_name: str | None = Field(None, description="That person's name, as Slack gave it.")
    votes: list[Vote] | None = Field(None, description="A team review's votes, in order cast.")
    error: Problem | None = Field(None, description="How the question's waiter failed.")
    note: str | None = Field(None, description="The note shown on the Slack message.")
    message: Message | None = None
    created_at: float
    finished_at: float | None = None
    decided_at: float | None = Field(None, description="An answer: when it was given.")
    expires_at: float | None = Field(
        None, description="An answer: until when it may be consumed (decidedAt + APPROVAL_TTL)."
    )
    consumed_at: float | None = Field(
        None, description="An answer: when its executor consumed it (POST …/consume), once."
    )
    events: list[AuditEvent] | None = Field(None, description="Its audit trail, oldest first.")
    approval: Approval | None = None
    decision: Literal["allowed-once", "rejected"] | None = Field(
        None, description="A decided tool approval: what the person decided."
    )


def problem(status: int, name: str, code: str, message: str, **extra: Any) -> web.Response:
    """An error answer in the seam's shape: ``{name, code, message}`` (and ``errors``)."""
    body = Problem(name=name, code=code, message=message, **extra)
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


def too_many(refusal: str, code: str = "TOO_MANY_QUESTIONS") -> web.Response:
    """``429 TOO_MANY_QUESTIONS`` (or ``code``): ``RETRY_AFTER`` in the ``Retry-After`` header
    and as ``retryAfter``."""
    message = f"{refusal}; retry once some have ended"
    response = problem(429, "RequestError", code, message, retryAfter=RETRY_AFTER)
    response.headers["Retry-After"] = str(RETRY_AFTER)
    return response


def failure(error: Exception, refusals: RefusalLog) -> web.Response:
    """The one place a failure becomes an HTTP answer: a seam error keeps its shape and gets
    ``STATUS_OF_CODE``'s status (``STORE_UNAVAILABLE`` in fixed words); anything else is a bug,
    logged (once a minute per kind) and answered 500 without detail."""
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


def view_of(
    status: QuestionStatus, ttl: float = 900.0, events: Sequence[AuditEvent] | None = None
) -> dict[str, Any]:
    """A question as the API shows it (``queued``: its post waits for Slack's rate limits;
    an answer with when it was decided and until when it may be consumed, ``ttl`` after),
    with its audit trail when given (``events``, oldest first)."""
    decided = status.finished_at if status.state == "answered" else None
    error = status.error.to_dict() if status.error is not None else None
    where = status.message
    approval = status.approval  # a tool approval: what was asked, and the decision
    asked = approval and {
        "tool": approval.tool_name,
        "reason": approval.headline,
        "command": approval.command,
        "path": approval.path,
    }
    view = {
        "id": status.id,
        "state": "queued" if status.queued else status.state,
        "answer": status.answer and status.answer.to_wire(),
        "decidedAt": decided,  # an answer, or a tool approval's decision
        "expiresAt": None if decided is None else decided + ttl,
        "consumedAt": None if decided is None else status.consumed_at,
        "answeredBy": status.answered_by or None,
        "answeredByName": status.answered_by_name or None,
        "votes": [v.model_dump(mode="json", by_alias=True) for v in status.votes] or None,
        "error": error and {**error, "message": _shown(error["code"], error["message"])},
        "approval": asked and {key: value for key, value in asked.items() if value},
        "decision": approval and status.decision,
        "note": status.note or None,
        "message": where and {"channel": where.channel, "ts": where.ts},
        "createdAt": status.created_at,
        "finishedAt": status.finished_at,
        "events": None
        if events is None
        else [e.model_dump(by_alias=True, exclude_none=True, mode="json") for e in events],
    }
    return {key: value for key, value in view.items() if value is not None}


def _shown(code: str, message: str) -> str:
    """An error's message as a client is shown it: ``STORE_DOWN`` for a store outage."""
    return STORE_DOWN if code == STORE_UNAVAILABLE else message


def wait_of(request: web.Request, most: float) -> float | web.Response:
    """``?wait=`` in seconds (0 when absent), or the 400 that refuses it."""
    try:
        wait = float(request.query.get("wait", "0"))
        if not 0 <= wait <= most:
            raise ValueError
    except ValueError:
        return request_problem(400, "BAD_WAIT", f"wait must be a number of seconds, 0–{most:g}")
    return wait
