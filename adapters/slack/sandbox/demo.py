"""The sandbox's demo agent: asks what a coding agent asks, and keeps the answers it got.

One run asks, in sequence, through the seam's ``service.ask`` (so the whole stack runs:
validation, the Slack provider, the sandbox's Web API, the page's clicks):

1. a plan review (intent ``plan-review``: Approve / Keep planning, the plan as markdown);
2. a multi-select question (checkboxes, "Other…" free text, Submit);
3. a free-text question (no options: an "Answer…" button opening a modal);
4. then, given an ``approvals`` asker (the Slack provider: ``connect_bot`` passes it), a tool
   approval through ``ask_approval`` (bash runs the release script: Allow once, behind a
   confirm, or Reject), as a harness asks one. Anyone who may answer questions may decide:
   the demo names no approvers. Without that asker the run has the three questions only.

Each step records the answer in the seam's wire JSON (an approval: its ``decision``,
``allowed-once`` or ``rejected``), or the error's ``code`` and ``message`` (a dismissed
question gives ``ASK_CANCELLED``, a shutdown ``ASK_ABORTED``); a failed step does not stop
the run. ``snapshot()`` is what the page's "Demo agent" panel shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from adapters.slack.asks.status import QuestionStatus
from adapters.slack.model.record import ApprovalView
from bot.questions.errors import HarnessError
from bot.questions.models import (
    AskOptions,
    AskUserQuestionAnswer,
    AskUserQuestionItem,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    PlanReviewIntent,
)

__all__ = [
    "DEMO_APPROVAL",
    "DEMO_LABEL",
    "ApprovalAsker",
    "Asker",
    "DemoAgent",
    "DemoRun",
    "DemoStep",
    "demo_questions",
]

DEMO_LABEL: Final = "demo agent"
"""Shown on the demo's messages as "Asked by demo agent"."""
_DEMO_OPTIONS: Final = AskOptions(label=DEMO_LABEL)
DEMO_APPROVAL: Final = ApprovalView(
    tool_name="bash", headline="run the release script", command="./scripts/release.sh --tag v2.3.1"
)
"""The tool approval of the demo's fourth step."""
APPROVAL_STEP: Final = ("approval", "Tool approval")
"""The approval step's id and title."""
MAX_RUNS: Final = 10
"""Runs kept for the panel (the oldest finished ones are dropped)."""

StepState = Literal["pending", "waiting", "answered", "failed"]

_PLAN: Final = """\
## Add a retry to the nightly export

1. Wrap the upload in **exponential backoff** (3 tries, 2 s → 8 s).
2. Log each retry with the `export_id` and the HTTP status.
3. Alert the on-call channel only after the last try fails.

Risks:
- A retried upload may arrive *twice*; the receiver already de-duplicates by `export_id`.
- Tests: unit tests for the backoff, one end-to-end run against the staging bucket.
"""

logger = logging.getLogger("adapters.slack.sandbox")


class Asker(Protocol):
    """What the demo needs of the seam: ``UserQuestionService.ask``."""

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Ask and return the answer (or raise a ``UserQuestionError``)."""
        ...


class ApprovalAsker(Protocol):
    """What the demo needs to ask a tool approval: ``SlackQuestionProvider.ask_approval``."""

    async def ask_approval(self, approval: ApprovalView, *, options: AskOptions) -> QuestionStatus:
        """Post the approval and return the request as it ended."""
        ...


def demo_questions() -> list[tuple[str, AskUserQuestionItem]]:
    """The demo's three questions, with a title for each step."""
    plan = AskUserQuestionItem(
        id="plan",
        header="Plan review",
        question="May I go ahead with this plan?",
        detail=_PLAN,
        options=[
            AskUserQuestionOption(label="Approve", description="Start implementing it now."),
            AskUserQuestionOption(label="Keep planning", description="Refine the plan first."),
        ],
        intent=PlanReviewIntent(kind="plan-review", approve="Approve"),
    )
    checks = AskUserQuestionItem(
        id="checks",
        header="Release checks",
        question="Which checks should run before the release?",
        options=[
            AskUserQuestionOption(label="Unit tests"),
            AskUserQuestionOption(label="Browser tests", description="Headless Chromium"),
            AskUserQuestionOption(label="Type check"),
            AskUserQuestionOption(label="Lint"),
        ],
        multi_select=True,
    )
    name = AskUserQuestionItem(
        id="name",
        question="What should the release be called?",
        detail="Any short name; it goes into the changelog.",
    )
    return [("Plan review", plan), ("Multi-select question", checks), ("Free-text question", name)]


