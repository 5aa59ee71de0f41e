"""A host's request being asked in Slack (``HostAsk``), and what its runners share: one
ask-and-respond loop, honest notes on delivery, declining what Slack cannot show."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from adapters.dsh.host import describe
from adapters.dsh.mux import ApprovalRequested
from adapters.dsh.session_log import ToolCall
from adapters.slack import SlackQuestionProvider, key_request_id
from bot.questions.abort import AbortController
from bot.questions.errors import (
    ASK_ABORTED,
    BAD_INTENT,
    BAD_REVIEW,
    EMPTY_QUESTIONS,
    SLACK_LIMIT,
    UserQuestionError,
)
from bot.questions.models import AskUserQuestionItem

if TYPE_CHECKING:
    from adapters.dsh.link import MuxLink

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
_UNDELIVERED_NOTES: Final = frozenset({NOT_DELIVERED_NOTE, RETRYING_NOTE, UNCONFIRMED_NOTE})
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

PERMANENT_CODES: Final = frozenset({SLACK_LIMIT, BAD_REVIEW, BAD_INTENT, EMPTY_QUESTIONS})
"""Why Slack could not show a request that asking again cannot fix: the host is told."""
_RESOLVED_WAIT: Final = 2.0
"""Seconds a response not seen taken waits for the host's ``cancel`` (was it ours?)."""
_NOTICE_MAX: Final = 300


def _plain(text: str) -> str:
    """``text`` safe as Slack message text: no mention, link or markup from host text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
        asking = self.phase == "asking"
        self.resolved = outcome
        self.settled.set()
        if not asking:
            return
        if self.approval is not None:
            self.controller.abort(_RESOLVED_APPROVAL.get(outcome, "Cancelled in the harness."))
        else:
            self.controller.abort(
                ANSWERED_ELSEWHERE if outcome == "answered" else CANCELLED_IN_HARNESS
            )

    @property
    def open(self) -> bool:
        """Still asking in Slack, and not ending already."""
        return self.phase == "asking" and not self.controller.signal.aborted

    @property
    def request_id(self) -> str:
        """The provider's request id for this host request."""
        return key_request_id(ask_key(self.rpc_id))


@dataclass(frozen=True, slots=True)
class Retry:
    """Why the person is asked again: the note to reopen with, and the one if that fails."""

    note: str
    stuck: str

    @classmethod
    def of(cls, what: str) -> Retry:
        """The notes for an answer that cannot be sent, for the reason ``what``."""
        where = "This message could not be reopened; answer in the harness instead."
        return cls(f"{what} Please answer again.", f"{what} {where}")


Asked = tuple[dict[str, Any], Callable[[str | None], bool], str]
"""What to send: the outcome, which settled outcome it asks for, and what the log calls it."""


