"""The Slack provider for the user-questions seam.

``SlackQuestionProvider(app, channel=...)`` asks through a bolt ``AsyncApp``; register it
with ``UserQuestionService.register_provider``. A request's ``options``
(``AskOptions``) set a destination, idempotency key or label for that one ask;
``key_request_id(key)`` is the id of the request asked with idempotency ``key``
(``new_request_id()`` a fresh one), and
``SlackQuestionProvider.status`` tells where it stands (``QuestionStatus``);
``plan_review_of(questions)`` says whether a request is shown as a plan review.
"""

from adapters.slack.ids import key_request_id, new_request_id
from adapters.slack.layout import PlanReview, plan_review_of
from adapters.slack.lifecycle import Destination
from adapters.slack.pending import MemoryPendingStore, PendingStore
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.status import QuestionStatus, SlackMessage
from bot.questions import AskOptions

__all__ = [
    "AskOptions",
    "Destination",
    "MemoryPendingStore",
    "PendingStore",
    "PlanReview",
    "QuestionStatus",
    "SlackMessage",
    "SlackQuestionProvider",
    "key_request_id",
    "new_request_id",
    "plan_review_of",
]
