"""The Slack provider for the user-questions seam.

``SlackQuestionProvider(app, channel=...)`` asks through a bolt ``AsyncApp``; register it
with ``UserQuestionService.register_provider``. A request's ``options``
(``AskOptions``) set a destination, idempotency key or label for that one ask;
``key_request_id(key)`` is the id of the request asked with idempotency ``key``
(``new_request_id()`` a fresh one), and
``SlackQuestionProvider.status`` tells where it stands (``QuestionStatus``);
``plan_review_of(questions)`` says whether a request is shown as a plan review.
``ask_approval(ApprovalView(...))`` asks a tool-permission approval (Allow once / Reject);
``release`` leaves a request open for a later process (abort its waiter with ``Released()``:
it raises ``WaitReleased``, an ``ASK_ABORTED``, if the request stayed open).
A ``PendingStore`` keeps each request as a ``PendingRecord``.
"""

from adapters.slack.asks.consume import REFUSALS as CONSUME_REFUSALS
from adapters.slack.asks.destination import Destination
from adapters.slack.asks.endings import Released, WaitReleased
from adapters.slack.asks.status import QuestionStatus, SlackMessage
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.ids import key_request_id, new_request_id
from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.model.tally import Vote
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.render.layout import PlanReview, plan_review_of
from adapters.slack.render.messages import unknown_revised
from adapters.slack.stores import MemoryPendingStore, PendingStore
from bot.questions import AskOptions

__all__ = [
    "CONSUME_REFUSALS",
    "ApprovalView",
    "AskOptions",
    "AuditEvent",
    "Destination",
    "MemoryPendingStore",
    "PendingRecord",
    "PendingStore",
    "PlanReview",
    "QuestionStatus",
    "Released",
    "SlackMessage",
    "SlackQuestionProvider",
    "Vote",
    "WaitReleased",
    "key_request_id",
    "new_request_id",
    "plan_review_of",
    "unknown_revised",
]
