"""Hand-made mutants, one line wrong at a time, run against an area's tests (issue 41).

``python -m tests.ci.mutate [area ...]`` copies the tree to a temporary folder once, then
for each mutant (those whose name holds ``$MUTANT``) rewrites one line, runs the area's
tests (``-x``, a timeout) and puts it back.
A mutant is caught when the tests fail. The mutants live in ``tests/ci/mutants.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.ci.mutants import AREAS, Mutant

ROOT = Path(__file__).resolve().parents[2]


def run_area(area: str, tree: Path) -> tuple[int, int, list[Mutant]]:
    """Caught, non-equivalent total and the survivors of one area."""
    tests, mutants = AREAS[area]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    survivors: list[Mutant] = []
    counted = caught = 0
    only = os.environ.get("MUTANT", "")
    for mutant in (m for m in mutants if only in m.name):
        path = tree / mutant.file
        original = path.read_text()
        if original.count(mutant.old) != 1:
            raise SystemExit(f"{mutant.name}: {mutant.old!r} occurs {original.count(mutant.old)}x")
        path.write_text(original.replace(mutant.old, mutant.new))
        started = time.monotonic()
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-x",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-m",
                    "not slow and not browser",
                    "--timeout",
                    "60",
                    *tests,
                ],
                cwd=tree,
                env=env,
                capture_output=True,
                timeout=300,
                check=False,
            )
            killed = done.returncode != 0
        except subprocess.TimeoutExpired:
            killed = True
        finally:
            path.write_text(original)
        if mutant.equivalent:
            print(f"  equivalent {mutant.name}: {mutant.equivalent}")
            continue
        counted += 1
        caught += killed
        if not killed:
            survivors.append(mutant)
        seconds = time.monotonic() - started
        print(f"  {'caught ' if killed else 'SURVIVED'} {mutant.name} ({seconds:.1f} s)")
    return caught, counted, survivors


def main(areas: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="mutants-") as temp:
        tree = Path(temp)
        for part in ("adapters", "bot", "tests", "pyproject.toml", "conftest.py"):
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(source, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
            elif source.exists():
                shutil.copy(source, tree / part)
        missed = 0
        for area in areas or list(AREAS):
            print(area)
            caught, counted, survivors = run_area(area, tree)
            missed += len(survivors)
            print(f"{area}: {caught} / {counted} caught")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
