"""``python -m bot``: run the bot (Socket Mode, HTTP, or the local sandbox)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from bot.config import SETTINGS_HELP, ConfigError, load_settings
from bot.logs import setup_logging

__all__ = ["main"]

DESCRIPTION = """\
Ask people questions in Slack on behalf of AI agents.

The mode follows from the Slack settings: SLACK_BOT_TOKEN + SLACK_APP_TOKEN runs in
Socket Mode; SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET serves Slack over HTTP at
/slack/events; with neither, a local Slack sandbox starts and prints a page to open.
Settings come from the environment and an optional .env file in the current directory.
"""


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m bot",
        description=DESCRIPTION,
        epilog=SETTINGS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, load settings, run until SIGTERM/SIGINT; returns the exit code."""
    _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format)
    from bot.app import run

    try:
        asyncio.run(run(settings))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a startup failure: say what, without a traceback
        from bot.logs import redact

        print(f"python -m bot: {redact(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
