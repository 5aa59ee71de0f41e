"""``python -m bot.mcp``: serve ``ask_user_question`` over stdio to an MCP host."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import anyio

from bot.mcp.client import BotClient
from bot.mcp.server import build_server
from bot.mcp.settings import MCP_SETTINGS_HELP, McpSettings, load_mcp_settings

__all__ = ["main"]

DESCRIPTION = """\
Serve the Model Context Protocol over stdio with one tool, ask_user_question, which asks
people in Slack through a running bot (`python -m bot`) and returns their answer.
"""


async def _serve(settings: McpSettings) -> None:
    token = settings.bot_api_token.get_secret_value() if settings.bot_api_token else None
    async with BotClient(settings.bot_url, token) as client:
        server = build_server(
            client,
            progress_every=settings.mcp_progress_seconds,
            reconnect_for=settings.mcp_reconnect_seconds,
        )
        await server.run_stdio_async()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, load settings, serve until stdin closes; returns the exit code."""
    argparse.ArgumentParser(
        prog="python -m bot.mcp",
        description=DESCRIPTION,
        epilog=MCP_SETTINGS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    try:
        settings = load_mcp_settings()
    except ValueError as exc:
        print(f"python -m bot.mcp: problems in the settings:\n{exc}", file=sys.stderr)
        return 2
    try:
        anyio.run(_serve, settings)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
