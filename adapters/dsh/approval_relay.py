"""One tool-permission approval of the host, decided in Slack (dsh-approvals.md); it stays
open until someone decides, the host withdraws it, or the host restarts."""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from adapters.dsh.asks import (
    REOPENED_NOTE,
    HostAsk,
    HostRunner,
    QuestionNotes,
    ask_key,
    session_label,
)
from adapters.dsh.protocol import approval_headline, approval_response
from adapters.dsh.uplink import HostUplink
from adapters.slack import ApprovalView, QuestionStatus
from bot.questions.abort import AbortSignal
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions

__all__ = [
    "APPROVAL_NOT_REOPENED",
    "APPROVAL_REFUSED",
    "APPROVAL_SETTLED_ELSEWHERE",
    "COMMAND_UNREAD_NOTE",
    "ApprovalDesk",
    "ApprovalRunner",
    "resolved_note",
]

APPROVAL_SETTLED_ELSEWHERE: Final = (
    "The harness had already settled this approval elsewhere; this decision was not used."
)
APPROVAL_REFUSED: Final = "The harness refused that decision (bad-response). Please decide again."
APPROVAL_NOT_REOPENED: Final = (
    "The harness refused that decision (bad-response). This message could not be reopened; "
    "decide in the harness instead."
)
COMMAND_UNREAD_NOTE: Final = (
    "The bot could not read what this tool will run: check it in the harness before allowing it."
)
_MAX_REOPENS: Final = 5


def resolved_note(outcome: str) -> str:
    """What an approval's message says when the host settled it without this bot."""
    return {
        "allowed-once": "Allowed in another client.",
        "rejected": "Rejected in another client.",
    }.get(outcome, "Cancelled in the harness.")


class ApprovalDesk(QuestionNotes, Protocol):
    """What the relay needs of the Slack provider for approvals."""

    async def ask_approval(
        self,
        approval: ApprovalView,
        *,
        options: AskOptions,
        approvers: Sequence[str] | None = None,
        approver_groups: Sequence[str] | None = None,
        signal: AbortSignal | None = None,
    ) -> QuestionStatus:
        """Post an approval and wait until it ends (``decision`` set when decided)."""
        ...


class ApprovalRunner(HostRunner):
    """Asks one host approval in Slack and sends the decision back."""

    what = "tool approval"
    done = "rejected it in the harness"

    def __init__(
        self,
        desk: ApprovalDesk,
        uplink: HostUplink,
        *,
        approvers: Sequence[str] | None,
        approver_groups: Sequence[str] | None,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
    ) -> None:
        super().__init__(desk, uplink, on_posted=on_posted, logger=logger)
        self._desk = desk
        self._approvers = list(approvers) if approvers else None
        self._groups = list(approver_groups) if approver_groups else None

    def _declined(self, ask: HostAsk) -> dict[str, Any]:
        assert ask.approval is not None
        return approval_response(ask.rpc_id, ask.session_id, ask.approval.approval_id, "rejected")

    async def _serve(self, ask: HostAsk) -> None:
        """The approval's run: after a refused decision only one made after the message reopened
        is sent (resending the refused one would be a decision nobody made)."""
        payload = ask.approval
        assert payload is not None
        # A replay after a reconnect: the tool/call event is not sent again.
        call = ask.call if ask.call_known else await self._uplink.call_of(payload)
        view = ApprovalView(
            tool_name=payload.tool_name,
            headline=approval_headline(payload),
            command=call.command if call else None,
            path=call.path if call else None,
        )
        note = REOPENED_NOTE if await self._reopening(ask) else None
        if call is None:
            note = f"{note} {COMMAND_UNREAD_NOTE}" if note else COMMAND_UNREAD_NOTE
        label = session_label(ask.session_id)
        refused = False
        for _ in range(_MAX_REOPENS):
            ask.phase = "asking"
            before = await self._version(ask) if refused else None
            options = AskOptions(
                key=ask_key(ask.rpc_id),
                label=label,
                note=note,
                on_posted=lambda _: self._on_posted(ask),
                asked_by=self._uplink.asker,
            )
            try:
                record = await self._desk.ask_approval(
                    view,
                    options=options,
                    approvers=self._approvers,
                    approver_groups=self._groups,
                    signal=ask.controller.signal,
                )
            except UserQuestionError as exc:
                await self._not_asked(ask, exc)
                return
            if before is not None and record.version == before:
                # Nothing was written: the message was not reopened and the refused decision
                # came back as it was. Sending it again would decide for nobody; stop here.
                self._logger.error(
                    "dsh host: could not reopen the approval in Slack",
                    extra={"rpc_id": ask.rpc_id},
                )
                await self._desk.add_note(ask.request_id, APPROVAL_NOT_REOPENED)
                return
            outcome = record.decision
            if record.state != "answered" or outcome is None:
                self._logger.debug("dsh host: approval ended", extra={"rpc_id": ask.rpc_id})
                return
            ask.phase = "responding"
            body = approval_response(ask.rpc_id, ask.session_id, payload.approval_id, outcome)
            receipt = await self._send(ask, body, functools.partial(operator.eq, outcome))
            if receipt is None:
                return
            self._log_receipt("approval decision", ask, receipt)
            if receipt.accepted:
                return
            if receipt.reason == "not-pending":
                await self._desk.add_note(ask.request_id, APPROVAL_SETTLED_ELSEWHERE)
                return
            note, refused = APPROVAL_REFUSED, True
        await self._desk.add_note(
            ask.request_id, "The harness kept refusing decisions; decide in the harness instead."
        )
