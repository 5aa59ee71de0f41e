"""The user-questions seam: every public name in one place.

``from bot.questions import UserQuestionService, AskUserQuestionRequest, ...``
"""

from bot.abort import AbortController, AbortError, AbortSignal
from bot.errors import HarnessError, UserQuestionError
from bot.models import (
    AskUserQuestionAnswer,
    AskUserQuestionAnswerItem,
    AskUserQuestionIntent,
    AskUserQuestionItem,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    PlanReviewIntent,
    UserQuestionProvider,
)
from bot.service import AgentRegistry, UserQuestionService

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "AgentRegistry",
    "AskUserQuestionAnswer",
    "AskUserQuestionAnswerItem",
    "AskUserQuestionIntent",
    "AskUserQuestionItem",
    "AskUserQuestionOption",
    "AskUserQuestionRequest",
    "HarnessError",
    "PlanReviewIntent",
    "UserQuestionError",
    "UserQuestionProvider",
    "UserQuestionService",
]
