"""``ast.parse`` for tests that read the project's own source, with the collector paused.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state: a
collection mid-parse runs finalizers, another thread's parse can run meanwhile, and the
parse fails with "AST constructor recursion depth mismatch" (CPython gh-106905). Seen once
in a full run; with no collection during the parse, there is no switch to another thread.
"""

from __future__ import annotations

import ast
import gc


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, no garbage collection while it runs."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if enabled:
            gc.enable()
