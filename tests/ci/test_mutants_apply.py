"""Every hand-made mutant still names one line of the code and tests that exist: a mutant whose
line moved or changed stops the mutation run, and the scores in docs/testing.md go stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ci.mutants import AREAS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("area", sorted(AREAS))
def test_each_mutant_names_one_line_and_its_tests_exist(area: str) -> None:
    tests, mutants = AREAS[area]
    missing = [t for t in tests if not (ROOT / t.split("::")[0]).exists()]
    assert not missing, f"{area}: no such test file {missing}"
    stale = []
    for mutant in mutants:
        count = (ROOT / mutant.file).read_text().count(mutant.old)
        if count != 1:
            stale.append(f"{mutant.name} ({mutant.file}: {count} places)")
    assert not stale, f"{area}: mutants no longer naming one line: {stale}"
