"""An MCP server (``python -m bot.mcp``, stdio): ``ask_user_question``, ``ask_tool_approval``;
a thin client of a running bot's HTTP API: it uses the seam and the settings, never Slack."""

from bot.mcp.client import BotClient
from bot.mcp.server import APPROVAL_TOOL_NAME, DESCRIPTION, TOOL_NAME, build_server

__all__ = ["APPROVAL_TOOL_NAME", "DESCRIPTION", "TOOL_NAME", "BotClient", "build_server"]
