"""The provider's shape: one error boundary, options on the request, listeners without a cycle."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, cast

import pytest
from slack_bolt.async_app import AsyncApp

from adapters.slack import SlackQuestionProvider
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.model.record import PendingRecord
from adapters.slack.stores import (
    DurableStore,
    MemoryPendingStore,
    PendingStore,
    StoreConflict,
    StoreUnavailable,
)
from adapters.slack.stores.redis import RedisPendingStore
from bot.questions import AskOptions, AskUserQuestionRequest
from bot.questions.errors import DELIVERY_FAILED, STORE_UNAVAILABLE, UserQuestionError
from tests.slack_harness import SlackHarness
from tests.source_tree import parse

QUESTION = {"questions": [{"id": "q", "question": "Deploy?", "options": [{"label": "Yes"}]}]}


class AlwaysLosing(MemoryPendingStore):
    """Every compare-and-set loses, as if another writer always got there first."""

    async def compare_and_set(self, record: PendingRecord, event: AuditEvent | None = None) -> bool:
        return False


@pytest.mark.slow
async def test_a_record_that_keeps_changing_fails_the_ask_with_store_unavailable() -> None:
    store: PendingStore = AlwaysLosing()
    async with SlackHarness(store=store) as h:
        task = h.ask(QUESTION)
        with pytest.raises(UserQuestionError) as info:
            await task
        assert info.value.code == STORE_UNAVAILABLE
        assert isinstance(info.value.__cause__, StoreConflict)
        assert h.provider.pending_count == 0


@pytest.mark.slow
async def test_abort_of_a_record_that_keeps_changing_raises_the_seams_error() -> None:
    store = AlwaysLosing()
    async with SlackHarness(store=store) as h:
        assert await store.create(PendingRecord(id="r1", owner="local", questions=[], channel="C"))
        with pytest.raises(UserQuestionError) as info:
            await h.provider.abort("r1", "stop")
        assert info.value.code == STORE_UNAVAILABLE


async def test_slack_refusing_the_message_is_delivery_failed_with_slacks_error() -> None:
    async with SlackHarness() as h:
        task = h.ask(QUESTION, options=AskOptions(channel="C_DOES_NOT_EXIST"))
        with pytest.raises(UserQuestionError) as info:
            await task
        assert info.value.code == DELIVERY_FAILED
        assert "channel_not_found" in info.value.message
        assert info.value.__cause__ is not None


def test_options_travel_on_the_request_and_never_on_the_wire() -> None:
    request = AskUserQuestionRequest.model_validate(QUESTION)
    request.options = AskOptions(key="k-1", label="session 1")
    assert request.to_wire() == QUESTION
    assert request.model_dump(mode="json", by_alias=True) == {
        "questions": [
            {
                "id": "q",
                "question": "Deploy?",
                "detail": None,
                "header": None,
                "options": [{"label": "Yes", "description": None}],
                "multiSelect": None,
                "intent": None,
            }
        ]
    }
    with pytest.raises(ValueError, match="instance of AskOptions"):
        AskUserQuestionRequest.model_validate({**QUESTION, "options": {"channel": "C1"}})
    with pytest.raises(ValueError, match="extra"):
        AskOptions.model_validate({"chanel": "C1"})


def test_orphan_reports_are_a_typed_store_capability() -> None:
    shared = RedisPendingStore("redis://127.0.0.1:6379/0", prefix="t-capability")
    assert isinstance(shared, DurableStore)
    assert not isinstance(MemoryPendingStore(), DurableStore)
    assert issubclass(StoreUnavailable, ConnectionError)


ROOT = Path(__file__).resolve().parents[3]


def _source(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _imports(module: str) -> set[str]:
    """The project modules ``module`` imports at module level (type-checking blocks aside)."""
    path = _source(module)
    tree = parse(path.read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # ``from package import module`` names the module
                name = f"{node.module}.{alias.name}"
                found.add(name if _source(name).exists() else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith(("adapters.", "bot."))}


def _reachable(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(_imports(module))
    return seen


@pytest.mark.slow
def test_a_click_reaches_the_handler_and_never_the_provider() -> None:
    from_listeners = _reachable("adapters.slack.clicks.handler")  # the listeners are there
    assert "adapters.slack.provider" not in from_listeners
    assert "adapters.slack.asks.lifecycle" not in from_listeners
    for module in _imports("adapters.slack.clicks.handler"):  # and nothing below leads back
        assert "adapters.slack.clicks.handler" not in _reachable(module), module
    assert "adapters.slack.clicks.handler" in _imports("adapters.slack.provider")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"channel": ""}, "channel must name"),
        ({"timeout": 0}, "timeout must be a positive"),
        ({"escalate_to": "#ops"}, "escalate_to must be a user id"),
        ({"remind": ("U0LEAD", "@ops")}, "remind must hold user ids"),
    ],
)
def test_the_provider_refuses_unusable_options_before_touching_the_app(
    options: dict[str, Any], says: str
) -> None:
    settings: dict[str, Any] = {"channel": "C1", **options}
    with pytest.raises(ValueError, match=says):
        SlackQuestionProvider(cast(AsyncApp, None), **settings)
