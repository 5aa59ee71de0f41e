"""A host's request being asked in Slack (``HostAsk``): its key and label, and the notes its
message shows on the way (delivery, settled elsewhere, gone, reopened, restarting)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final, Literal

from adapters.dsh.mux import ApprovalRequested
from adapters.dsh.session_log import ToolCall
from adapters.slack import key_request_id
from bot.questions.abort import AbortController
from bot.questions.models import AskUserQuestionItem

ANSWERED_ELSEWHERE: Final = "Answered in another client."
CANCELLED_IN_HARNESS: Final = (
    "Cancelled in the harness (the agent's turn ended or the question was dismissed elsewhere)."
)
SETTLED_ELSEWHERE: Final = (
    "The harness had already settled this question elsewhere; this answer was not used."
)
GONE_NOTE: Final = (
    "The harness no longer has this question: it ended (or the harness restarted) while the "
    "bot was disconnected."
)
APPROVAL_GONE_NOTE: Final = GONE_NOTE.replace("question", "approval")
NOT_DELIVERED_NOTE: Final = (
    "The harness could not be reached to take this response; it is sent again if the harness "
    "asks again."
)
RETRYING_NOTE: Final = (
    "The harness could not be reached to take this response; the bot keeps sending it while "
    "it is connected to the harness."
)
DELIVERED_NOTE: Final = "The harness took this response once it could be reached again."
UNCONFIRMED_NOTE: Final = (
    "Sent to the harness; its session log does not show this response yet, so it is not "
    "counted as delivered."
)
DECLINED_NOTE: Final = (
    "The bot could not handle this request and declined it in the harness; answer in the "
    "harness if it asks again."
)
REOPENED_NOTE: Final = "The harness is still waiting for an answer to this question."
RESTARTING_NOTE: Final = (
    "The bot is restarting; the harness keeps waiting, and this message takes answers again "
    "once the bot is back."
)

_RESOLVED_APPROVAL: Final = {
    "allowed-once": "Allowed in another client.",
    "rejected": "Rejected in another client.",
}
"""What an approval's message says when the host settled it without this bot (else it was
cancelled in the harness)."""

_Phase = Literal["asking", "responding"]


def ask_key(rpc_id: str) -> str:
    """The provider's idempotency key for the host request with this rpcId."""
    return f"dsh:{rpc_id}"


def session_label(session_id: str) -> str:
    """Who is asking, as Slack shows it: ``session 3f2a9c1e`` (the uuid's first 8 characters)."""
    short = session_id.removeprefix("session-").strip() or session_id
    return f"session {short[:8]}"


@dataclass(eq=False)
class HostAsk:
    """One request of the host (a question or an approval) being asked in Slack."""

    rpc_id: str
    session_id: str
    questions: list[AskUserQuestionItem] = field(default_factory=list)
    controller: AbortController = field(default_factory=AbortController)
    phase: _Phase = "asking"
    resolved: str | None = None
    task: asyncio.Task[None] | None = None
    reopen: bool = False
    approval: ApprovalRequested | None = None
    call: ToolCall | None = None
    revises: str | None = None
    """The declined plan review this one revises."""
    sent: bool = False
    """A response to the host went out (it may have been taken): never declined after."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set with ``resolved``: the host withdrew this request (``cancel``)."""

    def resolve(self, outcome: str) -> None:
        """The host settled this request with ``outcome`` (its log's, at its ``cancel``): one
        still asking in Slack ends saying so (one answered here hears its own answer's echo)."""
        self.resolved = outcome
        self.settled.set()
        if self.phase != "asking":
            return
        if self.approval is not None:
            note = _RESOLVED_APPROVAL.get(outcome, "Cancelled in the harness.")
        else:
            note = ANSWERED_ELSEWHERE if outcome == "answered" else CANCELLED_IN_HARNESS
        self.controller.abort(note)

    @property
    def open(self) -> bool:
        """Still asking in Slack, and not ending already."""
        return self.phase == "asking" and not self.controller.signal.aborted

    @property
    def request_id(self) -> str:
        """The provider's request id for this host request."""
        return key_request_id(ask_key(self.rpc_id))
