"""``python -m bot.mcp``: serve ``ask_user_question`` over stdio until the host closes stdin or
a signal; calls in flight abort their questions first."""

from __future__ import annotations

import argparse
import codecs
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server

from bot.mcp.client import BotClient
from bot.mcp.server import build_server
from bot.mcp.settings import MCP_SETTINGS_HELP, McpSettings, load_mcp_settings

__all__ = ["main"]

DESCRIPTION = """\
Serve the Model Context Protocol over stdio with one tool, ask_user_question, which asks
people in Slack through a running bot (`python -m bot`) and returns their answer.
"""
STOPPING = (signal.SIGTERM, signal.SIGINT)
"""The signals that stop the server (calls in flight abort their questions first)."""


class _Stdin(anyio.AsyncFile[str]):
    """The host's messages, a line each, read in the event loop once ``fd`` is readable (the
    SDK's worker thread cannot be cancelled, so a stop would wait for the next line)."""

    def __init__(self, fd: int) -> None:
        super().__init__(sys.stdin)
        self._fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending: list[str] = []
        while True:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 1 << 16)  # readable: returns at once (b"" at EOF)
            text = decoder.decode(chunk, final=not chunk)
            if "\n" in text:
                first, *lines, rest = text.split("\n")
                yield "".join(pending) + first + "\n"
                for line in lines:
                    yield line + "\n"
                pending = [rest]
            else:
                pending.append(text)
            if not chunk:
                if "".join(pending):
                    yield "".join(pending)
                return


def _pollable(fd: int) -> bool:
    """Whether ``fd`` can be waited on in the event loop (a pipe, socket or terminal)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


async def _run_stdio(server: MCPServer[Any]) -> None:
    """``server.run_stdio_async()``, with a stdin read a cancellation ends at once."""
    stdin = _Stdin(0) if _pollable(0) else None
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


async def _serve(settings: McpSettings) -> int:
    """Serve until stdin closes (0) or a stop signal comes (128 + its number)."""
    token = settings.bot_api_token.get_secret_value() if settings.bot_api_token else None
    stopped_by = 0

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        nonlocal stopped_by
        async for signum in signals:
            stopped_by = signum
            scope.cancel()  # every call in flight aborts its question (shielded) first
            return

    async with BotClient(settings.bot_url, token) as client:
        server = build_server(
            client,
            progress_every=settings.mcp_progress_seconds,
            reconnect_for=settings.mcp_reconnect_seconds,
        )
        with anyio.open_signal_receiver(*STOPPING) as signals:
            async with anyio.create_task_group() as group:
                group.start_soon(stop_on_signal, group.cancel_scope)
                await _run_stdio(server)
                group.cancel_scope.cancel()
    return 128 + stopped_by if stopped_by else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, load settings, serve until stdin closes or a stop signal comes;
    returns the exit code (128 + the signal's number after a signal)."""
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
        return anyio.run(_serve, settings)
    except KeyboardInterrupt:  # before the signal receiver is in place
        return 130


if __name__ == "__main__":
    sys.exit(main())
