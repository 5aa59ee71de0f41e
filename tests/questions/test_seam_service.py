"""UserQuestionService and AgentRegistry: the upstream user-questions.spec.ts cases, ported.

Upstream: packages/interaction/user-questions/tests/user-questions.spec.ts (13 tests), plus
the check order, identity and disposer rules of dsh-user-questions.md §2-§4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from bot.questions import (
    AgentRegistry,
    AskUserQuestionAnswer,
    AskUserQuestionAnswerItem,
    AskUserQuestionRequest,
    UserQuestionService,
)
from bot.questions.abort import AbortController
from bot.questions.errors import UserQuestionError
from tests.seam_stubs import StubAgent, StubHeader, StubSession, stub_agent

DELEGATED = (
    "human interaction is unavailable while the calling agent is owned by another live agent; "
    "include the unresolved question or decision in the child agent's final result"
)
NOT_LIVE = "human interaction requires the exact live calling agent when an agent is supplied"


@dataclass
class RecordingProvider:
    """Answers only the first question with ``answer``; records every request it receives."""

    answer: str = "approved"
    seen: list[AskUserQuestionRequest] = field(default_factory=list)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.seen.append(request)
        first = request.questions[0].id if request.questions else "missing"
        return AskUserQuestionAnswer(
            answers=[AskUserQuestionAnswerItem(id=first, selected=[self.answer])]
        )


@dataclass
class RaisingProvider:
    error: BaseException
    calls: int = 0

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.calls += 1
        raise self.error


def request(wire: dict[str, Any], **extras: Any) -> AskUserQuestionRequest:
    """A request from wire JSON, with ``agent``/``signal`` added only when given."""
    built = AskUserQuestionRequest.model_validate(wire)
    if extras:
        built = AskUserQuestionRequest(questions=built.questions, **extras)
    return built


CONFIRM: dict[str, Any] = {"questions": [{"id": "confirm", "question": "Proceed?"}]}


async def ask_error(service: UserQuestionService, req: AskUserQuestionRequest) -> UserQuestionError:
    with pytest.raises(UserQuestionError) as caught:
        await service.ask(req)
    return caught.value


# --- the 13 upstream cases -------------------------------------------------------------------


async def test_delegates_ask_requests_to_the_registered_provider() -> None:
    service = UserQuestionService()
    provider = RecordingProvider("yes")
    service.register_provider(provider)
    req = request(CONFIRM)

    result = await service.ask(req)

    assert result.to_wire() == {"answers": [{"id": "confirm", "selected": ["yes"]}]}
    assert [seen.to_wire() for seen in provider.seen] == [CONFIRM]
    # The very same object, with nothing added: no agent, no signal, no defaults.
    assert provider.seen[0] is req
    assert provider.seen[0].model_fields_set == {"questions"}
    assert provider.seen[0].questions[0].model_fields_set == {"id", "question"}


async def test_rejects_ask_requests_when_no_provider_is_registered() -> None:
    error = await ask_error(UserQuestionService(), request(CONFIRM))
    assert (error.name, error.code) == ("UserQuestionError", "NO_PROVIDER")
    assert error.message == "no user-questions provider is registered"


async def test_registers_providers_with_hmr_safe_disposal() -> None:
    service = UserQuestionService()
    dispose = service.register_provider(RecordingProvider())

    assert dispose() is None
    dispose()

    assert service.provider is None
    error = await ask_error(service, request(CONFIRM))
    assert error.code == "NO_PROVIDER"


async def test_rejects_duplicate_providers_instead_of_replacing_the_active_ui() -> None:
    service = UserQuestionService()
    first = RecordingProvider("first")
    service.register_provider(first)

    with pytest.raises(UserQuestionError) as caught:
        service.register_provider(RecordingProvider("second"))  # synchronous, no await

    assert caught.value.code == "DUPLICATE_PROVIDER"
    assert caught.value.message == "a user-questions provider is already registered"
    assert service.provider is first
    result = await service.ask(request(CONFIRM))
    assert result.answers[0].selected == ["first"]


async def test_fails_before_reaching_the_provider_when_the_signal_is_already_aborted() -> None:
    service = UserQuestionService()
    provider = RecordingProvider("too late")
    service.register_provider(provider)
    controller = AbortController()
    controller.abort()

    error = await ask_error(service, request(CONFIRM, signal=controller.signal))

    assert error.code == "ASK_ABORTED"
    assert error.message == "ask_user_question was aborted before the user answered"
    assert provider.seen == []


async def test_rejects_empty_question_batches_before_reaching_the_provider() -> None:
    service = UserQuestionService()
    provider = RecordingProvider()
    service.register_provider(provider)

    error = await ask_error(service, request({"questions": []}))

    assert (error.name, error.code) == ("UserQuestionError", "EMPTY_QUESTIONS")
    assert error.message == "ask_user_question requires at least one question"
    assert provider.seen == []


async def test_rejects_a_live_runtime_owned_agent_before_reaching_the_provider() -> None:
    agents = AgentRegistry()
    service = UserQuestionService(agents)
    provider = RecordingProvider()
    service.register_provider(provider)
    root, child = stub_agent("root", 0), stub_agent("child", 0)
    agents.enter(root, None)
    agents.enter(child, root)

    error = await ask_error(service, request(CONFIRM, agent=child))

    assert (error.name, error.code) == ("UserQuestionError", "DELEGATED_CALLER")
    assert error.message == DELEGATED
    assert str(error) == DELEGATED
    assert provider.seen == []


async def test_reaches_the_provider_for_a_lineage_bearing_session_resumed_as_a_runtime_root() -> (
    None
):
    agents = AgentRegistry()
    service = UserQuestionService(agents)
    provider = RecordingProvider("yes")
    service.register_provider(provider)
    agent = stub_agent("resumed-root", 1)
    agents.enter(agent, None)

    result = await service.ask(request(CONFIRM, agent=agent))

    assert result.to_wire() == {"answers": [{"id": "confirm", "selected": ["yes"]}]}
    assert provider.seen[0].agent is agent


async def test_rejects_a_supplied_agent_when_no_live_registry_can_attest_it() -> None:
    service = UserQuestionService()  # no AgentRegistry composed
    provider = RecordingProvider()
    service.register_provider(provider)

    error = await ask_error(service, request(CONFIRM, agent=stub_agent("unattested")))

    assert (error.name, error.code) == ("UserQuestionError", "CALLER_NOT_LIVE")
    assert error.message == NOT_LIVE
    assert provider.seen == []


async def test_rejects_a_stale_agent_object_that_reuses_a_live_id() -> None:
    agents = AgentRegistry()
    service = UserQuestionService(agents)
    provider = RecordingProvider()
    service.register_provider(provider)
    live = stub_agent("same-id")
    agents.enter(live, None)
    stale = stub_agent("same-id")
    assert stale == live and stale is not live  # equal, but not the live instance

    error = await ask_error(service, request(CONFIRM, agent=stale))

    assert (error.name, error.code) == ("UserQuestionError", "CALLER_NOT_LIVE")
    assert provider.seen == []
    # The live instance itself is admitted.
    await service.ask(request(CONFIRM, agent=live))
    assert provider.seen[0].agent is live


@pytest.mark.parametrize(
    "options",
    [[{"label": "Approve"}], None],
    ids=["wrong-label-among-options", "no-options"],
)
async def test_rejects_an_intent_whose_approve_label_names_none_of_its_own_options(
    options: list[dict[str, str]] | None,
) -> None:
    service = UserQuestionService()
    provider = RecordingProvider()
    service.register_provider(provider)
    question: dict[str, Any] = {"id": "plan-review", "question": "Approve?", "detail": "# Plan"}
    if options is not None:
        question["options"] = options
    question["intent"] = {"kind": "plan-review", "approve": "Ship it"}

    error = await ask_error(service, request({"questions": [question]}))

    assert (error.name, error.code) == ("UserQuestionError", "BAD_INTENT")
    assert error.message == (
        'question plan-review declares intent plan-review whose approve label "Ship it" '
        "names none of its options"
    )
    assert provider.seen == []


async def test_rejects_a_plan_review_intent_on_a_question_carrying_no_plan_to_review() -> None:
    service = UserQuestionService()
    provider = RecordingProvider()
    service.register_provider(provider)
    question = {
        "id": "plan-review",
        "question": "Approve?",
        "options": [{"label": "Approve"}, {"label": "Keep planning"}],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }

    error = await ask_error(service, request({"questions": [question]}))

    assert (error.name, error.code) == ("UserQuestionError", "BAD_INTENT")
    assert error.message == (
        "question plan-review declares intent plan-review without the detail it reviews"
    )
    assert provider.seen == []


async def test_passes_an_intent_through_once_its_approve_label_names_an_offered_option() -> None:
    service = UserQuestionService()
    provider = RecordingProvider("Approve")
    service.register_provider(provider)
    intent = {"kind": "plan-review", "approve": "Approve"}

    result = await service.ask(
        request(
            {
                "questions": [
                    {"id": "plain", "question": "Proceed?"},
                    {
                        "id": "plan-review",
                        "question": "Approve?",
                        "detail": "# Plan",
                        "options": [{"label": "Approve"}, {"label": "Keep planning"}],
                        "intent": intent,
                    },
                ]
            }
        )
    )

    # No completeness check: one answer for two questions comes back as is.
    assert [item.to_wire() for item in result.answers] == [{"id": "plain", "selected": ["Approve"]}]
    seen_intent = provider.seen[0].questions[1].intent
    assert seen_intent is not None and seen_intent.to_wire() == intent


# --- BAD_INTENT details ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("approve", "quoted"),
    [
        ("确认执行", '"确认执行"'),  # non-ASCII is not escaped (JSON.stringify)
        ('say "hi"', '"say \\"hi\\""'),
        ("a/b\\c", '"a/b\\\\c"'),  # "/" stays, "\" is escaped
        ("line\nbreak\t\x01", '"line\\nbreak\\t\\u0001"'),
    ],
)
async def test_bad_intent_quotes_the_approve_label_as_json(approve: str, quoted: str) -> None:
    service = UserQuestionService()
    question = {
        "id": "q1",
        "question": "Approve?",
        "detail": "# Plan",
        "options": [{"label": "Approve"}],
        "intent": {"kind": "plan-review", "approve": approve},
    }

    error = await ask_error(service, request({"questions": [question]}))

    assert error.code == "BAD_INTENT"
    assert error.message == (
        f"question q1 declares intent plan-review whose approve label {quoted} "
        "names none of its options"
    )


async def test_an_empty_detail_satisfies_the_detail_check() -> None:
    service = UserQuestionService()
    provider = RecordingProvider("Approve")
    service.register_provider(provider)
    question = {
        "id": "plan-review",
        "question": "Approve?",
        "detail": "",
        "options": [{"label": "Approve"}],
        "intent": {"kind": "plan-review", "approve": "Approve"},
    }

    result = await service.ask(request({"questions": [question]}))

    assert result.answers[0].selected == ["Approve"]
    assert len(provider.seen) == 1


async def test_the_first_offending_question_decides_and_the_label_check_comes_first() -> None:
    service = UserQuestionService()
    questions = [
        {"id": "fine", "question": "Proceed?"},
        # Both wrong label and no detail: the label check (#5) is reported.
        {
            "id": "first-bad",
            "question": "Approve?",
            "options": [{"label": "Approve"}],
            "intent": {"kind": "plan-review", "approve": "Ship it"},
        },
        {
            "id": "second-bad",
            "question": "Approve?",
            "options": [{"label": "Approve"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        },
    ]

    error = await ask_error(service, request({"questions": questions}))
    assert error.message.startswith("question first-bad declares intent plan-review whose")

    error = await ask_error(service, request({"questions": [questions[0], questions[2]]}))
    assert error.message == (
        "question second-bad declares intent plan-review without the detail it reviews"
    )


# --- check order ------------------------------------------------------------------------------

BAD_INTENT_QUESTION: dict[str, Any] = {
    "id": "q",
    "question": "Approve?",
    "intent": {"kind": "plan-review", "approve": "Ship it"},
}


async def test_an_aborted_signal_wins_over_an_empty_batch() -> None:
    controller = AbortController()
    controller.abort()
    error = await ask_error(
        UserQuestionService(), request({"questions": []}, signal=controller.signal)
    )
    assert error.code == "ASK_ABORTED"


async def test_an_empty_batch_is_reported_even_with_no_provider() -> None:
    error = await ask_error(UserQuestionService(), request({"questions": []}))
    assert error.code == "EMPTY_QUESTIONS"


async def test_a_bad_agent_is_reported_before_a_bad_intent_and_before_no_provider() -> None:
    agents = AgentRegistry()
    root, child = stub_agent("root"), stub_agent("child")
    agents.enter(root)
    agents.enter(child, root)
    service = UserQuestionService(agents)
    bad = {"questions": [BAD_INTENT_QUESTION]}

    assert (await ask_error(service, request(bad, agent=stub_agent("ghost")))).code == (
        "CALLER_NOT_LIVE"
    )
    assert (await ask_error(service, request(bad, agent=child))).code == "DELEGATED_CALLER"
    assert (await ask_error(service, request(bad, agent=root))).code == "BAD_INTENT"
    assert (await ask_error(service, request(bad))).code == "BAD_INTENT"
    assert (await ask_error(service, request(CONFIRM, agent=root))).code == "NO_PROVIDER"


async def test_failures_arrive_when_awaited_not_when_called() -> None:
    service = UserQuestionService()
    pending = service.ask(request({"questions": []}))  # no exception yet
    with pytest.raises(UserQuestionError, match="at least one question"):
        await pending


# --- the provider ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        UserQuestionError("the user cancelled ask_user_question", "ASK_CANCELLED"),
        RuntimeError("review aborted"),
    ],
    ids=["user-question-error", "plain-error"],
)
async def test_provider_errors_pass_through_unwrapped(error: Exception) -> None:
    service = UserQuestionService()
    provider = RaisingProvider(error)
    service.register_provider(provider)

    with pytest.raises(type(error)) as caught:
        await service.ask(request(CONFIRM))

    assert caught.value is error
    assert caught.value.__cause__ is None
    assert provider.calls == 1


async def test_answers_are_not_validated_against_the_questions() -> None:
    service = UserQuestionService()
    answer = AskUserQuestionAnswer(
        answers=[
            AskUserQuestionAnswerItem(id="unknown", selected=["not an option"]),
            AskUserQuestionAnswerItem(id="unknown", selected=[], custom=""),
        ]
    )

    class Fixed:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            return answer

    service.register_provider(Fixed())
    assert await service.ask(request(CONFIRM)) is answer


async def test_a_spent_disposer_never_removes_a_newer_provider() -> None:
    service = UserQuestionService()
    first, second = RecordingProvider("A"), RecordingProvider("B")
    dispose_first = service.register_provider(first)
    dispose_first()
    dispose_second = service.register_provider(second)

    dispose_first()  # spent: a no-op

    assert service.provider is second
    assert (await service.ask(request(CONFIRM))).answers[0].selected == ["B"]
    dispose_second()
    assert service.provider is None


async def test_a_failed_registration_leaves_the_first_provider_and_its_disposer_working() -> None:
    service = UserQuestionService()
    first = RecordingProvider("A")
    dispose_first = service.register_provider(first)
    with pytest.raises(UserQuestionError):
        service.register_provider(RecordingProvider("B"))

    dispose_first()

    assert service.provider is None
    third = RecordingProvider("C")
    service.register_provider(third)
    assert service.provider is third


# --- AgentRegistry --------------------------------------------------------------------------


def test_registry_enter_get_and_roots_in_registration_order() -> None:
    agents = AgentRegistry()
    first, child, second = stub_agent("first"), stub_agent("child"), stub_agent("second", 3)

    agents.enter(first)
    agents.enter(child, first)
    agents.enter(second, None)

    assert agents.get("first") is first
    assert agents.get("child") is child
    assert agents.get("nobody") is None
    roots = agents.roots()
    assert len(roots) == 2 and roots[0] is first and roots[1] is second


def test_registry_detach_is_idempotent_and_frees_the_id() -> None:
    agents = AgentRegistry()
    old = stub_agent("a")
    detach_old = agents.enter(old)

    detach_old()
    detach_old()

    assert agents.get("a") is None
    assert agents.roots() == []
    new = stub_agent("a")
    agents.enter(new)
    detach_old()  # an old detach never removes the newer entry with the same id
    assert agents.get("a") is new


def test_registry_rejects_a_duplicate_live_id() -> None:
    agents = AgentRegistry()
    live = stub_agent("dup")
    agents.enter(live)

    with pytest.raises(ValueError) as caught:
        agents.enter(stub_agent("dup"))

    assert str(caught.value) == 'agent "dup" is already registered'

    assert agents.get("dup") is live


def test_registry_rejects_an_id_that_is_not_the_session_id() -> None:
    agents = AgentRegistry()
    mismatched = StubAgent("agent-1", StubSession("session-1", StubHeader(0)))

    with pytest.raises(ValueError) as caught:
        agents.enter(mismatched)

    assert str(caught.value) == 'agent id "agent-1" does not match session id "session-1"'

    assert agents.get("agent-1") is None


async def test_a_detached_agent_can_no_longer_ask() -> None:
    agents = AgentRegistry()
    service = UserQuestionService(agents)
    service.register_provider(RecordingProvider())
    agent = stub_agent("gone")
    detach = agents.enter(agent)
    await service.ask(request(CONFIRM, agent=agent))

    detach()

    assert (await ask_error(service, request(CONFIRM, agent=agent))).code == "CALLER_NOT_LIVE"