class HostRunner:
    """Asks one kind of host request in Slack and sends the outcome back; a request it cannot
    show, or fails on before a response went out, is declined in the host with a notice in the
    channel, so the host's agent never waits forever."""

    what = "request"
    """What the notice calls the request (``question``, ``tool approval``)."""
    done = "declined it in the harness"
    declined: ClassVar[dict[str, Any]]
    """The outcome telling the host the request cannot be asked here."""

    def __init__(
        self,
        provider: SlackQuestionProvider,
        link: MuxLink,
        *,
        asker: str,
        on_posted: Callable[[HostAsk], None],
        logger: logging.Logger,
    ) -> None:
        self._notes = provider
        self._link = link
        self.asker = asker
        """The host as the audit trail names who asked its questions and approvals."""
        self._on_posted = on_posted
        self._logger = logger

    async def _opening(self, ask: HostAsk) -> tuple[str | None, Retry | None]:
        """The note of the first ask, or the retry it is (a reopened message)."""
        raise NotImplementedError

    async def _ask(self, ask: HostAsk, note: str | None) -> Any:
        """Ask in Slack; what the person's outcome is (raises the seam's error if none)."""
        raise NotImplementedError

    def _outcome(self, ask: HostAsk, got: Any) -> Asked | Retry | None:
        """What to send for an outcome, a retry at once, or ``None`` (ended, nothing to send)."""
        raise NotImplementedError

    def _settled_note(self, ask: HostAsk) -> str:
        """What the message says when the host settled the request without this response."""
        raise NotImplementedError

    async def serve(self, ask: HostAsk) -> None:
        """Ask ``ask`` in Slack until the host takes a response or it ends otherwise."""
        try:
            await self._serve(ask)
        except Exception as exc:
            self._logger.exception(
                f"dsh host: could not handle a {self.what}", extra={"rpc_id": ask.rpc_id}
            )
            if ask.sent:
                return
            ask.controller.abort(DECLINED_NOTE)  # its record (if any) is closed with this
            await self._decline(ask, f"the bot failed on it ({describe(exc)[:200]}).")

    async def _serve(self, ask: HostAsk) -> None:
        note, retry = await self._opening(ask)
        while True:
            ask.phase = "asking"
            before = None if retry is None else await self._version(ask)
            try:
                got = await self._ask(ask, note if retry is None else retry.note)
            except UserQuestionError as exc:
                await self._not_answered(ask, exc)
                return
            if retry is not None and before is not None and await self._version(ask) == before:
                # Nothing was written: the message was not reopened and the earlier outcome
                # came back. Sending it again would loop, or decide for nobody: stop here.
                self._logger.error(
                    f"dsh host: could not reopen the {self.what.split()[-1]} in Slack",
                    extra={"rpc_id": ask.rpc_id},
                )
                await self._notes.add_note(ask.request_id, retry.stuck)
                return
            if (asked := self._outcome(ask, got)) is None:
                return
            if not isinstance(asked, Retry):
                await self._respond(ask, *asked)
                return
            retry = asked

    async def _respond(
        self, ask: HostAsk, outcome: dict[str, Any], used: Callable[[str | None], bool], what: str
    ) -> None:
        """Send ``outcome``; the message says when it is not delivered, or another settled the
        request (one that reached the host counts as taken when it settled it as ``used``)."""

        async def overdue(note: str) -> None:
            await self._notes.add_note(ask.request_id, note or RETRYING_NOTE, in_flight=True)

        ask.phase = "responding"
        ask.sent = True
        delivery = await self._link.respond(
            ask.rpc_id, outcome, settled=lambda: ask.resolved is not None, overdue=overdue
        )
        if delivery.taken is None and not delivery.settled:
            await self._notes.add_note(ask.request_id, NOT_DELIVERED_NOTE, in_flight=True)
            return
        extra = {"rpc_id": ask.rpc_id, "session": ask.session_id}
        taken = delivery.taken
        if not taken and delivery.reached:
            with contextlib.suppress(TimeoutError):  # was it ours? its ``cancel`` says
                await asyncio.wait_for(ask.settled.wait(), _RESOLVED_WAIT)
        if not taken and delivery.reached and used(ask.resolved):
            self._logger.info(
                "dsh host: response taken (the host's log did not show it; its cancel does)",
                extra=extra,
            )
            taken = True
        if not taken:
            self._logger.info(f"dsh host: {what} not taken (not-pending)", extra=extra)
            await self._notes.add_note(ask.request_id, self._settled_note(ask))
            return
        self._logger.info(f"dsh host: {what} accepted", extra=extra)
        status = await self._notes.status(ask.request_id)
        if status is not None and status.note in _UNDELIVERED_NOTES:
            await self._notes.add_note(ask.request_id, DELIVERED_NOTE)

    async def _not_answered(self, ask: HostAsk, error: UserQuestionError) -> None:
        """Slack did not show ``ask``: declined when asking again cannot fix it; otherwise the
        host keeps it pending for its other clients and replays it on the next downlink."""
        if error.code in PERMANENT_CODES:
            await self._decline(ask, f"{error.message} ({error.code}).")
        elif error.code != ASK_ABORTED:
            self._logger.warning(
                f"dsh host: could not ask a {self.what} in Slack",
                extra={"rpc_id": ask.rpc_id, "code": error.code, "error": error.message},
            )

    async def _reopening(self, ask: HostAsk) -> bool:
        """Whether a record this bot ended without an answer (gone, interrupted, owner lost)
        is to be reopened: the host replaying it means it is still pending there."""
        if ask.reopen:
            return True
        status = await self._notes.status(ask.request_id)
        return status is not None and status.state in ("aborted", "failed")

    async def _version(self, ask: HostAsk) -> int | None:
        """The record's version; ``None`` (not checked) when it or the store is not there."""
        try:
            status = await self._notes.status(ask.request_id)
        except UserQuestionError:
            return None
        return None if status is None else status.version

    async def _decline(self, ask: HostAsk, why: str) -> None:
        """Dismiss or reject the request in the host, so its agent can act, and say so in Slack."""
        self._logger.warning(
            f"dsh host: declining a {self.what} that cannot be asked in Slack",
            extra={"rpc_id": ask.rpc_id, "session": ask.session_id, "error": why},
        )
        ask.sent = True
        delivery = await self._link.respond(
            ask.rpc_id, self.declined, settled=lambda: ask.resolved is not None
        )
        if delivery.taken:
            told = f"The bot {self.done}, so the agent can carry on."
        elif delivery.taken is not None or delivery.settled:
            told = "The harness had already settled it."
        else:
            told = "The bot could not tell the harness; it tries again if the harness asks again."
        reason = why if len(why) <= _NOTICE_MAX else why[: _NOTICE_MAX - 1] + "…"
        await self._notice(
            f"The harness asked for a {self.what} ({session_label(ask.session_id)}) that the "
            f"bot cannot show in Slack: {reason} {told}"
        )

    async def _notice(self, text: str) -> None:
        """Post ``text`` as a plain message in the provider's channel (best effort)."""
        try:
            await self._notes.client.chat_postMessage(
                channel=self._notes.defaults.destination.channel, text=_plain(text)
            )
        except Exception as exc:  # a notice is best effort: the log line stays
            self._logger.warning(
                "dsh host: could not post a notice", extra={"notice": text, "error": describe(exc)}
            )
