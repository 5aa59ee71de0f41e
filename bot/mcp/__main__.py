"""``python -m bot.mcp``: serve ``ask_user_question`` over stdio until the host closes stdin or
a signal (calls in flight abort their questions first); its settings say where the bot is."""

from __future__ import annotations

import argparse
import codecs
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any, Final, Self
from urllib.parse import urlsplit

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from pydantic import AfterValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.mcp.client import BotClient
from bot.mcp.server import build_server
from bot.settings.checks import Secret, url
from bot.settings.text import problem, render_help

DESCRIPTION = """\
Serve the Model Context Protocol over stdio with one tool, ask_user_question, which asks
people in Slack through a running bot (`python -m bot`) and returns their answer.
"""


class McpSettings(BaseSettings):
    """Where the bot's HTTP API is, and how the wait for an answer behaves."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        hide_input_in_errors=True,
    )

    bot_url: Annotated[str, AfterValidator(url("http", "https"))] = Field(
        "http://127.0.0.1:3000",
        description="Base URL of a running bot's HTTP API (`python -m bot`: HOST and PORT).",
    )
    bot_api_token: Secret | None = Field(
        None, description="The bot's BOT_API_TOKEN, when it has one."
    )
    mcp_progress_seconds: float = Field(
        15.0,
        gt=0,
        le=120,
        description="Seconds between progress notifications while a question waits.",
    )
    mcp_reconnect_seconds: float = Field(
        30.0,
        ge=0,
        description="Seconds to keep retrying when the bot stops answering while a question "
        "waits, before the call fails with BOT_UNREACHABLE.",
    )

    @model_validator(mode="after")
    def _one_authorization(self) -> Self:
        """A user:password@ in BOT_URL (a proxy's basic auth) and BOT_API_TOKEN would both
        be the request's Authorization: refused here, not at every call."""
        if self.bot_api_token is not None and urlsplit(self.bot_url).username is not None:
            raise ValueError(
                "BOT_URL carries a user name and password (user:password@) and BOT_API_TOKEN "
                "is set: both would be the request's Authorization. Remove the credentials "
                "from BOT_URL, or unset BOT_API_TOKEN."
            )
        return self


MCP_SETTINGS_HELP: Final = render_help(
    {name.upper(): field for name, field in McpSettings.model_fields.items()},
    intro="Settings are read from the environment, then from KEY=VALUE lines in ./.env.\n",
)
"""The table of settings that ``python -m bot.mcp --help`` prints."""


def load_mcp_settings() -> McpSettings:
    """The settings, or ``ValueError`` listing every problem, each naming its variable."""
    try:
        return McpSettings()
    except ValidationError as exc:
        problems = [problem(e, McpSettings.model_fields) for e in exc.errors(include_url=False)]
        raise ValueError("\n".join(f"  - {p}" for p in problems)) from None


class _Stdin(anyio.AsyncFile[str]):
    """The host's messages, a line each, read in the event loop once ``fd`` is readable (the
    SDK's worker thread cannot be cancelled, so a stop would wait for the next line)."""

    def __init__(self, fd: int) -> None:
        super().__init__(sys.stdin)
        self._fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending: list[str] = []
        chunk = b"\n"
        while chunk:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 1 << 16)  # readable: returns at once (b"" at EOF)
            *lines, rest = decoder.decode(chunk, final=not chunk).split("\n")
            for line in lines:
                yield "".join([*pending, line, "\n"])
                pending = []
            pending.append(rest)
        if "".join(pending):
            yield "".join(pending)


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
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
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
