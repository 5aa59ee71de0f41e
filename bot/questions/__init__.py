"""The user-questions seam: every public name in one place."""

from bot.questions.abort import AbortController, AbortError, AbortSignal
from bot.questions.errors import HarnessError, UserQuestionError
from bot.questions.models import (
    AskOptions,
    AskUserQuestionAnswer,
    AskUserQuestionAnswerItem,
    AskUserQuestionIntent,
    AskUserQuestionItem,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    PlanReviewIntent,
    UserQuestionProvider,
)
from bot.questions.review import RequiredApprovals, ReviewerSet, ReviewPolicy
from bot.questions.service import AgentRegistry, UserQuestionService

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "AgentRegistry",
    "AskOptions",
    "AskUserQuestionAnswer",
    "AskUserQuestionAnswerItem",
    "AskUserQuestionIntent",
    "AskUserQuestionItem",
    "AskUserQuestionOption",
    "AskUserQuestionRequest",
    "HarnessError",
    "PlanReviewIntent",
    "RequiredApprovals",
    "ReviewPolicy",
    "ReviewerSet",
    "UserQuestionError",
    "UserQuestionProvider",
    "UserQuestionService",
]
