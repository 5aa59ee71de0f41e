"""The frames captured from a real dsh web host, read where they stand beside the repository.

They live in ``../shared/reference/dsh-captured/`` next to the checkout (read-only, never
copied into the project). A worktree sits deeper than the main checkout, so every ancestor
of the repository is tried; tests skip with the reason when none holds them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CAPTURES", "captured_frames", "captured_lines", "require_captures"]

ROOT = Path(__file__).resolve().parents[1]


def _find() -> Path | None:
    for parent in ROOT.parents:
        candidate = parent / "shared" / "reference" / "dsh-captured"
        if candidate.is_dir():
            return candidate
    return None


CAPTURES = _find()


def require_captures() -> Path:
    """The captures' folder, or skip the test saying where they were looked for."""
    if CAPTURES is None or not any(CAPTURES.glob("*.jsonl")):
        pytest.skip(
            "the captured host frames (shared/reference/dsh-captured/*.jsonl) are not beside "
            f"this checkout ({ROOT}) or any folder above it"
        )
    return CAPTURES


def captured_lines(name: str | None = None) -> list[tuple[str, int, dict[str, Any]]]:
    """``(file, line number, record)`` for every line of one capture (or all of them)."""
    folder = require_captures()
    files = [folder / name] if name else sorted(folder.glob("*.jsonl"))
    lines = []
    for path in files:
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if line.strip():
                lines.append((path.name, number, json.loads(line)))
    return lines


def captured_frames(name: str) -> list[dict[str, Any]]:
    """The frames of one capture, in order (connection records left out)."""
    return [record["frame"] for _, _, record in captured_lines(name) if "frame" in record]
