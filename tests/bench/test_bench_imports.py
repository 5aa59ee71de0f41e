"""Every name the benchmarks import from the project exists, including the imports inside
functions (a benchmark row run only on request would otherwise break unseen by a refactor)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.source_tree import parse

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("adapters", "bot", "bench")


def _imports() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PROJECT:
                found += [(path.name, str(node.module), alias.name) for alias in node.names]
    return found


@pytest.mark.timeout(60)
def test_every_project_name_a_benchmark_imports_exists() -> None:
    imports = _imports()
    assert len(imports) > 50  # the scan sees the benchmarks' imports
    missing = []
    for where, module, name in imports:
        imported = importlib.import_module(module)
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{where}: from {module} import {name}")
    assert missing == []
