"""Tool-permission approvals on the dsh wire: pure, no I/O.

A tool that wants wider sandbox rights than its session has makes the host push::

    {"type": "server-request", "rpcId": "…", "method": "approval/requested",
     "payload": {"type": "approval/requested", "sessionId": "session-…", "approvalId": "…",
                 "toolName": "bash", "callId": "mock-call-1", "reason": "escalate sandbox …"}}

It carries no command: that is in the ``tool/call`` session event sent just before it (see
``events``). A client answers with ``approval_response`` (``allowed-once`` or ``rejected``;
there is no dismissal) under the frame's rpcId; the host then pushes ``approval/resolved``
to every client (outcome ``allowed-once``, ``rejected`` or ``cancelled``).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import Field

from adapters.dsh.wire import Lenient

__all__ = [
    "APPROVAL_METHODS",
    "APPROVAL_REQUESTED",
    "APPROVAL_RESOLVED",
    "ApprovalOutcome",
    "ApprovalRequested",
    "ApprovalResolved",
    "ResolvedOutcome",
    "approval_headline",
    "approval_response",
]

APPROVAL_REQUESTED: Final = "approval/requested"
APPROVAL_RESOLVED: Final = "approval/resolved"
APPROVAL_METHODS: Final = frozenset({APPROVAL_REQUESTED, APPROVAL_RESOLVED})

ApprovalOutcome: TypeAlias = Literal["allowed-once", "rejected"]
"""What a client may answer."""
ResolvedOutcome: TypeAlias = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
"""How an approval ended, as ``approval/resolved`` says."""


class ApprovalRequested(Lenient):
    """Payload of ``approval/requested``: a tool waits for permission (answer with the rpcId)."""

    type: Literal["approval/requested"]
    session_id: str
    approval_id: Annotated[str, Field(min_length=1)]
    tool_name: str
    call_id: str | None = None
    reason: str | None = None


class ApprovalResolved(Lenient):
    """Payload of ``approval/resolved``: approval ``approval_id`` is over."""

    type: Literal["approval/resolved"]
    session_id: str
    approval_id: str
    outcome: ResolvedOutcome


def approval_headline(payload: ApprovalRequested) -> str:
    """The panel's headline: the reason, or "Tool {toolName} requests privileged execution"."""
    reason = (payload.reason or "").strip()
    return reason or f"Tool {payload.tool_name} requests privileged execution"


def approval_response(
    rpc_id: str, session_id: str, approval_id: str, outcome: ApprovalOutcome
) -> dict[str, Any]:
    """The ok ``ClientResponse`` answering approval ``approval_id``."""
    return {
        "type": "client-response",
        "rpcId": rpc_id,
        "result": {
            "ok": True,
            "value": {"sessionId": session_id, "approvalId": approval_id, "outcome": outcome},
        },
    }
