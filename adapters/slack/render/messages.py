"""Every sentence the Slack provider shows a person or puts in an error, defined once."""

from __future__ import annotations

from typing import Final

from adapters.slack.model.audience import who_may
from adapters.slack.model.record import PendingRecord
from bot.questions.service import ABORTED_MESSAGE as ABORTED_MESSAGE

# -- errors the waiting ask() raises ------------------------------------------------------

CANCELLED_MESSAGE: Final = "the user cancelled ask_user_question"
"""``ASK_CANCELLED``: a person dismissed the question (the seam's web provider's words)."""
SHUTTING_DOWN: Final = "the Slack provider is shutting down"
"""``ASK_ABORTED`` for an ask made while the provider closes."""
QUESTION_FAILED: Final = "The question failed"
"""A failed record that carries no note of its own."""
UNDELIVERED: Final = "Slack did not take the question"
"""``DELIVERY_FAILED``: ``chat.postMessage`` failed (followed by Slack's error)."""
UNDELIVERED_REST: Final = "Slack did not take the rest of the text"
"""``DELIVERY_FAILED``: a thread continuation failed (followed by Slack's error)."""
STORE_DOWN_NOTE: Final = "The bot could not reach its storage."
"""A store outage as the message says it (the store's own error, with its address, is not)."""
STORE_BUSY: Final = "the pending store could not settle the question"
"""``STORE_UNAVAILABLE``: a record kept changing under every write (followed by why)."""

NOT_A_PLAN_REVIEW: Final = (
    "a review policy or revises applies only to a plan review (one question with the "
    "plan-review intent, a detail, at most two options and the approve label among them)"
)
"""``BAD_REVIEW``: team-review options on a request that is not a plan review."""


def unknown_revised(request_id: str) -> str:
    """``BAD_REVIEW``: ``revises`` names no known plan review."""
    return f"revises: no plan review with id {request_id!r} is known"


# -- notes shown on the message -----------------------------------------------------------

SHUTDOWN_NOTE: Final = "Interrupted: the bot shut down before anyone answered."
RECORD_LOST_NOTE: Final = (
    "The store lost this question's record (was Redis flushed or restarted without"
    " persistence?), so it can no longer be answered."
)
"""``RECORD_LOST``: the note on the message and the error's message."""
CANCELLED_BY_ASKER: Final = "Cancelled: the asker stopped waiting for an answer."
SUPERSEDED_NOTE: Final = (
    "Superseded by a revised plan, posted for review; this one can no longer be approved."
)
"""A plan review a revision replaced while it was open (its waiter gets ``ASK_ABORTED``)."""


def no_answer_within(seconds: float) -> str:
    """The note of a request failed by the provider's ``timeout``."""
    return f"No answer within {seconds:g} seconds."


# -- private notes and modal errors for the person who clicked ----------------------------

NO_LONGER_OPEN: Final = "This question is no longer open."
NOT_ALLOWED: Final = "You are not one of the people who can answer this question."
ENTER_AN_ANSWER: Final = "Please enter an answer."
NOT_A_REVIEWER: Final = "You are not one of the reviewers of this plan."
ALREADY_VOTED: Final = "Your vote is already counted; the review is still open."
NOT_AN_APPROVER: Final = "You are not one of the people who can decide this tool approval."


def not_yours(record: PendingRecord, *, plain: bool = False) -> str:
    """The note for someone who may not act on ``record`` (a question, a plan review, a tool
    approval), naming who can (``plain``: a modal's plain-text error, which shows no mentions)."""
    reviewing = record.review is not None and record.review.reviewers is not None
    note = NOT_AN_APPROVER if record.approval else NOT_A_REVIEWER if reviewing else NOT_ALLOWED
    who = names_of(*who_may(record))  # "…; <@U1> or members of <!subteam^S1> can." (ids only)
    return f"{note[:-1]}; {who} can." if who and not plain else note


def names_of(users: list[str] | None, groups: list[str] | None) -> str:
    """ "<@U1>, <@U2> or members of <!subteam^S1>" (mrkdwn; empty when nobody is named)."""
    names = [f"<@{u}>" for u in users or []]
    if groups:
        names.append("members of " + " or ".join(f"<!subteam^{g}>" for g in groups))
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


NOT_CHECKED: Final = (
    "Nothing was sent yet: Slack was slow to confirm who may answer. Please submit again."
)
"""A submission whose group lookup could not finish within Slack's 3-second ack."""
MODAL_NOT_OPENED: Final = (
    "The form could not be opened (Slack did not take it). Please click again."
)
"""``views.open`` failed (its trigger expires 3 s after the click)."""


def not_recorded(*, what: str = "click") -> str:
    """The note for a ``what`` the store could not take (its error, naming it, is for the log)."""
    return f"Your {what} was not recorded: the bot could not reach its storage. Please try again."


ALREADY: Final = {
    "Approved": "This plan was already approved",
    "Declined": "This plan was already declined",
    "Answered": "This question was already answered",
    "Skipped": "This question was already skipped",
    "Sent": "This question was already answered",
    "Dismissed": "This question was dismissed",
}
"""The note for a click on a request that ended with a verb, before who ended it, if known."""
