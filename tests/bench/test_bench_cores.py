"""``bench.cores``: with ``--cores split`` the benchmark's own process (the bot) runs on one
core and every subprocess it spawns (the Slack stand-in, the load generator) on the others,
so the stand-ins' work is not counted as the bot's; ``shared`` leaves the OS to place them.

Each case runs in a fresh interpreter: pinning the test process would pin the rest of the
test run with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from bench import cores
from bench.common import ROOT

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="this system cannot pin processes"
)

SCRIPT = """
import asyncio, json, os, sys
from bench import common, cores

{before}
placed = cores.place({how!r})

async def child_cores():
    child = await common.spawn(
        "-c", "import os, sys; sys.stdin.read(); print(sorted(os.sched_getaffinity(0)))"
    )
    out, _ = await child.communicate(b"")
    return json.loads(out)

print(json.dumps({{
    "this": sorted(os.sched_getaffinity(0)),
    "child": asyncio.run(child_cores()),
    "line": common.machine_line("memory"),
}}))
"""


def run(how: str, before: str = "") -> dict[str, object]:
    code = textwrap.dedent(SCRIPT.format(how=how, before=before))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


USABLE = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
two_cores = pytest.mark.skipif(len(USABLE) < 2, reason="splitting needs two usable cores")


@pytest.mark.slow
@two_cores
def test_split_puts_the_bot_on_one_core_and_what_it_spawns_on_the_others() -> None:
    placed = run("split")
    assert placed["this"] == USABLE[:1]
    assert placed["child"] == USABLE[1:]
    line = str(placed["line"])
    assert f"{len(USABLE)} cores usable" in line  # the machine's cores, not the bot's one
    assert f"the bot on core {USABLE[0]}" in line
    assert "the stand-ins and load generator on core" in line


@pytest.mark.slow
def test_shared_leaves_every_process_on_every_usable_core() -> None:
    placed = run("shared")
    assert placed["this"] == USABLE
    assert placed["child"] == USABLE
    assert "cores: shared by the bot, the stand-ins and load generator)" in str(placed["line"])


@pytest.mark.slow
@two_cores
def test_split_on_one_usable_core_falls_back_to_shared_and_says_why() -> None:
    only = USABLE[-1]
    placed = run("split", before=f"os.sched_setaffinity(0, {{{only}}})")
    assert placed["this"] == [only]
    assert placed["child"] == [only]
    assert "shared by the bot, the stand-ins and load generator (split asked; only one core" in (
        str(placed["line"])
    )


def test_an_unknown_placement_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"--cores must be one of split, shared, not 'both'"):
        cores.place("both")


def test_the_benchmarks_take_the_option_and_split_by_default() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    cores.add_option(parser)
    assert parser.parse_args([]).cores == "split"
    assert parser.parse_args(["--cores", "shared"]).cores == "shared"
    with pytest.raises(SystemExit):
        parser.parse_args(["--cores", "both"])
