"""Pure: what changed between two versions of a plan, line by line."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["PlanDiff", "plan_diff"]


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """The changed lines of a plan and how many stayed the same."""

    lines: tuple[str, ...]
    """``+ line`` / ``- line`` in plan order, with ``… N unchanged lines`` between runs."""
    added: int
    removed: int
    unchanged: int

    @property
    def text(self) -> str:
        """The diff as plain text, one line each."""
        return "\n".join(self.lines)

    @property
    def summary(self) -> str:
        """``+A −R, unchanged: N lines``."""
        return f"+{self.added} −{self.removed}, unchanged: {self.unchanged} lines"


def plan_diff(old: str, new: str) -> PlanDiff:
    """The line diff from ``old`` to ``new``."""
    before, after = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    lines: list[str] = []
    added = removed = unchanged = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            unchanged += i2 - i1
            lines.append(f"… {i2 - i1} unchanged line{'s' if i2 - i1 != 1 else ''}")
            continue
        lines.extend(f"- {line}" for line in before[i1:i2])
        lines.extend(f"+ {line}" for line in after[j1:j2])
        removed += i2 - i1
        added += j2 - j1
    return PlanDiff(tuple(lines), added, removed, unchanged)
