"""An MCP server (``python -m bot.mcp``, stdio) giving any MCP host ``ask_user_question``: a
thin client of a running bot's HTTP API; it uses the seam and the settings, never Slack."""

from bot.mcp.client import BOT_UNREACHABLE, AskFailed, BotClient
from bot.mcp.server import DESCRIPTION, TOOL_NAME, build_server

__all__ = ["BOT_UNREACHABLE", "DESCRIPTION", "TOOL_NAME", "AskFailed", "BotClient", "build_server"]
