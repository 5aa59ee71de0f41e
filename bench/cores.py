"""Which cores the bot and its stand-ins run on during a benchmark.

The benchmarks run the bot in this process and, beside it, the stand-ins of what is not the
bot: the Slack Web API stand-in (Slack's servers) and the load generator (Slack's
clients), each a subprocess (``common.spawn``). On a small machine they compete with the
bot for the same cores: while a click is served, the stand-in may be rendering the
previous click's ``chat.update`` on the core the bot needs, work that Slack does on its own
machines in production. ``split`` (the default when two or more cores are usable) keeps
this process on one core and every spawned subprocess on the others, so the figures are
the bot's own; ``shared`` leaves the placing to the OS, as the benchmarks ran until
2026-12-05. Servers the benchmarks do not start (Redis) are never moved.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["HOW", "Placement", "add_option", "place", "placement"]

HOW: Final = ("split", "shared")


@dataclass(frozen=True)
class Placement:
    """The cores this process (the bot) and the spawned stand-ins run on."""

    how: Literal["split", "shared"]
    usable: frozenset[int]
    bot: frozenset[int]
    helpers: frozenset[int]
    why: str = ""

    def describe(self) -> str:
        """One line for the figures' footer."""
        if self.how == "split":
            return (
                f"cores: the bot on {_cores(self.bot)}, the stand-ins and load generator on "
                f"{_cores(self.helpers)}"
            )
        return f"cores: shared by the bot, the stand-ins and load generator{self.why}"

    def adopt(self, pid: int) -> None:
        """Put the subprocess ``pid`` (a stand-in or load generator) on the helpers' cores."""
        if self.how == "split":
            os.sched_setaffinity(pid, self.helpers)


def _cores(cores: frozenset[int]) -> str:
    listed = ", ".join(str(c) for c in sorted(cores))
    return f"core {listed}" if len(cores) == 1 else f"cores {listed}"


def _usable() -> frozenset[int]:
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))


_placement: Placement | None = None


def placement() -> Placement:
    """How this process was placed (``shared`` until ``place`` is called)."""
    if _placement is not None:
        return _placement
    usable = _usable()
    return Placement("shared", usable, usable, usable)


def place(how: str) -> Placement:
    """Place this process, and the subprocesses spawned from now on, as ``how`` says.

    ``split`` needs two usable cores and a system that can pin processes; without them it
    falls back to ``shared`` and says why in ``describe()``.
    """
    global _placement
    if how not in HOW:
        raise ValueError(f"--cores must be one of {', '.join(HOW)}, not {how!r}")
    current = placement()
    usable = current.usable
    if how == "shared":
        if current.how == "split":
            os.sched_setaffinity(0, usable)
        _placement = Placement("shared", usable, usable, usable)
        return _placement
    if not hasattr(os, "sched_setaffinity"):
        _placement = Placement(
            "shared", usable, usable, usable, " (split asked; this system cannot pin)"
        )
        return _placement
    if len(usable) < 2:
        _placement = Placement(
            "shared", usable, usable, usable, " (split asked; only one core is usable)"
        )
        return _placement
    first = min(usable)
    bot, helpers = frozenset({first}), usable - {first}
    os.sched_setaffinity(0, bot)
    _placement = Placement("split", usable, bot, helpers)
    return _placement


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--cores split|shared`` on a benchmark's command line."""
    parser.add_argument(
        "--cores",
        choices=HOW,
        default="split",
        help="split: the bot on one core, its stand-ins (Slack's Web API, the load "
        "generator) on the others; shared: all on every core, as the OS places them",
    )
