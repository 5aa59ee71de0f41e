"""The POSTs that ask (``/v1/questions``, ``/v1/approvals``) apart from their routes: the body
read as a request, the options it asks with, and ``Idempotency-Key``: one question per key,
however often retried (a default stated explicitly counts as left out)."""

from __future__ import annotations

import asyncio
import json
import math
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

from aiohttp import web
from pydantic import ValidationError

from adapters.slack import (
    QuestionStatus,
    SlackQuestionProvider,
    plan_review_of,
    unknown_revised,
)
from bot.api.answers import error_answer, problem, view_of
from bot.api.body import (
    ApprovalPost,
    Post,
    QuestionPost,
    body_problems,
    error_count,
    never_applied,
    validation_errors,
)
from bot.questions.errors import (
    ASK_ABORTED,
    BAD_REVIEW,
    DELIVERY_FAILED,
    UserQuestionError,
)
from bot.questions.models import AskOptions, AskUserQuestionItem
from bot.webhooks import Webhooks


async def ended_view(
    questions: SlackQuestionProvider, request_id: str, ttl: float
) -> dict[str, Any] | None:
    """``GET``'s body once the question has ended, ``{}`` while it is open, ``None`` if unknown."""
    question = await questions.status(request_id)
    if question is None or question.is_open:
        return None if question is None else {}
    return view_of(question, ttl, await questions.events(request_id))


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
    post: Post,
    default_channel: str | None,
    key: str | None,
    request_id: str,
    lookup: bool,
    ttl: float = 900.0,
) -> web.Response | None:
    """The answer to a POST whose key already asked (``None`` for a new one): 409 for another
    body, the first error again for one Slack never showed, 409 for an answer consumed, else
    200 with the question; 412 for a lookup (``If-Match: *``) that finds nothing (never asks)."""
    if existing is None:
        message = "no question was asked with this Idempotency-Key"
        return problem(412, "RequestError", "NOT_ASKED", message) if lookup else None
    if not same_request(existing, post, default_channel):
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


def unready(
    post: Post,
    provider: SlackQuestionProvider,
    owns: Callable[[str], bool],
    webhooks: Webhooks,
    asker: str | None,
) -> web.Response | None:
    """What refuses a new question: deadline settings it cannot act on with this process's
    defaults (422), a plan review revising one the token may not see (as if unknown), or a
    callback this bot may not deliver to (422; else the provider owes it the delivery)."""
    if isinstance(post, QuestionPost):
        said = provider.defaults
        never = never_applied(post, said.timeout, said.escalate_after, said.escalate_to)
        if never:
            return _invalid(never[0]["msg"], never)
        revised = post.revises
        if revised is not None and not owns(revised) and plan_review_of(post.questions) is not None:
            # the provider's own BAD_REVIEW, answered by failure(), in the gateway's guard
            raise UserQuestionError(unknown_revised(revised), BAD_REVIEW)
    why = None if post.callback is None else webhooks.refusal(post.callback, asker)
    if why is None:
        return None
    return _invalid(why, [{"loc": ["callback"], "msg": why, "type": "callback_refused"}])


def ask_options(
    post: Post, request_id: str, by: str, on_posted: Callable[[str], None]
) -> AskOptions:
    """The seam's options ``post`` asks with (detached: owned by no process)."""
    where = post.destination
    options = AskOptions(
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
    if isinstance(post, ApprovalPost):
        return options
    said = ("review", "revises", "timeout", "escalate_after", "escalate_to")
    update = {name: getattr(post, name) for name in said}
    update |= {"reminders": tuple(post.reminders or ()), "remind": tuple(post.remind or ())}
    return options.model_copy(update=update)


def shutting_down() -> web.Response:
    """``503 ASK_ABORTED``: the bot is stopping and asks nothing new (retry: another process,
    or this one restarted, takes it)."""
    return problem(503, "UserQuestionError", ASK_ABORTED, "the bot is shutting down")


_IDEMPOTENCY_KEY: Final = re.compile(r"[\x20-\x7e]{1,255}")


def key_problem(key: str | None) -> str | None:
    """Why ``key`` (the header's value; ``None`` when absent) is refused, or ``None``."""
    if key is None or _IDEMPOTENCY_KEY.fullmatch(key):
        return None
    return "Idempotency-Key is 1–255 printable ASCII characters"


class KeyLocks(weakref.WeakValueDictionary[str, asyncio.Lock]):
    """One lock per question id while any request for it is in flight (held or queued: a
    lock is dropped with its last reference)."""

    def held(self, request_id: str) -> asyncio.Lock:
        """``request_id``'s lock, to hold (queued behind earlier requests for it)."""
        return self.setdefault(request_id, asyncio.Lock())


def _same_place(question: QuestionStatus, post: Post, default_channel: str | None) -> bool:
    """Whether ``post`` asks where ``question`` was asked, its label, link and callback."""
    where = post.destination
    channel = where.channel if where else default_channel
    place = (channel, where.thread_ts if where else None)
    same = all(getattr(question, f) == getattr(post, f) for f in ("label", "link", "callback"))
    return same and (channel is None or (question.channel, question.thread_ts) == place)


def same_request(question: QuestionStatus, post: Post, default_channel: str | None) -> bool:
    """Whether ``post`` asks what ``question`` asked (a retry, not a new request): every field the
    body states counts as what it makes of the question (deadlines as offsets from asking); a
    deadline it leaves out is not compared (a default may differ in the process a retry reaches)."""
    if isinstance(post, ApprovalPost):
        shown = question.approval and question.approval.model_copy(update={"outcome": None})
        return shown == post.view() and _same_place(question, post, default_channel)
    return (
        _items(question.questions) == _items(post.questions)
        and _same_place(question, post, default_channel)
        and question.review == post.review
        and question.revises == post.revises
        and (post.remind is None or list(question.remind) == post.remind)
        and _same_times(question, post)
    )


def _items(questions: Sequence[AskUserQuestionItem]) -> list[dict[str, Any]]:
    """The questions in one form, whether their defaults were said or not: a question is
    single-select unless ``multiSelect`` is true, and ``"options": []`` shows what no
    options show (their descriptions, details and headers are ``null`` when left out)."""
    return [
        {
            **item.model_dump(mode="json"),
            "multi_select": item.is_multi_select,
            "options": [o.model_dump(mode="json") for o in item.options or ()] or None,
        }
        for item in questions
    ]


def _as_said(said: float | None, got: float | None) -> bool:
    """Whether ``got`` is what was ``said`` (``None``: left out, so anything), to the millisecond
    (stored as absolute times, compared as offsets)."""
    return said is None or (got is not None and math.isclose(got, said, rel_tol=0, abs_tol=1e-3))


def _same_times(question: QuestionStatus, post: QuestionPost) -> bool:
    """Whether the deadline fields ``post`` states are what the question got (its deadlines
    as seconds from when it was asked; reminders before the deadline, sorted)."""
    asked = question.created_at
    deadline = question.deadline
    timeout = None if deadline is None else deadline - asked
    before = sorted(deadline - at for at in question.reminders) if deadline is not None else []
    after = None if question.escalate_at is None else question.escalate_at - asked
    reminders = sorted(post.reminders or ())  # []: the defaults too
    return (
        _as_said(post.timeout, timeout)
        and (
            not reminders
            or (len(before) == len(reminders) and all(map(_as_said, reminders, before)))
        )
        and _as_said(post.escalate_after, after)
        and post.escalate_to in (None, question.escalate_to)
    )
