"""The hand-made mutants of the weak areas of issue 41: one wrong line each, and the tests
that must notice it (run by ``tests/ci/mutate.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """One line made wrong: ``old`` (occurring once in ``file``) becomes ``new``."""

    name: str
    file: str
    old: str
    new: str
    equivalent: str = ""
    """Why no test can tell it from the real code, when it cannot."""


SCHEDULER = "adapters/slack/pacing/scheduler.py"
LANES = "adapters/slack/pacing/lanes.py"
_SCHEDULER_TESTS = [
    "tests/slack/pacing/test_scheduler_rules.py",
    "tests/slack/pacing/test_slack_scheduler.py",
    "tests/slack/pacing/test_ratelimit_holds.py",
    "tests/slack/pacing/test_lanes_fidelity.py",
]
_SCHEDULER = [
    Mutant(
        "429 re-queued last", SCHEDULER, "state.enqueue(entry, first=True)", "state.enqueue(entry)"
    ),
    Mutant(
        "lane head not kept",
        LANES,
        "            queued.appendleft(entry)",
        "            queued.append(entry)",
    ),
    Mutant(
        "cancel one cancels all",
        SCHEDULER,
        "if entry.waiters == 0 and state.remove(entry)",
        "if state.remove(entry)",
    ),
    Mutant("coalesced waiter not counted", SCHEDULER, "entry.waiters += 1", "entry.waiters = 1"),
    Mutant("coalescing keeps old send", SCHEDULER, "entry.send = send\n", "pass\n"),
    Mutant("no coalescing", SCHEDULER, "if key is not None and queued:", "if False:"),
    Mutant(
        "429 fails the call", SCHEDULER, "if retry_after is None or entry.waiters == 0:", "if True:"
    ),
    Mutant(
        "real error retried",
        SCHEDULER,
        "if retry_after is None or entry.waiters == 0:",
        "if entry.waiters == 0:",
    ),
    Mutant(
        "updates not serial",
        LANES,
        "        if entry.serial:\n            self.busy.add(lane)",
        "        if False:\n            self.busy.add(lane)",
    ),
    Mutant("busy lane never freed", SCHEDULER, "state.busy.discard(entry.lane)", "pass"),
    Mutant(
        "retry-after default",
        SCHEDULER,
        "_DEFAULT_RETRY_AFTER: Final = 1.0",
        "_DEFAULT_RETRY_AFTER: Final = 2.0",
    ),
    Mutant("negative retry-after", SCHEDULER, "return max(0.0, float(raw))", "return float(raw)"),
    Mutant(
        "rate_limited default",
        SCHEDULER,
        "default = RATE_LIMITED_RETRY_AFTER",
        "default = _DEFAULT_RETRY_AFTER",
    ),
    Mutant(
        "rate_limited ignored",
        SCHEDULER,
        "elif _error_of(exc.response) == RATE_LIMITED:",
        "elif False:",
    ),
    Mutant("withdraw every tag", SCHEDULER, "if entry.tag == tag]", "]"),
    Mutant(
        "untag forgotten", LANES, "            self.tags[entry.tag] -= 1\n", "            pass\n"
    ),
    Mutant(
        "turns not rotated",
        LANES,
        "            self.turns.append(lane)\n            return lane",
        "            self.turns.appendleft(lane)\n            return lane",
    ),
    Mutant(
        "429 holds method not lane",
        SCHEDULER,
        "            await self._budget.hold(buckets[-1], seconds)",
        "            await self._budget.hold(buckets[0], seconds)",
    ),
    Mutant(
        "second lane 429 holds lane",
        SCHEDULER,
        "        if any(other != lane for other in held):",
        "        if False:",
    ),
]

AREAS: dict[str, tuple[list[str], list[Mutant]]] = {
    "scheduler": (_SCHEDULER_TESTS, _SCHEDULER),
}