@dataclass(slots=True)
class DemoStep:
    """One question (or tool approval) of a run and what came back."""

    title: str
    question: AskUserQuestionItem | ApprovalView
    state: StepState = "pending"
    answer: dict[str, Any] | None = None
    decision: Literal["allowed-once", "rejected"] | None = None
    error: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON for the page."""
        asked = self.question
        if isinstance(asked, ApprovalView):
            shown = {
                "id": APPROVAL_STEP[0],
                "kind": "approval",
                "question": f"{asked.tool_name}: {asked.headline}",
                "command": asked.command,
                "decision": self.decision,
            }
        else:
            shown = {"id": asked.id, "kind": "question", "question": asked.question}
        return {
            **shown,
            "title": self.title,
            "state": self.state,
            "answer": self.answer,
            "error": self.error,
        }


@dataclass(slots=True)
class DemoRun:
    """One run of the demo agent: its steps, in order."""

    number: int
    steps: list[DemoStep]
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    @property
    def running(self) -> bool:
        """Whether the run still waits on a step."""
        return self.finished_at is None

    def to_dict(self) -> dict[str, Any]:
        """JSON for the page."""
        return {
            "number": self.number,
            "running": self.running,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "steps": [step.to_dict() for step in self.steps],
        }


class DemoAgent:
    """A sample agent asking through ``asker`` (and ``approvals``, for its tool approval);
    ``on_change`` hears every step change."""

    def __init__(
        self,
        asker: Asker,
        *,
        approvals: ApprovalAsker | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._asker = asker
        self._approvals = approvals
        self._on_change = on_change
        self.runs: list[DemoRun] = []
        self._tasks: dict[int, asyncio.Task[DemoRun]] = {}
        self._count = 0
        self._closed = False

    def start(self) -> DemoRun:
        """Start a run in the background; returns it at once."""
        if self._closed:
            raise RuntimeError("the demo agent is closed")
        self._count += 1
        steps = [DemoStep(title, q) for title, q in demo_questions()]
        if self._approvals is not None:
            steps.append(DemoStep(APPROVAL_STEP[1], DEMO_APPROVAL))
        run = DemoRun(self._count, steps)
        self.runs.append(run)
        finished = [r for r in self.runs if not r.running]
        while len(self.runs) > MAX_RUNS and finished:
            self.runs.remove(finished.pop(0))
        task = asyncio.create_task(self._run(run), name=f"demo run {run.number}")
        self._tasks[run.number] = task
        task.add_done_callback(lambda _: self._tasks.pop(run.number, None))
        self._changed()
        return run

    async def run(self) -> DemoRun:
        """Start a run and wait for it to finish."""
        run = self.start()
        task = self._tasks.get(run.number)
        if task is not None:
            await task
        return run

    def snapshot(self) -> dict[str, Any]:
        """The runs, newest first, as JSON for the page."""
        return {
            "running": any(run.running for run in self.runs),
            "runs": [run.to_dict() for run in reversed(self.runs)],
        }

    async def aclose(self) -> None:
        """Cancel the runs still going and wait for them."""
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, run: DemoRun) -> DemoRun:
        try:
            for step in run.steps:
                await self._ask(step)
        finally:
            run.finished_at = time.time()
            for step in run.steps:
                if step.state in ("pending", "waiting"):
                    step.state = "failed"
                    step.error = {"code": "CANCELLED", "message": "the demo was stopped"}
            self._changed()
        return run

    async def _ask(self, step: DemoStep) -> None:
        step.state = "waiting"
        self._changed()
        try:
            if isinstance(step.question, ApprovalView):
                await self._approve(step, step.question)
            else:
                request = AskUserQuestionRequest(questions=[step.question], options=_DEMO_OPTIONS)
                step.answer = (await self._asker.ask(request)).to_wire()
        except HarnessError as exc:
            step.state = "failed"
            step.error = {"code": exc.code, "message": exc.message}
        except Exception as exc:  # shown in the panel: the demo keeps going
            logger.warning("demo question failed", extra={"error": repr(exc)})
            step.state = "failed"
            step.error = {"code": type(exc).__name__, "message": str(exc)}
        else:
            step.state = "answered"
        self._changed()

    async def _approve(self, step: DemoStep, approval: ApprovalView) -> None:
        """Ask the tool approval; an ending without a decision raises its error."""
        assert self._approvals is not None
        ended = await self._approvals.ask_approval(approval, options=_DEMO_OPTIONS)
        if ended.decision is None:
            raise ended.error or RuntimeError(f"the approval ended {ended.state}")
        step.decision = ended.decision

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()
