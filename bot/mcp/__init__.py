"""An MCP server (``python -m bot.mcp``, stdio): ``ask_user_question``, ``ask_tool_approval``.

It is a thin client of a running bot's HTTP API (``BOT_URL``, ``BOT_API_TOKEN``) and holds
no Slack state of its own. Layering: it uses the seam (``bot.questions``) and the settings
helpers, never the Slack adapter.
"""

from bot.mcp.client import BOT_UNREACHABLE, AskFailed, BotClient
from bot.mcp.server import (
    APPROVAL_DESCRIPTION,
    APPROVAL_TOOL_NAME,
    DESCRIPTION,
    TOOL_NAME,
    build_server,
)

__all__ = [
    "APPROVAL_DESCRIPTION",
    "APPROVAL_TOOL_NAME",
    "BOT_UNREACHABLE",
    "DESCRIPTION",
    "TOOL_NAME",
    "AskFailed",
    "BotClient",
    "build_server",
]
