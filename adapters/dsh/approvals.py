"""Tool-permission approvals on the dsh wire (``approval/requested``): pure, no I/O.

The command is in the ``tool/call`` event sent just before (``events``); a client answers
``allowed-once`` or ``rejected`` (no dismissal) under the frame's rpcId."""

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
