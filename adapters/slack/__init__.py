"""The Slack provider for the user-questions seam (public surface: ``__all__``).

Layers, top to bottom: ``provider`` wires ``clicks`` (bolt app, listeners, handler) over
``home`` (App Home) over ``asks`` (one question's life) over ``stores`` over ``render`` (pure
Block Kit and words) over ``model`` (the record, ids, parsed clicks); ``pacing`` and
``blockkit`` sit beside, importing nothing of it; ``sandbox`` is the local Slack.
The README follows a click through them file by file.
"""

from adapters.slack.asks.destination import Destination
from adapters.slack.asks.endings import DeadlineUnkept, Released, WaitReleased
from adapters.slack.asks.status import REFUSALS as CONSUME_REFUSALS
from adapters.slack.asks.status import QuestionStatus, SlackMessage
from adapters.slack.asks.synchroniser import BackgroundTasks
from adapters.slack.clicks.bolt_app import to_bolt_request
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
    "BackgroundTasks",
    "DeadlineUnkept",
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
    "to_bolt_request",
    "unknown_revised",
]
