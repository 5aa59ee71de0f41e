"""An MCP server (``python -m bot.mcp``, stdio): ``ask_user_question``, ``ask_tool_approval``;
a thin client of a running bot's HTTP API: it uses the seam and the settings, never Slack."""

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
