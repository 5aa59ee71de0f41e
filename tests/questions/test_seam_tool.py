"""The model-facing ask_user_question tool: upstream tool-ask-user.spec.ts cases, ported.

Upstream: packages/interaction/tool-ask-user/tests/tool-ask-user.spec.ts (cases 1-9; case 10,
plugin-fiber disposal, has no counterpart here), plus argument validation and rendering.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema  # type: ignore[import-untyped]
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
from bot.questions.tool import (
    DESCRIPTION,
    PARAMETERS,
    SCHEMA,
    TOOL_NAME,
    ToolResult,
    execute,
    to_request,
)
from tests.seam_stubs import stub_agent

DELEGATED = (
    "human interaction is unavailable while the calling agent is owned by another live agent; "
    "include the unresolved question or decision in the child agent's final result"
)


@dataclass
class Provider:
    """Returns ``answers`` (wire JSON) and records every request."""

    answers: list[dict[str, Any]]
    seen: list[AskUserQuestionRequest] = field(default_factory=list)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.seen.append(request)
        return AskUserQuestionAnswer.model_validate({"answers": self.answers})


def with_provider(answers: list[dict[str, Any]]) -> tuple[UserQuestionService, Provider]:
    service = UserQuestionService(AgentRegistry())
    provider = Provider(answers)
    service.register_provider(provider)
    return service, provider


CONTINUE: dict[str, Any] = {"questions": [{"id": "continue", "question": "Continue?"}]}


# --- 1. schema ------------------------------------------------------------------------------


def test_registers_a_model_facing_tool_schema() -> None:
    assert TOOL_NAME == "ask_user_question"
    assert SCHEMA == {"name": TOOL_NAME, "description": DESCRIPTION, "parameters": PARAMETERS}
    assert DESCRIPTION == (
        "Ask the user a concise question when you need confirmation, a choice, or missing "
        "information before proceeding. Send one or more questions, each with a stable id "
        "that will be echoed in the answer."
    )
    assert PARAMETERS["type"] == "object"
    assert PARAMETERS["required"] == ["questions"]
    questions = PARAMETERS["properties"]["questions"]
    assert questions["type"] == "array"
    assert "minItems" not in questions  # an empty batch reaches the service
    item = questions["items"]
    assert item["type"] == "object"
    assert item["additionalProperties"] is True
    assert item["required"] == ["id", "question"]
    assert {name: spec["type"] for name, spec in item["properties"].items()} == {
        "id": "string",
        "question": "string",
        "header": "string",
        "options": "array",
        "multi_select": "boolean",
    }
    option = item["properties"]["options"]["items"]
    assert option["additionalProperties"] is True
    assert option["required"] == ["label"]
    assert {name: spec["type"] for name, spec in option["properties"].items()} == {
        "label": "string",
        "description": "string",
    }
    assert item["properties"]["options"]["description"] == (
        "Optional choices to show the user. If you recommend one, put it first and append "
        '"(Recommended)" to that label.'
    )
    for absent in ("value", "recommended", "preview"):
        assert absent not in option["properties"]
    for absent in ("detail", "intent", "multiSelect"):
        assert absent not in item["properties"]
    jsonschema.Draft202012Validator.check_schema(PARAMETERS)
    json.dumps(SCHEMA)  # plain JSON


# --- 2-4. asking and rendering --------------------------------------------------------------


async def test_asks_the_provider_and_projects_structured_answers_to_text() -> None:
    service, provider = with_provider([{"id": "pkg", "selected": ["pnpm"]}])
    args = {
        "questions": [
            {
                "id": "pkg",
                "question": "Which package manager should I use?",
                "options": [{"label": "pnpm", "description": "Use pnpm workspaces."}],
            }
        ]
    }

    result = await execute(service, args)

    assert result == ToolResult(
        is_error=False,
        content=[{"type": "text", "text": '{"answers":[{"id":"pkg","selected":["pnpm"]}]}'}],
        value={"answers": [{"id": "pkg", "selected": ["pnpm"]}]},
        error=None,
    )
    assert [seen.to_wire() for seen in provider.seen] == [args]
    assert result.to_dict() == {
        "content": [{"type": "text", "text": '{"answers":[{"id":"pkg","selected":["pnpm"]}]}'}],
        "isError": False,
        "value": {"answers": [{"id": "pkg", "selected": ["pnpm"]}]},
    }


async def test_passes_recommended_option_labels_through_without_adding_schema_fields() -> None:
    service, provider = with_provider([{"id": "pkg", "selected": ["pnpm (Recommended)"]}])
    options = [{"label": "pnpm (Recommended)"}, {"label": "npm"}]

    result = await execute(
        service, {"questions": [{"id": "pkg", "question": "Which?", "options": options}]}
    )

    assert provider.seen[0].to_wire()["questions"][0]["options"] == options
    assert result.text == '{"answers":[{"id":"pkg","selected":["pnpm (Recommended)"]}]}'


async def test_projects_custom_answers_and_multi_select_choices() -> None:
    answers = [
        {"id": "targets", "selected": ["tests", "docs"], "custom": "release notes"},
        {"id": "labels-only", "selected": ["tests"]},
        {"id": "notes", "selected": [], "custom": "ship today"},
    ]
    service, provider = with_provider(answers)
    both = [{"label": "tests"}, {"label": "docs"}]

    result = await execute(
        service,
        {
            "questions": [
                {
                    "id": "targets",
                    "question": "What should I update?",
                    "options": both,
                    "multi_select": True,
                },
                {
                    "id": "labels-only",
                    "question": "Which labels should I keep?",
                    "options": both,
                    "multi_select": True,
                },
                {"id": "notes", "question": "Any note?"},
            ]
        },
    )

    assert result.is_error is False
    assert result.value == {"answers": answers}
    assert result.content == [
        {
            "type": "text",
            "text": '{"answers":[{"id":"targets","selected":["tests","docs"],'
            '"custom":"release notes"},{"id":"labels-only","selected":["tests"]},'
            '{"id":"notes","selected":[],"custom":"ship today"}]}',
        }
    ]
    assert provider.seen[0].to_wire() == {
        "questions": [
            {
                "id": "targets",
                "question": "What should I update?",
                "options": both,
                "multiSelect": True,
            },
            {
                "id": "labels-only",
                "question": "Which labels should I keep?",
                "options": both,
                "multiSelect": True,
            },
            {"id": "notes", "question": "Any note?"},
        ]
    }


# --- 5-6. signal, header, agent ---------------------------------------------------------------


async def test_passes_the_tool_abort_signal_to_the_user_questions_request() -> None:
    service, provider = with_provider([{"id": "continue", "selected": ["ok"]}])
    controller = AbortController()

    await execute(service, CONTINUE, signal=controller.signal)
    await execute(service, CONTINUE)

    assert provider.seen[0].signal is controller.signal
    assert provider.seen[1].signal is None
    assert "signal" not in provider.seen[1].model_fields_set


async def test_passes_optional_header_and_a_resumed_runtime_root_through() -> None:
    agents = AgentRegistry()
    service = UserQuestionService(agents)
    provider = Provider([{"id": "continue", "selected": ["ok"]}])
    service.register_provider(provider)
    agent = stub_agent("resumed-root", 1)
    agents.enter(agent, None)
    args = {"questions": [{"id": "continue", "header": "Confirm", "question": "Continue?"}]}

    result = await execute(service, args, agent=agent)

    assert result.content == [
        {"type": "text", "text": '{"answers":[{"id":"continue","selected":["ok"]}]}'}
    ]
    assert provider.seen[0].to_wire() == args
    assert provider.seen[0].agent is agent


async def test_leaves_the_agent_out_when_none_is_given() -> None:
    service, provider = with_provider([{"id": "continue", "selected": ["ok"]}])

    await execute(service, CONTINUE)

    assert provider.seen[0].agent is None
    assert provider.seen[0].model_fields_set == {"questions"}


# --- 7-9. structured errors --------------------------------------------------------------------


async def test_returns_structured_user_questions_errors_through_tool_execution() -> None:
    result = await execute(UserQuestionService(), CONTINUE)

    assert result == ToolResult(
        is_error=True,
        content=[{"type": "text", "text": "Error: no user-questions provider is registered"}],
        value=None,
        error={
            "message": "no user-questions provider is registered",
            "info": {"name": "UserQuestionError", "code": "NO_PROVIDER"},
        },
    )
    assert result.to_dict() == {
        "content": result.content,
        "isError": True,
        "error": result.error,
    }


async def test_rejects_a_live_runtime_owned_agent_with_a_structured_delegated_caller_error() -> (
    None
):
    agents = AgentRegistry()
    service = UserQuestionService(agents)
    provider = Provider([{"id": "continue", "selected": ["ok"]}])
    service.register_provider(provider)
    root, child = stub_agent("root"), stub_agent("child")
    agents.enter(root, None)
    agents.enter(child, root)

    result = await execute(service, CONTINUE, agent=child)

    assert result.is_error is True
    assert result.error == {
        "message": DELEGATED,
        "info": {"name": "UserQuestionError", "code": "DELEGATED_CALLER"},
    }
    assert result.content == [{"type": "text", "text": f"Error: {DELEGATED}"}]
    assert provider.seen == []


async def test_returns_a_structured_error_for_empty_question_batches() -> None:
    result = await execute(UserQuestionService(), {"questions": []})  # no provider registered

    assert result.is_error is True
    assert result.error == {
        "message": "ask_user_question requires at least one question",
        "info": {"name": "UserQuestionError", "code": "EMPTY_QUESTIONS"},
    }


async def test_an_aborted_signal_is_a_structured_ask_aborted_error() -> None:
    service, provider = with_provider([{"id": "continue", "selected": ["ok"]}])
    controller = AbortController()
    controller.abort()

    result = await execute(service, CONTINUE, signal=controller.signal)

    assert result.error is not None
    assert result.error["info"] == {"name": "UserQuestionError", "code": "ASK_ABORTED"}
    assert result.text == "Error: ask_user_question was aborted before the user answered"
    assert provider.seen == []


async def test_a_provider_user_question_error_keeps_its_code() -> None:
    class Cancelling:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            raise UserQuestionError("the user cancelled ask_user_question", "ASK_CANCELLED")

    service = UserQuestionService()
    service.register_provider(Cancelling())

    result = await execute(service, CONTINUE)

    assert result.error == {
        "message": "the user cancelled ask_user_question",
        "info": {"name": "UserQuestionError", "code": "ASK_CANCELLED"},
    }
    assert result.text == "Error: the user cancelled ask_user_question"


async def test_a_plain_provider_error_has_no_info() -> None:
    class Broken:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            raise RuntimeError("review aborted")

    service = UserQuestionService()
    service.register_provider(Broken())

    result = await execute(service, CONTINUE)

    assert result == ToolResult(
        is_error=True,
        content=[{"type": "text", "text": "Error: review aborted"}],
        error={"message": "review aborted"},
    )


# --- invalid arguments ------------------------------------------------------------------------

INVALID_ARGS: list[tuple[object, str]] = [
    (None, "<root>"),
    ('{"questions": []}', "<root>"),
    ([], "<root>"),
    ({}, "questions"),
    ({"questions": {}}, "questions"),
    ({"questions": [{"question": "q"}]}, "questions.0.id"),
    ({"questions": [{"id": 7, "question": "q"}]}, "questions.0.id"),
    ({"questions": [{"id": "a"}]}, "questions.0.question"),
    ({"questions": [{"id": "a", "question": "q", "header": None}]}, "questions.0.header"),
    ({"questions": [{"id": "a", "question": "q", "options": "a, b"}]}, "questions.0.options"),
    (
        {"questions": [{"id": "a", "question": "q", "options": [{"label": "x"}, {"label": 1}]}]},
        "questions.0.options.1.label",
    ),
    (
        {"questions": [{"id": "a", "question": "q", "options": [{"description": "d"}]}]},
        "questions.0.options.0.label",
    ),
    (
        {"questions": [{"id": "a", "question": "q", "multi_select": "yes"}]},
        "questions.0.multi_select",
    ),
    ({"questions": [{"id": "a", "question": "q", "multi_select": 1}]}, "questions.0.multi_select"),
    ({"questions": ["Continue?"]}, "questions.0"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "path"), INVALID_ARGS)
async def test_invalid_arguments_are_an_error_result_naming_the_field(
    args: object, path: str
) -> None:
    service, provider = with_provider([{"id": "a", "selected": []}])

    result = await execute(service, args)

    assert result.is_error is True
    assert result.value is None
    assert result.error is not None
    assert result.error["info"] == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    message = result.error["message"]
    assert message.startswith("invalid arguments: ")
    assert f" {path}: " in message
    assert result.text == f"Error: {message}"
    assert provider.seen == []


@pytest.mark.parametrize(("args", "path"), INVALID_ARGS)
def test_the_schema_the_model_sees_rejects_the_same_arguments(args: object, path: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, PARAMETERS)


VALID_ARGS: list[dict[str, Any]] = [
    {"questions": []},
    CONTINUE,
    {"questions": [{"id": "", "question": ""}]},
    {"questions": [{"id": "a", "question": "q", "options": [], "multi_select": False}]},
    {"questions": [{"id": "a", "question": "q", "detail": "# Plan", "intent": {"kind": "x"}}]},
    {"questions": [{"id": "a", "question": "q", "options": [{"label": "x", "value": 1}]}]},
    {"questions": [{"id": "a", "question": "q"}], "unrelated": True},
]


@pytest.mark.parametrize("args", VALID_ARGS)
async def test_arguments_the_schema_accepts_are_accepted(args: dict[str, Any]) -> None:
    jsonschema.validate(args, PARAMETERS)

    request = to_request(args)

    assert len(request.questions) == len(args["questions"])


async def test_keys_the_schema_does_not_name_are_not_forwarded() -> None:
    service, provider = with_provider([{"id": "a", "selected": ["x"]}])
    args = {
        "questions": [
            {
                "id": "a",
                "question": "q",
                "detail": "# Not a plan the model may set",
                "intent": {"kind": "plan-review", "approve": "x"},
                "options": [{"label": "x", "value": 1, "recommended": True}],
            }
        ]
    }

    result = await execute(service, args)

    assert result.is_error is False
    assert provider.seen[0].to_wire() == {
        "questions": [{"id": "a", "question": "q", "options": [{"label": "x"}]}]
    }


async def test_multi_select_false_is_passed_as_given() -> None:
    request = to_request({"questions": [{"id": "a", "question": "q", "multi_select": False}]})

    assert request.to_wire() == {"questions": [{"id": "a", "question": "q", "multiSelect": False}]}


# --- rendering ---------------------------------------------------------------------------------


async def test_non_ascii_output_is_not_escaped() -> None:
    service, _ = with_provider(
        [
            {"id": "profile", "selected": ["工程落地型 (Recommended)"]},
            {
                "id": "signals",
                "selected": ["系统设计", "代码质量"],
                "custom": '沟通能力 — «ok» "q"',
            },
        ]
    )

    result = await execute(
        service,
        {
            "questions": [
                {"id": "profile", "question": "类型？"},
                {"id": "signals", "question": "信号？", "multi_select": True},
            ]
        },
    )

    assert result.text == (
        '{"answers":[{"id":"profile","selected":["工程落地型 (Recommended)"]},'
        '{"id":"signals","selected":["系统设计","代码质量"],"custom":"沟通能力 — «ok» \\"q\\""}]}'
    )
    assert json.loads(result.text) == result.value


async def test_answers_are_copied_as_is_without_filtering() -> None:
    answers = [
        {"id": "unknown", "selected": ["not offered"]},
        {"id": "continue", "selected": []},
        {"id": "continue", "selected": ["b", "a"], "custom": ""},
    ]
    service, _ = with_provider(answers)

    result = await execute(service, CONTINUE)

    assert result.value == {"answers": answers}


async def test_a_custom_of_none_is_left_out() -> None:
    class NoneCustom:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            item = AskUserQuestionAnswerItem(id="continue", selected=["ok"], custom=None)
            return AskUserQuestionAnswer(answers=[item])

    service = UserQuestionService()
    service.register_provider(NoneCustom())

    result = await execute(service, CONTINUE)

    assert result.text == '{"answers":[{"id":"continue","selected":["ok"]}]}'


async def test_an_answer_that_breaks_the_output_schema_is_an_error_result() -> None:
    class Malformed:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            item = AskUserQuestionAnswerItem.model_construct(id="continue", selected=[1])  # type: ignore[list-item]
            return AskUserQuestionAnswer.model_construct(answers=[item])

    service = UserQuestionService()
    service.register_provider(Malformed())

    result = await execute(service, CONTINUE)

    assert result.error is not None
    assert result.error["info"] == {"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}
    assert result.error["message"].startswith("invalid tool output: answers.0.selected.0: ")


async def test_an_answer_of_the_wrong_type_is_an_error_result() -> None:
    class Untyped:
        async def ask(self, request: AskUserQuestionRequest) -> Any:
            return [{"id": "continue", "selected": ["ok"]}]

    service = UserQuestionService()
    service.register_provider(Untyped())

    result = await execute(service, CONTINUE)

    assert result.error is not None
    assert result.error["info"] == {"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}
    assert result.text == (
        "Error: invalid tool output: <root>: expected an AskUserQuestionAnswer, got list"
    )


async def test_a_plain_object_of_the_answers_shape_is_read_as_upstream_reads_it() -> None:
    # Upstream reads ``result.answers`` of whatever the provider resolves; only what breaks
    # the output schema is a ToolOutputError (dsh-user-questions.md §5.3).
    class PlainObject:
        async def ask(self, request: AskUserQuestionRequest) -> Any:
            return {"answers": [{"id": "continue", "selected": ["ok"], "custom": "soon"}]}

    class BrokenObject:
        async def ask(self, request: AskUserQuestionRequest) -> Any:
            return {"answers": [{"id": "continue", "selected": "ok"}]}

    plain = UserQuestionService()
    plain.register_provider(PlainObject())
    result = await execute(plain, CONTINUE)
    assert not result.is_error
    assert result.text == '{"answers":[{"id":"continue","selected":["ok"],"custom":"soon"}]}'

    broken = UserQuestionService()
    broken.register_provider(BrokenObject())
    result = await execute(broken, CONTINUE)
    assert result.error is not None
    assert result.error["info"] == {"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}
    assert result.error["message"].startswith("invalid tool output: answers.0.selected: ")


async def test_a_provider_whose_ask_returns_without_a_coroutine_is_awaited_as_js_would() -> None:
    class Synchronous:
        def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            return AskUserQuestionAnswer.model_validate(
                {"answers": [{"id": "continue", "selected": ["ok"]}]}
            )

    service = UserQuestionService()
    service.register_provider(Synchronous())  # type: ignore[arg-type]
    answer = await service.ask(AskUserQuestionRequest.model_validate(CONTINUE))
    assert [item.selected for item in answer.answers] == [["ok"]]


# --- cancellation ------------------------------------------------------------------------------


async def test_cancellation_propagates_out_of_execute() -> None:
    started = asyncio.Event()
    cleaned_up: list[bool] = []

    class Forever:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            started.set()
            try:
                await asyncio.Event().wait()
                raise AssertionError("unreachable")
            finally:
                cleaned_up.append(True)

    service = UserQuestionService()
    service.register_provider(Forever())
    call = asyncio.create_task(execute(service, CONTINUE))
    await asyncio.wait_for(started.wait(), 1)

    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    assert cleaned_up == [True]


# --- the registry's cancellation rule (dsh-user-questions.md §5.2) ---------------------------


async def test_an_answer_that_arrives_after_the_abort_becomes_the_cancellation_result() -> None:
    controller = AbortController()

    class AnswersAfterTheAbort:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            controller.abort()
            return AskUserQuestionAnswer.model_validate({"answers": [{"id": "a", "selected": []}]})

    service = UserQuestionService(AgentRegistry())
    service.register_provider(AnswersAfterTheAbort())
    args = {"questions": [{"id": "a", "question": "Go?"}]}
    result = await execute(service, args, signal=controller.signal)
    assert result.is_error
    assert result.content == [{"type": "text", "text": "Error: tool call aborted"}]
    assert result.error == {
        "message": "tool call aborted",
        "info": {"name": "AbortError", "code": "ABORTED"},
    }
    assert result.value is None


async def test_an_error_after_the_abort_is_kept_as_it_is() -> None:
    controller = AbortController()

    class AbortsTheAsk:
        async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
            controller.abort()
            raise UserQuestionError("ask_user_question was aborted", "ASK_ABORTED")

    service = UserQuestionService(AgentRegistry())
    service.register_provider(AbortsTheAsk())
    result = await execute(
        service, {"questions": [{"id": "a", "question": "Go?"}]}, signal=controller.signal
    )
    assert result.error == {
        "message": "ask_user_question was aborted",
        "info": {"name": "UserQuestionError", "code": "ASK_ABORTED"},
    }
