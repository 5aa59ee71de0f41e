"""``python -m bot``: run the bot (Socket Mode, HTTP, or the local sandbox)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Sequence

from bot.logs import redact, setup_logging
from bot.settings.config import SETTINGS_HELP, ConfigError, Settings, load_settings

DESCRIPTION = """\
Ask people questions in Slack on behalf of AI agents (the settings and the modes they
choose are below).

`python -m bot audit --since 7d` exports the audit trail as JSON lines instead.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, load settings, run until SIGTERM/SIGINT; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["audit"]:
        return audit_main(args[1:])
    argparse.ArgumentParser(
        prog="python -m bot",
        description=DESCRIPTION,
        epilog=SETTINGS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(args)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format)
    from bot.app.runtime import run

    try:
        asyncio.run(run(settings))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a startup failure: say what, without a traceback
        if isinstance(exc, BrokenPipeError):  # e.g. `python -m bot | head -1`: stdout is gone
            _discard_stdout()
        print(f"python -m bot: {redact(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


def _discard_stdout() -> None:
    """Point stdout at the null device, so the exit's flush finds no broken pipe (which
    Python reports with exit code 120 instead of ours)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def audit_main(argv: Sequence[str]) -> int:
    """``python -m bot audit --since … [--until …] | --verify``; returns the exit code
    (1 when the trail's hash chain shows an edited, removed or reordered event)."""
    from bot.api.audit import AUDIT_HELP, parse_range

    parser = argparse.ArgumentParser(prog="python -m bot audit", description=AUDIT_HELP)
    parser.add_argument("--since", help="start of the range (e.g. 7d, 2026-12-01)")
    parser.add_argument("--until", help="end of the range, exclusive (default: now)")
    parser.add_argument(
        "--verify", action="store_true", help="check the whole trail's hash chain, export nothing"
    )
    args = parser.parse_args(argv)
    if args.since is None and not args.verify:
        parser.error("--since is required (or --verify)")
    since, until = 0.0, None
    try:
        if args.since is not None:
            since, until = parse_range(args.since, args.until)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        settings = load_settings(serves=False)
    except ConfigError as exc:
        print(f"python -m bot audit: {exc}", file=sys.stderr)
        return 2
    if settings.store == "memory":
        print(
            "python -m bot audit: the memory store keeps no trail beyond its process; "
            "set STORE=sqlite (STORE_PATH) or REDIS_URL",
            file=sys.stderr,
        )
        return 2
    try:
        return asyncio.run(_export(settings, since, until, export=args.since is not None))
    except Exception as exc:
        print(f"python -m bot audit: {redact(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return 1


async def _export(settings: Settings, since: float, until: float | None, *, export: bool) -> int:
    """Read the trail, then check its hash chain: an export writes nothing to the store and
    starts no heartbeat or sweep, so an export while the bot is down neither passes for a live
    process nor sweeps its questions."""
    from bot.app.storage import durable_store

    async with durable_store(settings).reading() as trail:
        if export:
            async for event in trail.audit(since, until):
                sys.stdout.write(f"{event.dump()}\n")
            sys.stdout.flush()
        found = await trail.check_chain(time.time() - settings.retention_days * 86400)
    if found is None:
        print("python -m bot audit: this store keeps no hash chain to verify", file=sys.stderr)
        return 0 if export else 2
    if found.unchained:
        runs = ", ".join(f"{count} {where}" for count, where in found.unchained)
        total = sum(count for count, _ in found.unchained)
        print(
            f"python -m bot audit: {total} events not chained (written by an earlier release,"
            f" or before the chain): {runs}",
            file=sys.stderr,
        )
    for problem in found.breaks:
        print(f"python -m bot audit: TAMPERED: {problem}", file=sys.stderr)
    if not found.breaks and not export:
        print("python -m bot audit: the trail's hash chain is intact", file=sys.stderr)
    return 1 if found.breaks else 0


if __name__ == "__main__":
    sys.exit(main())
