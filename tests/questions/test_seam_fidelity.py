"""Where the port followed Python's defaults instead of the seam's own behaviour
(dsh-user-questions.md): error names, a caller that is no agent, JSON quoting, copies of
errors, and a DM's history the app cannot read."""

from __future__ import annotations

import copy
import pickle
import time
from typing import Any

import pydantic
import pytest

from adapters.slack import WaitReleased
from adapters.slack.asks.reconcile import adopt_predecessor
from adapters.slack.model.record import PendingRecord
from bot.questions import (
    AgentRegistry,
    AskUserQuestionAnswer,
    AskUserQuestionItem,
    AskUserQuestionRequest,
    UserQuestionError,
    UserQuestionService,
    tool,
)
from bot.questions.errors import ASK_ABORTED, CALLER_NOT_LIVE, HarnessError
from bot.questions.jsontext import stringify


class Answering:
    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return AskUserQuestionAnswer(answers=[])


def questions() -> list[AskUserQuestionItem]:
    return [AskUserQuestionItem(id="a", question="q")]


def test_a_subclass_of_user_question_error_is_named_user_question_error() -> None:
    # §5.1: UserQuestionError sets its name explicitly; a subclass keeps it.
    released = WaitReleased()
    assert released.name == "UserQuestionError"
    assert released.to_dict()["name"] == "UserQuestionError"
    assert tool.error_result(released).error["info"] == {
        "name": "UserQuestionError",
        "code": ASK_ABORTED,
    }
    assert UserQuestionError("m", ASK_ABORTED).name == "UserQuestionError"
    assert HarnessError("m", "X").name == "HarnessError"  # other errors: their class name


@pytest.mark.parametrize("agent", ["root", 7, object()], ids=["text", "number", "no id"])
async def test_a_caller_that_is_no_agent_is_not_live(agent: Any) -> None:
    # §2 #3: agents.get(agent.id) !== agent -> CALLER_NOT_LIVE (in JS "x".id is undefined)
    service = UserQuestionService(AgentRegistry())
    service.register_provider(Answering())
    request = AskUserQuestionRequest(questions=questions())
    request.agent = agent  # set after validation, as in-process code may
    with pytest.raises(UserQuestionError) as refused:
        await service.ask(request)
    assert refused.value.code == CALLER_NOT_LIVE


@pytest.mark.parametrize("agent", [{"id": "root"}, "root", 1, True, ["root"]])
def test_an_agent_key_in_wire_json_is_refused(agent: Any) -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        AskUserQuestionRequest.model_validate(
            {"questions": [{"id": "a", "question": "q"}], "agent": agent}
        )
    (error,) = refused.value.errors()
    assert error["loc"] == ("agent",) and "never part of the wire JSON" in error["msg"]


def test_an_agent_object_is_still_taken() -> None:
    class Agent:
        id = "root"

    agent = Agent()
    assert AskUserQuestionRequest(questions=questions(), agent=agent).agent is agent


@pytest.mark.parametrize("error", [UserQuestionError("m", ASK_ABORTED), WaitReleased()])
def test_an_error_survives_a_copy_and_a_pickle(error: UserQuestionError) -> None:
    for again in (copy.copy(error), copy.deepcopy(error), pickle.loads(pickle.dumps(error))):
        assert type(again) is type(error)
        assert (again.message, again.code, again.name) == (error.message, error.code, error.name)
        assert str(again) == str(error)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\ud800", '"a\\ud800"'),  # a lone surrogate: escaped, as ES2019's JSON.stringify
        ("\udfff", '"\\udfff"'),
        ("\ud83d\ude00", '"\U0001f600"'),  # a pair split over two code points: one character
        ("é/\u2028\n", '"é/\u2028\\n"'),  # the rest as JavaScript writes it
        ({"id": "a", "selected": ["x"]}, '{"id":"a","selected":["x"]}'),
    ],
)
def test_json_is_written_as_json_stringify_writes_it(value: object, expected: str) -> None:
    text = stringify(value)
    assert text == expected
    text.encode("utf-8")  # printable and loggable


async def test_a_bad_intent_message_quotes_a_lone_surrogate_as_javascript_does() -> None:
    # §2 #5: JSON.stringify(approve)
    request = AskUserQuestionRequest.model_validate(
        {
            "questions": [
                {
                    "id": "p",
                    "question": "q",
                    "detail": "d",
                    "intent": {"kind": "plan-review", "approve": "a\ud800"},
                }
            ]
        }
    )
    with pytest.raises(UserQuestionError) as refused:
        await UserQuestionService().ask(request)
    assert refused.value.message == (
        'question p declares intent plan-review whose approve label "a\\ud800" names none of '
        "its options"
    )
    refused.value.message.encode("utf-8")


class History:
    """A Web API client that records each ``conversations.history`` it is asked for."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def conversations_history(self, **fields: Any) -> dict[str, Any]:
        self.calls.append(fields)
        return {"ok": True, "messages": []}


@pytest.mark.parametrize(
    ("channel", "read"), [("U0PERSON", False), ("D0PERSON", False), ("C0AGENTS", True)]
)
async def test_a_restarted_bot_reads_no_dm_history_looking_for_its_message(
    channel: str, read: bool
) -> None:
    # A DM's history needs im:history, which the manifest does not ask for: a certain
    # failure on the post's path, rate-limited, for nothing.
    client = History()
    record = PendingRecord(
        id="0123456789abcdef0123", owner="p", channel=channel, questions=questions()
    )
    assert await adopt_predecessor(client, record, time.monotonic()) == record  # type: ignore[arg-type]
    assert bool(client.calls) is read
