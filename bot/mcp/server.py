"""The MCP server's tools, ``ask_user_question`` and ``ask_tool_approval``, answered in Slack:
each posts to the bot's HTTP API and long-polls with progress; any way out but the question's
own ending (a cancelled call, a bot that stays away) aborts the question first."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from importlib import resources
from typing import Any, Final

import anyio
import yaml
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from bot.api.body import ApprovalPost, Post, QuestionPost, checked, error_count
from bot.mcp.client import ENDED, AskFailed, BotClient, bad_response, reconnecting

TOOL_NAME: Final = "ask_user_question"
"""The tool asking a person questions."""
_log = logging.getLogger("bot.mcp")
_OPEN: Final = frozenset({"queued", "pending"})
"""States of a question still open (``queued``: its post waits for Slack's rate limits)."""

_TOOLS: Final = yaml.safe_load(resources.files("bot.mcp").joinpath("tools.yaml").read_text())
DESCRIPTION: Final[str] = _TOOLS[TOOL_NAME]["description"]
"""What ``ask_user_question`` tells the host: when to ask, how, and what each failure means."""
APPROVAL_TOOL_NAME: Final = "ask_tool_approval"
"""The tool asking a person to allow one tool call."""


def input_schema(model: type[Post] = QuestionPost, name: str = TOOL_NAME) -> dict[str, Any]:
    """A tool's input schema: the HTTP API's body (``QuestionPost``, ``ApprovalPost``), wire
    names, every option documented, unknown arguments refused as the tool refuses them."""
    schema = model.model_json_schema(by_alias=True)
    return {**schema, "title": f"{name}Arguments", "additionalProperties": False}


def build_server(
    client: BotClient, *, progress_every: float = 15.0, reconnect_for: float = 30.0
) -> MCPServer[Any]:
    """The MCP server, asking through ``client``: progress every ``progress_every`` seconds, a
    bot that stops answering retried for ``reconnect_for`` seconds."""

    def tool(model: type[Post], name: str) -> Tool:
        route = "/v1/approvals" if model is ApprovalPost else "/v1/questions"

        async def run(ctx: Context) -> CallToolResult:
            # Validated as they came on the wire, not as the SDK passes them (it drops unknown
            # arguments and re-types strings holding JSON text), so every malformed argument
            # is the seam's INVALID_REQUEST, as the bot's own 422 is.
            failed = False
            try:
                body = _arguments(model, ctx)
                answer = await _ask(client, body, ctx, progress_every, reconnect_for, route)
            except AskFailed as failure:
                _log.info("%s failed: %s", route, failure.code)
                answer, failed = failure.error, True
            text = [TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))]
            return CallToolResult(content=text, structured_content=answer, is_error=failed)

        words = _TOOLS[name]
        made = Tool.from_function(
            run,
            name=name,
            title=words["title"],
            description=words["description"],
            annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True),
        )
        made.parameters = input_schema(model, name)  # advertised typed, validated in the tool
        return made

    tools = [tool(QuestionPost, TOOL_NAME), tool(ApprovalPost, APPROVAL_TOOL_NAME)]
    return MCPServer("slack-user-questions", instructions=_TOOLS["instructions"], tools=tools)


def _arguments(model: type[Post], ctx: Context) -> dict[str, Any]:
    """The body the call's arguments make as the host sent them (``tools/call``'s raw params),
    checked as the bot checks a body (``null`` is not given, an unknown argument refused), or
    ``INVALID_REQUEST`` with ``errors``."""
    given = (ctx.request_context.params or {}).get("arguments")
    given = {k: v for k, v in given.items() if v is not None} if isinstance(given, Mapping) else {}
    errors = checked(model, given)
    if not isinstance(errors, list):
        return errors.to_wire()
    where = ".".join(errors[0]["loc"]) or "arguments"
    count = error_count(len(errors))
    message = f"the arguments are not a valid question request ({count}); {where}: "
    message += errors[0]["msg"]
    error = {"name": "ValidationError", "code": "INVALID_REQUEST", "message": message}
    raise AskFailed({**error, "errors": errors})


