"""The size rule: no module over 400 lines, no class over 250, in bot/ and adapters/ outside
the sandbox; prints each offender and the total lines, exits 1 if there is an offender."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LIMIT = 400
CLASS_LIMIT = 250
PACKAGES = ("bot", "adapters")
SANDBOX = Path("adapters", "slack", "sandbox")


def modules(root: Path) -> list[Path]:
    """The Python files the rule covers, below ``root``."""
    found = [path for package in PACKAGES for path in (root / package).rglob("*.py")]
    return sorted(path for path in found if SANDBOX not in path.relative_to(root).parents)


def offences(path: Path, name: str) -> list[str]:
    """One line per limit ``path`` breaks, naming it as ``name``."""
    text = path.read_text("utf-8")
    lines = len(text.splitlines())
    found = [f"{name}: {lines} lines (> {MODULE_LIMIT})"] if lines > MODULE_LIMIT else []
    for node in ast.walk(ast.parse(text, filename=name)):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > CLASS_LIMIT:
                found.append(f"{name}:{node.lineno}: class {node.name} {size} lines")
    return found


def main(root: Path) -> int:
    """Print the offenders and the total; 1 when any module or class is too large."""
    files = modules(root)
    found = [line for path in files for line in offences(path, path.relative_to(root).as_posix())]
    total = sum(len(path.read_text("utf-8").splitlines()) for path in files)
    for line in found:
        print(line)
    print(f"sizes: {total} lines in {len(files)} modules of bot/ + adapters/ outside the sandbox")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
