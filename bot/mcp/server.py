"""The MCP server: one tool, ``ask_user_question``, answered by people in Slack.

The tool's input schema is generated from the seam's models (``AskUserQuestionItem`` and
what it holds) by the MCP SDK; a call posts the questions to the bot's HTTP API, sends
progress notifications while it long-polls for the outcome, and returns the seam's answer
JSON (as text and as structured content). A failure is a tool error whose text is the
seam's ``{name, code, message}``. When the client cancels the call, the question is
aborted, and its Slack message says it was cancelled.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Annotated, Any, Final

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from bot.mcp.client import BOT_UNREACHABLE, AskFailed, BotClient, backoff
from bot.questions.models import AskUserQuestionItem

__all__ = ["DESCRIPTION", "TOOL_NAME", "build_server"]

TOOL_NAME: Final = "ask_user_question"
"""The one tool's name."""
_log = logging.getLogger("bot.mcp")

DESCRIPTION: Final = """\
Ask a person in Slack and wait for their answer.

Use it when only a person can decide or know: approval before an irreversible or risky \
action (deploying, deleting data, spending money, sending messages on someone's behalf), \
a choice between options you cannot settle from the code, documents or tools you have, \
facts only they know, or a review of your plan before you carry it out. Do not ask what \
you can find out yourself, and ask related questions together in one call.

Each question has an `id` (echoed in its answer), the `question`, optionally a short \
`header`, a markdown `detail` with the context, `options` (each a `label`, returned \
exactly as written, and an optional `description`) and `multiSelect`. A question without \
options gets a free-text answer. For a plan review send one question whose `detail` is \
the plan, with two options (approve, decline) and `intent: {"kind": "plan-review", \
"approve": "<the approving label>"}`.

The call blocks until someone answers, which can take minutes; progress notifications \
are sent while it waits. The result is JSON: {"answers": [{"id": …, "selected": \
[labels…], "custom": "free text, when typed"}]}, one item per question in order; \
`selected: []` means skipped or answered in free text only.

On failure the tool returns an error whose text is JSON {name, code, message}: \
ASK_CANCELLED means the person dismissed the question (do not ask it again; continue \
without it or stop), ASK_TIMEOUT that nobody answered in time, EMPTY_QUESTIONS, \
BAD_INTENT or SLACK_LIMIT that the request must be fixed, ASK_ABORTED that the question \
was withdrawn, BOT_UNREACHABLE that the Slack bot is not running."""

Questions = Annotated[
    list[AskUserQuestionItem],
    Field(description="The questions, asked together in one Slack message, in this order."),
]
Label = Annotated[
    str | None,
    Field(
        max_length=120,
        description="Who is asking, shown on the message (for example the project or task).",
    ),
]
Link = Annotated[
    str | None,
    Field(
        description="A URL back to where the question comes from (a pull request, a run), "
        "shown on the message as a link button.",
    ),
]


def build_server(
    client: BotClient, *, progress_every: float = 15.0, reconnect_for: float = 30.0
) -> MCPServer[Any]:
    """The MCP server, asking through ``client``.

    Progress is reported every ``progress_every`` seconds while a question waits; a bot
    that stops answering meanwhile is retried for ``reconnect_for`` seconds.
    """
    server: MCPServer[Any] = MCPServer(
        "slack-user-questions",
        instructions="ask_user_question asks a person in Slack and returns their answer.",
    )

    @server.tool(
        name=TOOL_NAME,
        title="Ask a person in Slack",
        description=DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True),
    )
    async def ask_user_question(
        questions: Questions, ctx: Context, label: Label = None, link: Link = None
    ) -> CallToolResult:
        body: dict[str, Any] = {"questions": [q.to_wire() for q in questions]}
        if label is not None:
            body["label"] = label
        if link is not None:
            body["link"] = link  # only when given: older bots refuse the key
        try:
            answer = await _ask(client, body, ctx, progress_every, reconnect_for)
        except AskFailed as failure:
            _log.info("ask_user_question failed: %s", failure.code)
            return CallToolResult(
                content=[TextContent(type="text", text=failure.to_json())],
                structured_content=failure.error,
                is_error=True,
            )
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))],
            structured_content=answer,
        )

    return server


async def _ask(
    client: BotClient,
    body: dict[str, Any],
    ctx: Context,
    progress_every: float,
    reconnect_for: float,
) -> dict[str, Any]:
    """Post, then long-poll until the question ends; cancellation aborts it."""
    started = time.monotonic()
    key = f"mcp-{uuid.uuid4().hex}"
    try:
        request_id = await client.ask(body, key=key)
    except anyio.get_cancelled_exc_class():
        # Cancelled while posting: the bot may post it anyway. Find it by its key, abort it.
        with anyio.CancelScope(shield=True), anyio.move_on_after(40):
            try:
                await client.abort(await client.ask(body, key=key))
            except AskFailed as failure:
                _log.warning("could not abort a question cancelled while posting: %s", failure)
        raise
    try:
        await ctx.report_progress(0, None, "Posted to Slack; waiting for an answer.")
        lost_since: float | None = None
        attempt = 0
        while True:
            try:
                view = await client.wait(request_id, progress_every)
            except AskFailed as failure:
                if failure.code != BOT_UNREACHABLE:
                    raise
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since >= reconnect_for:
                    raise
                await backoff(attempt)
                attempt += 1
                continue
            lost_since, attempt = None, 0
            state = view.get("state")
            if state == "answered":
                answer: dict[str, Any] = view["answer"]
                return answer
            if state != "pending":
                error = view.get("error") or {}
                raise AskFailed(
                    {
                        "name": str(error.get("name", "UserQuestionError")),
                        "code": str(error.get("code", "ASK_FAILED")),
                        "message": str(error.get("message", f"the question ended: {state}")),
                    }
                )
            waited = time.monotonic() - started
            await ctx.report_progress(
                round(waited, 1), None, f"Still waiting for an answer in Slack ({waited:.0f} s)."
            )
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            try:
                await client.abort(request_id)
            except AskFailed as failure:
                _log.warning("could not abort %s: %s", request_id, failure)
        raise
