"""The Slack provider for the user-questions seam.

``SlackQuestionProvider(app, channel=...)`` asks through a bolt ``AsyncApp``; register it
with ``UserQuestionService.register_provider``. ``ask_options`` sets a destination,
idempotency key or label for the asks made inside it.
"""

from adapters.slack.options import AskOptions, ask_options
from adapters.slack.pending import MemoryPendingStore, PendingStore
from adapters.slack.provider import Destination, SlackQuestionProvider

__all__ = [
    "AskOptions",
    "Destination",
    "MemoryPendingStore",
    "PendingStore",
    "SlackQuestionProvider",
    "ask_options",
]
