"""The seam's errors: ``Exception`` > ``HarnessError`` (message + stable ``code``) >
``UserQuestionError`` (every failure of the seam). Route on ``code``, never parse ``message``."""

from __future__ import annotations

from typing import Final

# The original seam's codes.
ASK_ABORTED: Final = "ASK_ABORTED"
ASK_CANCELLED: Final = "ASK_CANCELLED"
EMPTY_QUESTIONS: Final = "EMPTY_QUESTIONS"
CALLER_NOT_LIVE: Final = "CALLER_NOT_LIVE"
DELEGATED_CALLER: Final = "DELEGATED_CALLER"
BAD_INTENT: Final = "BAD_INTENT"
NO_PROVIDER: Final = "NO_PROVIDER"
DUPLICATE_PROVIDER: Final = "DUPLICATE_PROVIDER"

# This project's codes.
DELIVERY_FAILED: Final = "DELIVERY_FAILED"  # Slack refused or never took the question
SLACK_LIMIT: Final = "SLACK_LIMIT"  # the request cannot be shown within Block Kit's limits
ASK_TIMEOUT: Final = "ASK_TIMEOUT"  # the provider's own timeout elapsed
OWNER_LOST: Final = "OWNER_LOST"  # the process holding the waiter died (shared store)
STORE_UNAVAILABLE: Final = "STORE_UNAVAILABLE"  # the pending store could not be reached in time
BAD_REVIEW: Final = "BAD_REVIEW"  # a review policy or revision that cannot apply to the request
BAD_CALLBACK: Final = "BAD_CALLBACK"  # a callback the provider cannot deliver (see its message)
RECORD_LOST: Final = "RECORD_LOST"  # the question's record vanished from the store (Redis flushed)


class HarnessError(Exception):
    """An error with a stable ``code``; ``name`` is the class name, ``cause`` is chained."""

    code: str

    def __init__(self, message: str, code: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        if cause is not None:
            self.__cause__ = cause

    @property
    def name(self) -> str:
        """The error's class name, as the seam reports it (``UserQuestionError``)."""
        return type(self).__name__

    @property
    def cause(self) -> BaseException | None:
        """The chained cause, if any."""
        return self.__cause__

    def to_dict(self) -> dict[str, str]:
        """``{name, code, message}``: the shape the HTTP API and tool results carry."""
        return {"name": self.name, "code": self.code, "message": self.message}

    def __repr__(self) -> str:
        return f"{self.name}({self.message!r}, {self.code!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Exception's own reduce rebuilds from ``args`` (the message alone), which misses
        # ``code``: copies and pickles (a process pool, a queue) are rebuilt from the state.
        return (_rebuilt, (type(self), self.message), self.__dict__)


def _rebuilt(cls: type[HarnessError], message: str) -> HarnessError:
    """An unpickled ``cls`` before its state is set (a subclass may take other arguments)."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error


class UserQuestionError(HarnessError):
    """A failure of the user-questions seam (validation, provider, delivery)."""

    @property
    def name(self) -> str:
        """``UserQuestionError``, for a subclass too (the seam sets it on the class), so what
        callers match on (``{name, code}``) is the same for all."""
        return "UserQuestionError"
