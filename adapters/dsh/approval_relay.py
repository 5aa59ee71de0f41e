"""One tool-permission approval of the host, decided in Slack (dsh-approvals.md); it stays
open until someone decides, the host withdraws it, or the host restarts."""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any, Final

from adapters.dsh.asks import (
    REOPENED_NOTE,
    Asked,
    HostAsk,
    HostRunner,
    Retry,
    ask_key,
    session_label,
)
from adapters.dsh.protocol import approval_headline, approval_response
from adapters.dsh.uplink import HostUplink
from adapters.slack import ApprovalView, SlackQuestionProvider
from bot.questions.models import AskOptions

__all__ = [
    "APPROVAL_NOT_REOPENED",
    "APPROVAL_REFUSED",
    "APPROVAL_SETTLED_ELSEWHERE",
    "COMMAND_UNREAD_NOTE",
    "ApprovalRunner",
    "resolved_note",
]

APPROVAL_SETTLED_ELSEWHERE: Final = (
    "The harness had already settled this approval elsewhere; this decision was not used."
)
_REFUSAL: Final = Retry.of("The harness refused that decision (bad-response).", "decide")
APPROVAL_REFUSED: Final = _REFUSAL.note
APPROVAL_NOT_REOPENED: Final = _REFUSAL.stuck
COMMAND_UNREAD_NOTE: Final = (
    "The bot could not read what this tool will run: check it in the harness before allowing it."
)


def resolved_note(outcome: str) -> str:
    """What an approval's message says when the host settled it without this bot."""
    return {
        "allowed-once": "Allowed in another client.",
        "rejected": "Rejected in another client.",
    }.get(outcome, "Cancelled in the harness.")


class ApprovalRunner(HostRunner):
    """Asks one host approval in Slack and sends the decision back; after a refused decision
    only one made after the message reopened is sent (resending it would decide for nobody)."""

    what = "tool approval"
    done = "rejected it in the harness"
    refused = _REFUSAL
    asks_at_most = 5

    def __init__(
        self,
        provider: SlackQuestionProvider,
        uplink: HostUplink,
        *,
        approvers: Sequence[str] | None,
        approver_groups: Sequence[str] | None,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
    ) -> None:
        super().__init__(provider, uplink, on_posted=on_posted, logger=logger)
        self._approvers = list(approvers) if approvers else None
        self._groups = list(approver_groups) if approver_groups else None

    def _declined(self, ask: HostAsk) -> dict[str, Any]:
        assert ask.approval is not None
        return approval_response(ask.rpc_id, ask.session_id, ask.approval.approval_id, "rejected")

    def _settled_note(self, ask: HostAsk) -> str:
        return APPROVAL_SETTLED_ELSEWHERE

    async def _opening(self, ask: HostAsk) -> tuple[str | None, Retry | None]:
        assert ask.approval is not None
        # A replay after a reconnect: the tool/call event is not sent again.
        if not ask.call_known:
            ask.call = await self._uplink.call_of(ask.approval)
        note = REOPENED_NOTE if await self._reopening(ask) else None
        if ask.call is None:
            note = f"{note} {COMMAND_UNREAD_NOTE}" if note else COMMAND_UNREAD_NOTE
        return note, None

    async def _ask(self, ask: HostAsk, note: str | None) -> Asked | None:
        payload, call = ask.approval, ask.call
        assert payload is not None
        view = ApprovalView(
            tool_name=payload.tool_name,
            headline=approval_headline(payload),
            command=call.command if call else None,
            path=call.path if call else None,
        )
        options = AskOptions(
            key=ask_key(ask.rpc_id),
            label=session_label(ask.session_id),
            note=note,
            on_posted=lambda _: self._on_posted(ask),
            asked_by=self._uplink.asker,
        )
        record = await self._notes.ask_approval(
            view,
            options=options,
            approvers=self._approvers,
            approver_groups=self._groups,
            signal=ask.controller.signal,
        )
        outcome = record.decision
        if record.state != "answered" or outcome is None:
            self._logger.debug("dsh host: approval ended", extra={"rpc_id": ask.rpc_id})
            return None
        body = approval_response(ask.rpc_id, ask.session_id, payload.approval_id, outcome)
        return body, functools.partial(operator.eq, outcome), "approval decision"
