"""A Python client for agents outside the bot: ``await ask(...)`` / ``ask_sync(...)`` over the
HTTP API, returning the seam's answer or raising its error; a bot that restarts meanwhile is
waited out for ``reconnect_for`` seconds (found again by its Idempotency-Key)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from bot.api.body import QuestionPost, checked
from bot.mcp.client import ENDED, AskFailed, BotClient, reconnecting
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

DEFAULT_URL: Final = "http://127.0.0.1:3000"
"""Where the bot listens when ``BOT_URL`` is unset (``python -m bot``'s default)."""
INVALID_REQUEST: Final = "INVALID_REQUEST"
"""The code of a request the bot would refuse (checked here first, with the bot's model)."""

Question = AskUserQuestionItem | Mapping[str, Any]
"""A question as the seam's model or its wire JSON (``{"id", "question", "options"…}``)."""


async def ask(
    questions: Sequence[Question],
    *,
    url: str | None = None,
    token: str | None = None,
    key: str | None = None,
    reconnect_for: float = 300.0,
    poll: float = 60.0,
    **options: Any,
) -> AskUserQuestionAnswer:
    """Ask ``questions`` in Slack through the bot and wait for the answer; ``options`` are the
    HTTP API's (wire names), ``key`` the Idempotency-Key. Cancelling aborts the question."""
    body = _body(questions, options)
    key = key or f"py-{uuid.uuid4().hex}"
    url = url or os.environ.get("BOT_URL") or DEFAULT_URL
    token = token if token is not None else os.environ.get("BOT_API_TOKEN") or None
    call = functools.partial(_call, reconnect_for=reconnect_for)
    async with BotClient(url, token) as client:
        post = functools.partial(client.ask, body, key=key)
        request_id = (await call(post))["id"]
        try:
            while True:
                view = await call(functools.partial(client.wait, request_id, poll))
                if view.get("state") in ENDED:
                    return _ending(view)
                if view.get("code") == "NOT_FOUND":  # a bot that lost it: ask it again
                    request_id = (await call(post))["id"]
        except asyncio.CancelledError:  # abort it, best effort: nobody waits for the answer
            with contextlib.suppress(AskFailed, TimeoutError):
                await asyncio.shield(asyncio.wait_for(client.abort(request_id), 10))
            raise


def ask_sync(questions: Sequence[Question], **kwargs: Any) -> AskUserQuestionAnswer:
    """``ask`` from code that is not async (runs its own event loop)."""
    return asyncio.run(ask(questions, **kwargs))


def _body(questions: Sequence[Question], options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``POST /v1/questions`` body, checked as the bot checks it (``QuestionPost``)."""
    given = {
        "questions": [
            q.to_wire() if isinstance(q, AskUserQuestionItem) else dict(q) for q in questions
        ],
        **options,
    }
    post = checked(QuestionPost, given)
    if isinstance(post, list):
        where = ".".join(post[0]["loc"]) or "request"
        raise UserQuestionError(
            f"not a valid question request: {where}: {post[0]['msg']}", INVALID_REQUEST
        )
    return post.to_wire()


async def _call(
    make: Callable[[], Awaitable[dict[str, Any]]], reconnect_for: float
) -> dict[str, Any]:
    """``make()``, retried while it fails in a way worth retrying (the bot away, or restarting)
    for ``reconnect_for`` seconds; a failure the bot answered with becomes the seam's error."""
    while True:
        try:
            result: dict[str, Any] = await reconnecting(reconnect_for, from_start=True)(make)
            return result
        except AskFailed as failure:
            if failure.status == 404 and failure.code == "NOT_FOUND":
                return {"code": "NOT_FOUND"}
            if failure.status == 429:  # over a cap for now: asked again when it says
                await asyncio.sleep(float(failure.error.get("retryAfter", 5)))
                continue
            raise UserQuestionError(failure.error["message"], failure.code) from None


def _ending(view: Mapping[str, Any]) -> AskUserQuestionAnswer:
    """An ended question's answer, or its seam error raised."""
    if view["state"] == "answered":
        return AskUserQuestionAnswer.model_validate(view["answer"])
    error = view.get("error") or {}
    code = str(error.get("code", "ASK_FAILED"))
    raise UserQuestionError(str(error.get("message", f"the question ended: {view['state']}")), code)
