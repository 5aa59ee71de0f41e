"""AbortController / AbortSignal, and aborting a pending ask by signal or by cancellation."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.questions import (
    AskUserQuestionAnswer,
    AskUserQuestionItem,
    AskUserQuestionRequest,
    UserQuestionService,
)
from bot.questions.abort import AbortController, AbortError, AbortSignal
from bot.questions.errors import UserQuestionError

ABORTED = "ask_user_question was aborted before the user answered"


def test_a_fresh_signal_is_not_aborted() -> None:
    signal = AbortController().signal

    assert signal.aborted is False
    assert signal.reason is None
    signal.throw_if_aborted()  # does not raise


def test_abort_defaults_the_reason_to_an_abort_error_and_happens_once() -> None:
    controller = AbortController()

    controller.abort()
    first_reason = controller.signal.reason
    controller.abort("later")

    assert controller.signal.aborted is True
    assert isinstance(first_reason, AbortError)
    assert str(first_reason) == "This operation was aborted"
    assert controller.signal.reason is first_reason


@pytest.mark.parametrize("reason", ["user left", ValueError("stop"), 0])
def test_abort_keeps_a_custom_reason(reason: object) -> None:
    controller = AbortController()

    controller.abort(reason)

    assert controller.signal.reason is reason


def test_listeners_are_called_once_with_the_reason() -> None:
    controller = AbortController()
    calls: list[tuple[str, object]] = []
    controller.signal.add_listener(lambda reason: calls.append(("first", reason)))
    controller.signal.add_listener(lambda reason: calls.append(("second", reason)))

    controller.abort("why")
    controller.abort("again")

    assert calls == [("first", "why"), ("second", "why")]


def test_a_removed_listener_is_not_called_and_removing_twice_is_harmless() -> None:
    controller = AbortController()
    calls: list[str] = []
    remove = controller.signal.add_listener(lambda _: calls.append("removed"))
    controller.signal.add_listener(lambda _: calls.append("kept"))

    remove()
    remove()
    controller.abort()

    assert calls == ["kept"]


def test_a_listener_added_after_the_abort_is_not_called() -> None:
    controller = AbortController()
    controller.abort()
    calls: list[object] = []

    controller.signal.add_listener(calls.append)

    assert calls == []


async def test_a_raising_listener_does_not_stop_the_abort(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller = AbortController()
    calls: list[object] = []

    def broken(_: object) -> None:
        raise RuntimeError("listener bug")

    controller.signal.add_listener(broken)
    controller.signal.add_listener(calls.append)
    waiter = asyncio.create_task(controller.signal.wait())
    await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="bot.questions.abort"):
        controller.abort("why")  # does not raise

    assert calls == ["why"]
    assert await asyncio.wait_for(waiter, 1) == "why"
    [record] = [r for r in caplog.records if r.name == "bot.questions.abort"]
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "listener bug"


async def test_wait_wakes_on_abort_with_the_reason() -> None:
    controller = AbortController()
    waiter = asyncio.create_task(controller.signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done()

    controller.abort("done")

    assert await asyncio.wait_for(waiter, 1) == "done"


async def test_wait_returns_at_once_on_an_aborted_signal() -> None:
    signal = AbortSignal.aborted_with("already")

    assert signal.aborted is True
    assert await asyncio.wait_for(signal.wait(), 1) == "already"


async def test_a_cancelled_wait_does_not_break_a_later_abort() -> None:
    controller = AbortController()
    waiter = asyncio.create_task(controller.signal.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter

    controller.abort()

    other = await asyncio.wait_for(controller.signal.wait(), 1)
    assert isinstance(other, AbortError)


def test_throw_if_aborted_raises_the_default_reason() -> None:
    controller = AbortController()
    controller.abort()

    with pytest.raises(AbortError) as caught:
        controller.signal.throw_if_aborted()

    assert caught.value is controller.signal.reason


def test_throw_if_aborted_raises_an_exception_reason_itself() -> None:
    controller = AbortController()
    reason = TimeoutError("deadline")
    controller.abort(reason)

    with pytest.raises(TimeoutError) as caught:
        controller.signal.throw_if_aborted()

    assert caught.value is reason


def test_throw_if_aborted_wraps_a_non_exception_reason() -> None:
    controller = AbortController()
    controller.abort("user left")

    with pytest.raises(AbortError, match=r"^user left$"):
        controller.signal.throw_if_aborted()


# --- aborting a pending ask -------------------------------------------------------------------


class SignalAwareProvider:
    """Waits for the request's signal, like the web relay, then rejects with ASK_ABORTED."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cleaned_up = False

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        assert request.signal is not None
        self.started.set()
        try:
            await request.signal.wait()
            raise UserQuestionError(ABORTED, "ASK_ABORTED")
        finally:
            self.cleaned_up = True


class ForeverProvider:
    """Never answers; records that its cleanup ran."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cleaned_up = False

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.started.set()
        try:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")
        finally:
            self.cleaned_up = True


def confirm(signal: AbortSignal | None = None) -> AskUserQuestionRequest:
    question = AskUserQuestionItem(id="confirm", question="Proceed?")
    if signal is None:
        return AskUserQuestionRequest(questions=[question])
    return AskUserQuestionRequest(questions=[question], signal=signal)


async def test_an_abort_while_pending_reaches_the_caller_as_ask_aborted() -> None:
    service = UserQuestionService()
    provider = SignalAwareProvider()
    service.register_provider(provider)
    controller = AbortController()
    pending = asyncio.create_task(service.ask(confirm(controller.signal)))
    await asyncio.wait_for(provider.started.wait(), 1)
    assert not pending.done()

    controller.abort()

    with pytest.raises(UserQuestionError) as caught:
        await asyncio.wait_for(pending, 1)
    assert (caught.value.code, caught.value.message) == ("ASK_ABORTED", ABORTED)
    assert provider.cleaned_up


async def test_cancelling_the_waiting_task_propagates_and_runs_the_provider_cleanup() -> None:
    service = UserQuestionService()
    provider = ForeverProvider()
    service.register_provider(provider)
    pending = asyncio.create_task(service.ask(confirm()))
    await asyncio.wait_for(provider.started.wait(), 1)

    pending.cancel()

    with pytest.raises(asyncio.CancelledError):
        await pending
    assert pending.cancelled()
    assert provider.cleaned_up
