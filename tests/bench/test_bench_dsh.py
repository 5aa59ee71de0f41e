"""``bench.dsh`` runs end to end against the real host and prints its five figures."""

from __future__ import annotations

import re
import sys

import pytest

from tests.bot_process import ROOT, clean_environment, run_command
from tests.dsh_real import dsh_command

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_the_dsh_bench_prints_every_figure() -> None:
    if dsh_command() is None:
        pytest.skip("dsh is not installed")
    argv = [sys.executable, "-m", "bench.dsh", "--n", "2", "--drops", "1", "--down", "0.3"]
    code, out, err = await run_command(argv, clean_environment(), cwd=ROOT, within=200)
    assert code == 0, err[-2000:]
    figures = {
        "host frame → Slack post": 2,
        "click → answer in the host's log": 2,
        "reconnect once the host is back (0.3 s away)": 1,
        "frame → post of a question asked as it came back": 1,
        "floor: a client answers itself → host's log": 2,
    }
    for name, n in figures.items():
        row = re.search(rf"^{re.escape(name)}\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s", out, re.M)
        assert row is not None, out
        assert int(row[1]) == n and 0 < float(row[2]) <= float(row[3])
