"""A thin client of a running bot's HTTP API: ask, long-poll, abort. Every failure is an
``AskFailed`` with the seam's ``{name, code, message}``; ``retryable`` tells those worth
retrying (the bot out of reach, or answering 503)."""

from __future__ import annotations

import json
from typing import Any, Final, Self
from urllib.parse import urlsplit

import aiohttp
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)
from tenacity.stop import stop_base

from adapters.urls import redact_url
from bot.questions.errors import ASK_ABORTED, DELIVERY_FAILED, STORE_UNAVAILABLE

BOT_UNREACHABLE: Final = "BOT_UNREACHABLE"
"""The code of a failure to reach the bot's HTTP API, or to read its reply to the end."""
BAD_RESPONSE: Final = "BAD_RESPONSE"
"""The code of a reply from the bot that is not what its API documents."""
NOT_ASKED: Final = "NOT_ASKED"
"""The code of the bot's 412 to a conditional ``POST``: no question was asked with the key."""
ENDED: Final = frozenset({"answered", "cancelled", "aborted", "failed"})
"""States in which a question has ended by itself: nothing left to abort."""
_MARGIN: Final = 10.0  # seconds a long-poll may take beyond its ``wait``
_PASSING: Final = frozenset({STORE_UNAVAILABLE, ASK_ABORTED})
"""Codes of a 503 that passes: the store briefly down, the bot shutting down (POST only)."""


class AskFailed(Exception):
    """A question failed; ``error`` is the seam's ``{name, code, message}`` (with the bot's
    ``errors`` or ``retryAfter`` when it sent them), ``status`` the HTTP status, if any."""

    def __init__(self, error: dict[str, Any], status: int | None = None) -> None:
        self.error = error
        self.status = status
        super().__init__(str(error["message"]))

    @property
    def code(self) -> str:
        """The error's stable code (``ASK_CANCELLED``, ``BOT_UNREACHABLE``, …)."""
        return str(self.error["code"])

    @property
    def retryable(self) -> bool:
        """Whether asking again soon may succeed: the bot out of reach (or its reply cut
        off), its store briefly down, or the bot shutting down (another process, or this
        one restarted, takes the question)."""
        return self.code == BOT_UNREACHABLE or (self.status == 503 and self.code in _PASSING)

    @property
    def refused(self) -> bool:
        """Whether the bot answered a ``POST`` with a refusal (4xx: it asked nothing) or
        with Slack's (``DELIVERY_FAILED``: the question ended unshown)."""
        return self.status is not None and (self.status // 100 == 4 or self.code == DELIVERY_FAILED)


def _failure(code: str, message: str, name: str = "UserQuestionError") -> AskFailed:
    return AskFailed({"name": name, "code": code, "message": message})


def bad_response(what: str) -> AskFailed:
    """``BAD_RESPONSE``: the bot's reply is not what its API documents (``what`` says how)."""
    return _failure(BAD_RESPONSE, f"the bot's reply is not what its API documents: {what}")


class BotClient:
    """The bot's ``/v1/questions`` routes over an aiohttp session (one per ``async with``)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        if token and urlsplit(url).username is not None:
            # aiohttp would refuse each request: both would be its Authorization.
            raise ValueError("a bot URL with user:password@ cannot be used with an API token")
        self._url = url.rstrip("/")
        self._shown = redact_url(self._url)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(headers=self._headers)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def ask(
        self, body: dict[str, Any], *, key: str, route: str = "/v1/questions", lookup: bool = False
    ) -> dict[str, Any]:
        """Post a question (``key``: the Idempotency-Key): it as the API shows it once Slack has
        the message, or ``queued``. A ``lookup`` (``If-Match: *``) never asks: the question
        ``key`` asked (a ``POST`` with it still in flight is waited for), ``{}`` if none."""
        headers = {"Idempotency-Key": key} | ({"If-Match": "*"} if lookup else {})
        ok = (412,) if lookup else ()
        view = await self._call("POST", route, json=body, headers=headers, limit=60.0, ok=ok)
        if lookup and view.get("code") == NOT_ASKED:
            return {}
        if not isinstance(view.get("id"), str):
            raise bad_response("the question it posted has no id")
        return view

    async def wait(self, request_id: str, seconds: float) -> dict[str, Any]:
        """The question's state after waiting up to ``seconds`` for it to end."""
        return await self._call(
            "GET",
            f"/v1/questions/{request_id}",
            params={"wait": f"{seconds:g}"},
            limit=seconds + _MARGIN,
        )

    async def abort(self, request_id: str) -> dict[str, Any]:
        """Abort the question; its Slack message then says it was cancelled."""
        return await self._call("DELETE", f"/v1/questions/{request_id}", limit=30.0, ok=(409,))

    async def _call(
        self, method: str, path: str, *, limit: float, ok: tuple[int, ...] = (), **kwargs: Any
    ) -> dict[str, Any]:
        if self._session is None:
            raise RuntimeError("use BotClient in `async with`")
        try:
            async with self._session.request(
                method, self._url + path, timeout=aiohttp.ClientTimeout(total=limit), **kwargs
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Any transport failure, a reply cut off half way included: retried while a
            # question waits, like a bot that is not there.
            reason = str(exc) or type(exc).__name__
            raise _failure(
                BOT_UNREACHABLE,
                f"cannot reach the bot at {self._shown} (BOT_URL): {reason}. "
                "Is `python -m bot` running there?",
            ) from exc
        body = _json(raw)
        if status < 400 or status in ok:
            if body is None:
                raise bad_response(f"{method} {path} answered {status} without a JSON object")
            return body
        if body is not None and {"name", "code", "message"} <= body.keys():
            error: dict[str, Any] = {k: str(body[k]) for k in ("name", "code", "message")}
            if isinstance(body.get("errors"), list):
                error["errors"] = body["errors"]  # where a malformed request is wrong
            retry_after = body.get("retryAfter")
            if isinstance(retry_after, int | float) and not isinstance(retry_after, bool):
                error["retryAfter"] = retry_after  # 429: when to ask again
        else:
            message = f"the bot answered {method} {path} with {status}"
            error = {"name": "UserQuestionError", "code": f"HTTP_{status}", "message": message}
        raise AskFailed(error, status)


def _json(raw: bytes) -> dict[str, Any] | None:
    """The JSON object ``raw`` holds; ``None`` when it is not one (not UTF-8 included)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None


class _Window(stop_base):
    """Stop once a call has been failing for ``seconds`` since its first failure."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.since = seconds, 0.0

    def __call__(self, state: RetryCallState) -> bool:
        now = state.outcome_timestamp or 0.0
        self.since = self.since or now
        return now - self.since >= self.seconds


def reconnecting(seconds: float, *, from_start: bool = False) -> AsyncRetrying:
    """Retry a call failing in a way worth retrying (the bot out of reach, or answering 503)
    for ``seconds`` from its first failure (or its start), 0.5 s apart doubling to 5 s."""
    return AsyncRetrying(
        retry=retry_if_exception(lambda e: isinstance(e, AskFailed) and e.retryable),
        wait=wait_exponential(multiplier=0.5, max=5.0),
        stop=stop_after_delay(seconds) if from_start else _Window(seconds),
        reraise=True,
    )