async def _ask(
    client: BotClient,
    body: dict[str, Any],
    ctx: Context,
    progress_every: float,
    reconnect_for: float,
    route: str = "/v1/questions",
) -> dict[str, Any]:
    """Post to ``route``, then long-poll until the question (or approval) ends, a poll back
    sooner than ``progress_every`` followed by a pause; any other way out aborts it first:
    nobody would be waiting for its answer."""
    posted = await _post(client, body, f"mcp-{uuid.uuid4().hex}", reconnect_for, route)
    request_id, state, started = posted["id"], posted.get("state"), time.monotonic()
    intents = (q.get("intent") or {} for q in body.get("questions", ()))
    review = any(i.get("kind") == "plan-review" for i in intents)
    try:
        await ctx.report_progress(0, None, _progress(state, None))
        while True:
            polled = time.monotonic()
            waiting = reconnecting(reconnect_for)
            view: dict[str, Any] = await waiting(client.wait, request_id, progress_every)
            state = view.get("state")
            if state in ENDED:
                outcome = _ending(view, review)
                break
            if state not in _OPEN:
                raise bad_response(f"the question is in no state it documents ({state!r})")
            await anyio.sleep(max(0.0, progress_every - (time.monotonic() - polled)))
            waited = round(time.monotonic() - started, 1)
            await ctx.report_progress(waited, None, _progress(state, waited))
    except BaseException:
        await _abort(client, request_id)
        raise
    if isinstance(outcome, AskFailed):
        raise outcome
    return outcome


async def _post(
    client: BotClient, body: dict[str, Any], key: str, reconnect_for: float, route: str
) -> dict[str, Any]:
    """Post with Idempotency-Key ``key``, posted again with it while the reply is lost (for
    ``reconnect_for`` seconds); on any way out but a refusal (4xx) of the first post, the
    question the key may have asked is looked up by its key and aborted."""
    retrying = reconnecting(reconnect_for)
    try:
        return await retrying(client.ask, body, key=key, route=route)
    except BaseException as exc:
        retried = retrying.statistics.get("attempt_number", 1) > 1
        if retried or not (isinstance(exc, AskFailed) and exc.refused):
            await _abort(client, None, body=body, key=key, route=route)
        raise


def _ending(view: dict[str, Any], review: bool) -> dict[str, Any] | AskFailed:
    """An ended question's answer, or the seam's error it ended with. A decision (a tool
    approval, a plan ``review``) says when it was made and until when it may be consumed."""
    state = view["state"]
    when: dict[str, Any] = {k: view[k] for k in ("id", "decidedAt", "expiresAt") if k in view}
    if state == "answered" and view.get("decision") in ("allowed-once", "rejected"):
        return {"decision": view["decision"], **when}  # a tool approval
    if state == "answered":
        answer = view.get("answer")
        if not isinstance(answer, dict) or not isinstance(answer.get("answers"), list):
            raise bad_response("an answered question without its answer")
        return {**answer, **when} if review else answer  # else the seam's answer as it is
    error = view["error"] if isinstance(view.get("error"), dict) else {}
    said = {
        "name": "UserQuestionError",
        "code": "ASK_FAILED",
        "message": f"the question ended: {state}",
    }
    return AskFailed({key: str(error.get(key, default)) for key, default in said.items()})


def _progress(state: Any, waited: float | None) -> str:
    """What a progress notification says: posted or still queued, and for how long."""
    if state == "queued":
        since = "." if waited is None else f" ({waited:.0f} s)."
        return "Queued for Slack's rate limits; waiting for an answer" + since
    if waited is None:
        return "Posted to Slack; waiting for an answer."
    return f"Still waiting for an answer in Slack ({waited:.0f} s)."


async def _abort(client: BotClient, request_id: str | None, **asked: Any) -> None:
    """Abort the question (``None``: the one a post's ``asked`` body, key and route asked,
    if it did), shielded from cancellation and best effort: a failure is logged."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(10 if request_id else 40):
        try:
            if request_id is None:
                request_id = (await client.ask(**asked, lookup=True)).get("id")
            if request_id is not None:
                await client.abort(request_id)
        except AskFailed as failure:
            shown = request_id or "the question of a post given up"
            _log.warning("could not abort %s: %s (%s)", shown, failure, failure.code)
