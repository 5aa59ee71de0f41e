"""The bolt ``AsyncApp`` the provider expects, with the workspace identity resolved up front;
the request bolt would build from a body, with forms decoded in C; ``POST /slack/events``."""

from __future__ import annotations

import json
import logging
import re
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

from adapters.httpguard import RefusalLog
from adapters.slack.pacing.budget import Budget
from adapters.slack.pacing.paced import PacedWebClient
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.pacing.scheduler import WebApiScheduler


def _not_token_notice(record: logging.LogRecord) -> bool:
    """Drops bolt's notices that a token is ignored: ours is the client's, on purpose."""
    message = record.getMessage()
    return "will be ignored" not in message and "will be unused" not in message


def web_client(
    token: str,
    *,
    base_url: str | None = None,
    timeout: int = 10,
    limits: SlackLimits | None = None,
    budget: Budget | None = None,
    pace: bool = True,
) -> AsyncWebClient:
    """An ``AsyncWebClient`` that keeps its connections open and paces calls within limits."""
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))
    args = (token, base_url or AsyncWebClient.BASE_URL, timeout)
    if not pace:
        return AsyncWebClient(*args, session=session)
    return PacedWebClient(*args, session=session, scheduler=WebApiScheduler(limits, budget=budget))


async def close_web_client(client: AsyncWebClient) -> None:
    """Close the session (and the scheduler) of a client made by ``web_client`` (idempotent)."""
    if isinstance(client, PacedWebClient):
        await client.scheduler.close()
    if client.session is not None:
        await client.session.close()


async def build_app(
    client: AsyncWebClient,
    *,
    signing_secret: str,
    verify_requests: bool = True,
) -> AsyncApp:
    """An ``AsyncApp`` on ``client`` with ``process_before_response=True``."""
    identity = await client.auth_test()
    known = AuthorizeResult.from_auth_test_response(
        bot_token=client.token or "", auth_test_response=identity
    )

    async def authorize(**_: Any) -> AuthorizeResult:
        return known

    bolt_logger = logging.getLogger("slack_bolt")
    bolt_logger.addFilter(_not_token_notice)
    try:
        app = AsyncApp(
            client=client,
            authorize=authorize,
            signing_secret=signing_secret,
            process_before_response=True,
            request_verification_enabled=verify_requests,
            logger=bolt_logger,
        )
    finally:
        bolt_logger.removeFilter(_not_token_notice)
    url = identity.get("url")
    if isinstance(url, str) and url.startswith("https://"):
        _team_urls[app] = url
    return app


_team_urls: weakref.WeakKeyDictionary[AsyncApp, str] = weakref.WeakKeyDictionary()


def team_url(app: AsyncApp) -> str | None:
    """The workspace's URL (``https://team.slack.com/``) that ``auth.test`` gave ``build_app``."""
    return _team_urls.get(app)


_FORM: Final = re.compile(r"[A-Za-z0-9._~*%+&=-]*")
"""What a form body is made of: unreserved characters, ``*``, escapes, ``+`` and separators."""


def form_fields(body: str) -> dict[str, str]:
    """A form body's fields, as ``dict(parse_qsl(body, keep_blank_values=True))``."""
    return dict(URL.build(query_string=body, encoded=True).query.items())


def bolt_request(body: str, query: str, headers: Mapping[str, Any]) -> AsyncBoltRequest:
    """The request bolt's ``AsyncBoltRequest(body=body, query=query, headers=headers)``
    would be. Raises ``ValueError`` where bolt would: a ``payload`` that is not JSON."""
    if not body or body.startswith("{") or not _FORM.fullmatch(body):
        return AsyncBoltRequest(body=body, query=query, headers=headers)  # type: ignore[arg-type]
    request = AsyncBoltRequest(body="", query=query, headers=headers)  # type: ignore[arg-type]
    if request.content_type == "application/json":
        return AsyncBoltRequest(body=body, query=query, headers=headers)  # type: ignore[arg-type]
    fields = form_fields(body)
    parsed: dict[str, Any] = fields
    if "payload" in body:  # as bolt decides: the word anywhere in the body
        payload = fields.get("payload")
        parsed = json.loads(payload) if payload is not None else {}
    request.raw_body = body
    request.body = parsed
    request.context = build_async_context(AsyncBoltContext({}), parsed)
    return request


async def to_bolt_request(request: web.Request) -> AsyncBoltRequest:
    """bolt's ``slack_bolt.adapter.aiohttp.to_bolt_request``, the form decoded in C: an app
    served on aiohttp reads a click as fast as ``python -m bot`` does."""
    return bolt_request(await request.text(), request.query_string, request.headers)


_TIMESTAMP: Final = re.compile(r"[0-9]{1,12}")
_SIGNATURE: Final = re.compile(r"v0=[0-9a-f]{64}")


def _signature_problem(request: web.Request) -> tuple[int, str, str] | None:
    """Why the signature headers cannot be checked: (status, cause, reason); or ``None``."""
    stamp = request.headers.get("X-Slack-Request-Timestamp")
    signature = request.headers.get("X-Slack-Signature")
    if stamp is None or signature is None:
        return 401, "unsigned", "X-Slack-Request-Timestamp and X-Slack-Signature are required"
    if not _TIMESTAMP.fullmatch(stamp):
        return 400, "bad_timestamp", "X-Slack-Request-Timestamp is not a Unix time in seconds"
    if not _SIGNATURE.fullmatch(signature):
        return 400, "bad_signature_header", "X-Slack-Signature is not v0= and 64 hex digits"
    return None


def _dispatchable(body: Any) -> bool:
    """Whether bolt can route ``body``: a ``block_actions`` payload names its actions."""
    if not isinstance(body, dict) or body.get("type") != "block_actions":
        return True
    actions = body.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    return isinstance(first, dict) and isinstance(first.get("action_id"), str)


SLACK_MAX_BODY: Final = 1_048_576
"""The largest body ``/slack/events`` takes (Slack's payloads fit well within)."""


def events_handler(
    app: AsyncApp,
    signing_secret: str,
    *,
    refusals: RefusalLog | None = None,
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The aiohttp handler for ``POST /slack/events``: verify first, then let bolt dispatch."""
    verifier = SignatureVerifier(signing_secret)
    log = refusals or RefusalLog(logging.getLogger("adapters.slack.events"))

    def refused(status: int, cause: str, reason: str) -> web.Response:
        log.refused(cause, f"/slack/events: {reason}")
        return web.json_response({"error": cause, "detail": reason}, status=status)

    async def handle(request: web.Request) -> web.StreamResponse:
        problem = _signature_problem(request)
        if problem is not None:
            return refused(*problem)
        raw = await request.read()
        if len(raw) > SLACK_MAX_BODY:
            return refused(413, "too_large", f"the body is larger than {SLACK_MAX_BODY} bytes")
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:  # Slack only ever sends UTF-8: not from Slack
            return refused(401, "bad_signature", "the body is not UTF-8, so not from Slack")
        headers = {key.lower(): value for key, value in request.headers.items()}
        if not verifier.is_valid_request(body, headers):
            return refused(401, "bad_signature", "the signature does not match, or is stale")
        try:
            parsed = bolt_request(body, request.query_string, request.headers)
        except ValueError:  # signed by Slack, yet not a payload bolt can read
            return web.json_response({"error": "unreadable payload"}, status=400)
        if not _dispatchable(parsed.body):
            return refused(400, "unreadable_payload", "block_actions without an action")
        return await to_aiohttp_response(await app.async_dispatch(parsed))

    return handle
