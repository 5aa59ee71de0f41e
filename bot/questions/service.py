"""``UserQuestionService`` (validate, then relay to the one provider) and ``AgentRegistry``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.questions.errors import (
    ASK_ABORTED,
    BAD_INTENT,
    CALLER_NOT_LIVE,
    DELEGATED_CALLER,
    DUPLICATE_PROVIDER,
    EMPTY_QUESTIONS,
    NO_PROVIDER,
    UserQuestionError,
)
from bot.questions.jsontext import stringify
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionRequest, UserQuestionProvider

ABORTED_MESSAGE = "ask_user_question was aborted before the user answered"
EMPTY_MESSAGE = "ask_user_question requires at least one question"
NOT_LIVE_MESSAGE = (
    "human interaction requires the exact live calling agent when an agent is supplied"
)
DELEGATED_MESSAGE = (
    "human interaction is unavailable while the calling agent is owned by another live agent; "
    "include the unresolved question or decision in the child agent's final result"
)
NO_PROVIDER_MESSAGE = "no user-questions provider is registered"
DUPLICATE_MESSAGE = "a user-questions provider is already registered"


class _Session(Protocol):
    @property
    def id(self) -> str: ...


class Agent(Protocol):
    """What the seam needs of a live agent: an ``id`` equal to its ``session.id``."""

    @property
    def id(self) -> str: ...

    @property
    def session(self) -> _Session: ...


@dataclass(slots=True)
class _Entry:
    agent: Any
    owner: Any


class AgentRegistry:
    """The live agents, keyed by id; roots are the ones with no owning agent."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def enter(self, agent: Agent, owner: Agent | None = None) -> Callable[[], None]:
        """Make ``agent`` live (owned by ``owner``, if any); returns an idempotent detach."""
        session_id = agent.session.id
        if agent.id != session_id:
            raise ValueError(f'agent id "{agent.id}" does not match session id "{session_id}"')
        if agent.id in self._entries:
            raise ValueError(f'agent "{agent.id}" is already registered')
        entry = _Entry(agent, owner)
        self._entries[agent.id] = entry

        def detach() -> None:
            if self._entries.get(agent.id) is entry:
                del self._entries[agent.id]

        return detach

    def get(self, agent_id: str) -> Any:
        """The live agent with this id, or ``None``."""
        entry = self._entries.get(agent_id)
        return None if entry is None else entry.agent

    def roots(self) -> list[Any]:
        """Live agents with no owner, in the order they entered."""
        return [entry.agent for entry in self._entries.values() if entry.owner is None]


class UserQuestionService:
    """Validates a request in the seam's order, then hands the same object to the provider."""

    def __init__(self, agents: AgentRegistry | None = None) -> None:
        self._agents = agents
        self._provider: UserQuestionProvider | None = None

    @property
    def provider(self) -> UserQuestionProvider | None:
        """The active provider, if one is registered."""
        return self._provider

    def register_provider(self, provider: UserQuestionProvider) -> Callable[[], None]:
        """Make ``provider`` the active one (``DUPLICATE_PROVIDER`` while another is); returns an
        idempotent disposer that never removes a newer provider."""
        if self._provider is not None:
            raise UserQuestionError(DUPLICATE_MESSAGE, DUPLICATE_PROVIDER)
        self._provider = provider
        spent = False

        def dispose() -> None:
            nonlocal spent
            if spent:
                return
            spent = True
            if self._provider is provider:
                self._provider = None

        return dispose

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Run the seam's checks in order, then return the provider's answer unchanged."""
        answer = self._checked(request).ask(request)
        del request  # not held (nor any of its questions) while the question waits
        # ``return this.provider.ask(request)``: a provider whose ``ask`` returns its answer
        # without a coroutine is taken as JavaScript takes a non-promise.
        return await answer if inspect.isawaitable(answer) else answer

    def _checked(self, request: AskUserQuestionRequest) -> UserQuestionProvider:
        """The provider to ask once the seam's checks pass, in their order."""
        if request.signal is not None and request.signal.aborted:
            raise UserQuestionError(ABORTED_MESSAGE, ASK_ABORTED)
        if len(request.questions) == 0:
            raise UserQuestionError(EMPTY_MESSAGE, EMPTY_QUESTIONS)
        agent = request.agent
        if agent is not None:
            agents = self._agents
            agent_id = getattr(agent, "id", None)  # not an agent at all: not a live one
            if agents is None or not isinstance(agent_id, str) or agents.get(agent_id) is not agent:
                raise UserQuestionError(NOT_LIVE_MESSAGE, CALLER_NOT_LIVE)
            if not any(root is agent for root in agents.roots()):
                raise UserQuestionError(DELEGATED_MESSAGE, DELEGATED_CALLER)
        for question in request.questions:
            intent = question.intent
            if intent is None:
                continue
            if not any(option.label == intent.approve for option in question.options or ()):
                approve = stringify(intent.approve)
                raise UserQuestionError(
                    f"question {question.id} declares intent {intent.kind} whose approve "
                    f"label {approve} names none of its options",
                    BAD_INTENT,
                )
            if question.detail is None:
                raise UserQuestionError(
                    f"question {question.id} declares intent {intent.kind} "
                    "without the detail it reviews",
                    BAD_INTENT,
                )
        provider = self._provider
        if provider is None:
            raise UserQuestionError(NO_PROVIDER_MESSAGE, NO_PROVIDER)
        return provider
