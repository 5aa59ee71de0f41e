"""Per-request options for the Slack provider, passed beside the seam's request.

The seam's ``ask(request)`` carries no destination. Callers that need one (the HTTP API,
the dsh host client) set it for the duration of a call::

    with ask_options(AskOptions(channel="C123", key="rpc-1", label="session 3f2a")):
        answer = await service.ask(request)

The provider reads the options of the task that calls it, so validation still runs
through ``UserQuestionService.ask``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["AskOptions", "ask_options", "current_ask_options"]


@dataclass(frozen=True, slots=True)
class AskOptions:
    """Where and how one request is asked.

    - ``channel`` / ``thread_ts``: destination (default: the provider's).
    - ``key``: idempotency key; asking again with the same key attaches to the open request
      instead of posting twice (a replayed frame, a retried HTTP POST).
    - ``request_id``: use this id for the request instead of minting one.
    - ``label``: who is asking, shown on the message (for example ``session 3f2a9c``).
    - ``note``: shown on the message; with a ``key`` whose request already ended, the
      request is reopened with this note (the host refused the answer).
    - ``on_posted``: called with the request id once the message is in Slack.
    """

    channel: str | None = None
    thread_ts: str | None = None
    key: str | None = None
    request_id: str | None = None
    label: str | None = None
    note: str | None = None
    on_posted: Callable[[str], None] | None = None


_current: contextvars.ContextVar[AskOptions | None] = contextvars.ContextVar(
    "slack_ask_options", default=None
)


def current_ask_options() -> AskOptions:
    """The options set by the innermost ``ask_options`` block (defaults outside one)."""
    return _current.get() or AskOptions()


@contextmanager
def ask_options(options: AskOptions) -> Iterator[AskOptions]:
    """Apply ``options`` to every ask made in this block (and tasks it starts)."""
    token = _current.set(options)
    try:
        yield options
    finally:
        _current.reset(token)
