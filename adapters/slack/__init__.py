"""The Slack provider for the user-questions seam.

``SlackQuestionProvider(app, channel=...)`` asks through a bolt ``AsyncApp``; register it
with ``UserQuestionService.register_provider``. A request's ``options``
(``AskOptions``) set a destination, idempotency key or label for that one ask.
"""

from adapters.slack.lifecycle import Destination
from adapters.slack.pending import MemoryPendingStore, PendingStore
from adapters.slack.provider import SlackQuestionProvider
from bot.questions import AskOptions

__all__ = [
    "AskOptions",
    "Destination",
    "MemoryPendingStore",
    "PendingStore",
    "SlackQuestionProvider",
]
