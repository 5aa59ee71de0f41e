"""The Slack provider end to end: a real bolt app, the Slack stand-in, signed clicks."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from typing import Any

import pytest

from adapters.slack.asks.deadlines import Crew
from adapters.slack.asks.endings import Released
from adapters.slack.asks.waits import Waits
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.overflow import CONTINUED
from adapters.slack.render.messages import SHUTDOWN_NOTE
from adapters.slack.sandbox.blockcheck import check_message
from adapters.slack.stores import MemoryPendingStore, mutate
from bot.questions.abort import AbortController
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskOptions, AskUserQuestionAnswer
from tests.slack_harness import (
    SlackHarness,
    all_text,
    answering_elements,
    interactive_elements,
    message_ts_kept,
    until,
)
from tests.slack_payloads import click

ROLLBACK = "\u200b*\u200brollback\u200b*\u200b"
"""``*rollback*`` typed in feedback, as shown: a zero-width space each side of each ``*``,
so it reads as typed and cannot open or close bold (``outcomes.literal``)."""


def one(
    question: str = "Deploy 2.3.1?", options: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    item: dict[str, Any] = {"id": "q", "question": question, **extra}
    if options is not None:
        item["options"] = [{"label": label} for label in options]
    return {"questions": [item]}


def plan(text: str = "# Plan\n\n1. Migrate\n2. Deploy", **extra: Any) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "plan-review",
                "header": "Plan review",
                "question": "Approve this plan and leave plan mode?",
                "detail": text,
                "options": [
                    {"label": "Approve", "description": "Leave plan mode."},
                    {"label": "Keep planning", "description": "Stay in plan mode."},
                ],
                "intent": {"kind": "plan-review", "approve": "Approve"},
                **extra,
            }
        ]
    }


async def finished(h: SlackHarness, message: Any) -> Any:
    """Wait until the message has become a record with nothing that answers (a link stays)."""
    await until(lambda: not answering_elements(h.current(message).blocks), what="final record")
    return h.current(message)


def elements_of(blocks: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in interactive_elements(blocks) if e.get("type") == kind]


async def test_every_message_and_modal_is_within_block_kit_limits() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["A", "B"]))
        message = await h.posted()
        assert check_message(message.blocks, message.text) == []
        await h.click(message, h.alice, text="Other…")
        view = await h.modal(h.alice)
        from adapters.slack.sandbox.blockcheck import check_view

        assert check_view(view.definition) == []
        await h.type_into_modal(h.alice, "C")
        await task
        final = await finished(h, message)
        assert check_message(final.blocks, final.text) == []


async def test_tap_one_button_answers_and_the_record_shows_who_and_what() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Deploy", "Wait"]))
        message = await h.posted()
        buttons = elements_of(message.blocks, "button")
        assert [b["text"]["text"] for b in buttons[:2]] == ["Deploy", "Wait"]
        status, _ = await h.click(message, h.alice, text="Wait")
        assert status == 200
        answer = await asyncio.wait_for(task, 5)
        assert answer.to_wire() == {"answers": [{"id": "q", "selected": ["Wait"]}]}
        final = await finished(h, message)
        text = all_text(final.blocks)
        assert f"<@{h.alice}>" in text and "Answered" in text and "Wait" in text
        assert "<!date^" in text
        assert h.provider.pending_count == 0


async def test_long_label_is_shortened_for_display_but_answered_exactly() -> None:
    long = "L" * 120
    async with SlackHarness() as h:
        task = h.ask(one(options=[long, "short"]))
        message = await h.posted()
        shown = elements_of(message.blocks, "button")[0]["text"]["text"]
        assert len(shown) <= 75 and shown.startswith("1. L") and "…" in shown
        await h.click(message, h.alice, action_id="aq1.pick.0")
        answer = await task
        assert answer.answers[0].selected == [long]


@pytest.mark.slow
@pytest.mark.parametrize("count", [6, 100, 101, 250])
async def test_many_options_use_a_menu_and_one_choice_answers(count: int) -> None:
    labels = [f"Option {i}" for i in range(count)]
    async with SlackHarness() as h:
        task = h.ask(one(options=labels))
        message = await h.posted()
        menus = elements_of(message.blocks, "static_select")
        assert len(menus) == 1
        assert ("option_groups" in menus[0]) == (count > 100)
        await h.click(message, h.bob, action_id="aq1.pick", text=labels[-1])
        answer = await task
        assert answer.answers[0].selected == [labels[-1]]


@pytest.mark.slow
async def test_more_options_than_any_menu_holds_fails_naming_the_limit() -> None:
    async with SlackHarness() as h:
        with pytest.raises(UserQuestionError) as caught:
            await h.ask(one(options=[f"o{i}" for i in range(10_001)]))
        assert caught.value.code == "SLACK_LIMIT"
        assert "10000" in caught.value.message
        assert h.slack.calls.count("chat.postMessage") == 0
        assert h.provider.pending_count == 0


async def test_multi_select_checkboxes_with_other_text_then_submit() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("Which targets?", ["Code", "Docs", "Tests"], multiSelect=True))
        message = await h.posted()
        assert len(elements_of(message.blocks, "checkboxes")) == 1
        # ticking a box is not an answer
        await h.click(message, h.alice, action_id="aq1.draft", values={"aq1.draft": ["0", "2"]})
        await asyncio.sleep(0.05)
        assert not task.done()
        await h.click(message, h.alice, text="Other…")
        status, body = await h.type_into_modal(h.alice, "  Release notes  ")
        assert status == 200 and "errors" not in body
        # kept as Alice's own draft (the modal said so: no note to go stale); the shared
        # message is untouched (re-rendering it would reset the boxes others are ticking)
        assert h.current(message).edits == [] and h.ephemerals(h.alice) == []
        await h.click(message, h.alice, text="Submit", values={"aq1.draft": ["0", "2"]})
        answer = await task
        assert answer.to_wire() == {
            "answers": [{"id": "q", "selected": ["Code", "Tests"], "custom": "Release notes"}]
        }


async def test_multi_select_with_many_options_uses_a_multi_select_menu() -> None:
    labels = [f"t{i}" for i in range(30)]
    async with SlackHarness() as h:
        task = h.ask(one("Pick", labels, multiSelect=True))
        message = await h.posted()
        assert len(elements_of(message.blocks, "multi_static_select")) == 1
        await h.click(message, h.alice, text="Submit", values={"aq1.draft": ["3", "29"]})
        assert (await task).answers[0].selected == ["t3", "t29"]


async def test_single_select_other_replaces_the_choice() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["A", "B"]))
        message = await h.posted()
        await h.click(message, h.alice, text="Other…")
        await h.type_into_modal(h.alice, "Neither, do C")
        answer = await task
        assert answer.to_wire() == {
            "answers": [{"id": "q", "selected": [], "custom": "Neither, do C"}]
        }


async def test_blank_modal_text_is_refused_in_the_modal() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("Name?"))
        message = await h.posted()
        await h.click(message, h.alice, text="Answer…")
        status, body = await h.type_into_modal(h.alice, "   ")
        assert status == 200 and "response_action" in body and "errors" in body
        assert not task.done()
        view = await h.modal(h.alice)
        payload = h.slack.submission(view.id, values={"aq1.text": "Ada"})
        await h.slack.deliver(payload)
        assert (await task).to_wire() == {"answers": [{"id": "q", "selected": [], "custom": "Ada"}]}


async def test_header_detail_and_descriptions_are_shown() -> None:
    async with SlackHarness() as h:
        task = h.ask(
            {
                "questions": [
                    {
                        "id": "q",
                        "header": "Release",
                        "question": "Ship?",
                        "detail": "Changelog: *fast*",
                        "options": [{"label": "Yes", "description": "ship now"}, {"label": "No"}],
                    }
                ]
            }
        )
        message = await h.posted()
        text = all_text(message.blocks)
        assert "Release" in text and "Changelog: *fast*" in text and "ship now" in text
        await h.click(message, h.alice, text="Yes")
        await task


async def test_several_questions_one_submission_in_order_with_a_skip() -> None:
    request = {
        "questions": [
            {"id": "profile", "question": "Profile?", "options": [{"label": "A"}, {"label": "B"}]},
            {"id": "detail", "question": "Anything else?"},
            {
                "id": "signals",
                "question": "Signals?",
                "options": [{"label": "x"}, {"label": "y"}, {"label": "z"}],
                "multiSelect": True,
            },
        ]
    }
    async with SlackHarness() as h:
        task = h.ask(request)
        message = await h.posted()
        assert len(elements_of(message.blocks, "radio_buttons")) == 1
        assert len(elements_of(message.blocks, "checkboxes")) == 1
        block_of = {
            b["block_id"].split(":")[2]: b["block_id"]
            for b in message.blocks
            if b.get("type") == "actions" and b.get("block_id", "").startswith("aq1:")
        }
        values = {
            (block_of["0"], "aq1.draft"): "1",
            (block_of["2"], "aq1.draft"): ["0", "2"],
        }
        await h.click(message, h.carol, text="Submit", values=values)
        answer = await task
        assert answer.to_wire() == {
            "answers": [
                {"id": "profile", "selected": ["B"]},
                {"id": "detail", "selected": []},
                {"id": "signals", "selected": ["x", "z"]},
            ]
        }


async def test_question_without_options_is_answered_by_text() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("What is the release name?"))
        message = await h.posted()
        await h.click(message, h.alice, text="Answer…")
        await h.type_into_modal(h.alice, "Line one\nline two")
        answer = await task
        assert answer.answers[0].custom == "Line one\nline two"


async def test_plan_review_approve() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan())
        message = await h.posted()
        buttons = elements_of(message.blocks, "button")
        styles = {b["text"]["text"]: b.get("style") for b in buttons}
        assert styles["Approve"] == "primary" and styles["Keep planning"] == "danger"
        assert "Decline with feedback…" in styles
        assert any(b["type"] == "markdown" for b in message.blocks)
        await h.click(message, h.alice, text="Approve")
        assert (await task).to_wire() == {
            "answers": [{"id": "plan-review", "selected": ["Approve"]}]
        }


async def test_plan_review_decline_and_decline_with_feedback() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan())
        message = await h.posted()
        await h.click(message, h.alice, text="Keep planning")
        assert (await task).answers[0].selected == ["Keep planning"]

        task = h.ask(plan())
        message = await h.posted(2)
        await h.click(message, h.bob, text="Decline with feedback…")
        view = await h.modal(h.bob)
        assert view.definition["title"]["text"] == "Plan feedback"
        await h.type_into_modal(h.bob, "Add a rollback step")
        assert (await task).to_wire() == {
            "answers": [{"id": "plan-review", "selected": [], "custom": "Add a rollback step"}]
        }


async def test_a_20000_character_plan_is_shown_whole() -> None:
    paragraphs = [f"## Step {i}\n" + ("lorem ipsum dolor sit amet " * 12) for i in range(70)]
    text = "# Plan\n\n" + "\n\n".join(paragraphs)
    assert len(text) > 20_000
    async with SlackHarness() as h:
        task = h.ask(plan(text))
        message = await h.posted()
        ws = h.slack.workspace
        replies = await until(
            lambda: [
                m
                for m in ws.history(message.channel)
                if m.thread_ts == message.ts and m.ts != message.ts
            ]
        )
        await asyncio.sleep(0.05)
        replies = [
            m
            for m in ws.history(message.channel)
            if m.thread_ts == message.ts and m.ts != message.ts
        ]
        shown = [
            b["text"] for m in [message, *replies] for b in m.blocks if b["type"] == "markdown"
        ]
        joined = "".join(CONTINUED.sub("", s) for s in shown)
        assert joined == text.replace("&", "&amp;")  # every character, in order
        for m in [message, *replies]:
            assert check_message(m.blocks, m.text) == []
        await h.click(message, h.alice, text="Approve")
        await task


async def test_mrkdwn_injection_is_shown_literally() -> None:
    evil = "Ping <!channel> and <@U123> via <https://evil.example|docs> & more"
    async with SlackHarness() as h:
        task = h.ask(
            {
                "questions": [
                    {
                        "id": "q",
                        "header": evil,
                        "question": evil,
                        "detail": evil,
                        "options": [{"label": evil, "description": evil}, {"label": "no"}],
                    }
                ]
            },
            options=AskOptions(label=evil),
        )
        message = await h.posted()

        def mrkdwn_objects(value: Any) -> list[dict[str, Any]]:
            if isinstance(value, dict):
                found = [value] if value.get("type") == "mrkdwn" else []
                return found + [o for v in value.values() for o in mrkdwn_objects(v)]
            if isinstance(value, list):
                return [o for v in value for o in mrkdwn_objects(v)]
            return []

        parsed = [o["text"] for o in mrkdwn_objects(message.blocks)]
        parsed += [b["text"] for b in message.blocks if b["type"] == "markdown"]
        parsed.append(message.text)
        text = "\n".join(parsed)
        assert "<!channel>" not in text and "<@U123>" not in text and "<https://" not in text
        assert "&lt;!channel&gt;" in text and "&amp;" in text
        assert all(o.get("verbatim") is True for o in mrkdwn_objects(message.blocks))
        await h.click(message, h.alice, action_id="aq1.pick.0")
        answer = await task
        assert answer.answers[0].selected == [evil]
        final = await finished(h, message)
        parsed = [o["text"] for o in mrkdwn_objects(final.blocks)] + [final.text]
        assert "<!channel>" not in "\n".join(parsed)
        # as typed where nothing is parsed: plain text, and rich text's literal text leaves
        assert evil in all_text(final.blocks)
        assert '"type": "broadcast"' not in json.dumps(final.blocks)


async def test_double_click_and_two_people_racing_resolve_once() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Yes", "No"]))
        message = await h.posted()
        payloads = [
            h.slack.click(message, user=h.alice, text="Yes"),
            h.slack.click(message, user=h.alice, text="Yes"),
            h.slack.click(message, user=h.bob, text="No"),
        ]
        results = await asyncio.gather(*(h.slack.deliver(p) for p in payloads))
        assert all(status == 200 for status, _ in results)
        answer = await task
        winner = h.provider.store
        assert answer.answers[0].selected in (["Yes"], ["No"])
        final = await finished(h, message)
        assert all_text(final.blocks).count("Answered by") == 1
        notes = await until(lambda: h.ephemerals(h.alice) + h.ephemerals(h.bob), what="notes")
        await asyncio.sleep(0.05)
        notes = h.ephemerals(h.alice) + h.ephemerals(h.bob)
        assert len(notes) == 2
        assert all("already answered by" in n.text for n in notes)
        assert winner.watch_count == 0


async def test_unauthorized_user_gets_a_private_note_and_nothing_changes() -> None:
    async with SlackHarness(allowed_users=["U_NOBODY"]) as h:
        h.provider.defaults.allowed_users = [h.alice]
        task = h.ask(one(options=["Yes", "No"]))
        message = await h.posted()
        await h.click(message, h.bob, text="Yes")
        note = await until(lambda: h.ephemerals(h.bob), what="note")
        assert note[0].text == (
            f"You are not one of the people who can answer this question; <@{h.alice}> can."
        )
        assert not task.done()
        assert len(h.current(message).edits) == 0
        await h.click(message, h.alice, text="No")
        assert (await task).answers[0].selected == ["No"]


async def test_usergroup_membership_is_checked_at_click_time() -> None:
    async with SlackHarness() as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_usergroups = [group.id]
        h.provider.defaults.allowed_users = None
        task = h.ask(one(options=["Yes", "No"]))
        message = await h.posted()
        await h.click(message, h.alice, text="Yes")
        await until(lambda: h.ephemerals(h.alice), what="refusal")
        assert not task.done()
        await h.click(message, h.carol, text="No")
        assert (await task).answers[0].selected == ["No"]
        assert h.slack.calls.count("usergroups.users.list") == 1  # cached


async def test_abort_by_signal_updates_the_message_and_raises_ask_aborted() -> None:
    async with SlackHarness() as h:
        controller = AbortController()
        task = h.ask(one(options=["Yes"]), signal=controller.signal)
        message = await h.posted()
        late_click = h.slack.click(message, user=h.alice, text="Yes")
        controller.abort()
        with pytest.raises(UserQuestionError) as caught:
            await task
        assert caught.value.code == "ASK_ABORTED"
        final = await finished(h, message)
        assert "Cancelled" in all_text(final.blocks)
        await h.slack.deliver(late_click)  # a click after the abort
        note = await until(lambda: h.ephemerals(h.alice))
        assert "no longer open" in note[0].text
        assert h.provider.pending_count == 0


class AbortsDuringARead(MemoryPendingStore):
    """Aborts ``controller`` while the read after the post is on its way: the abort comes
    after ``wait`` checked the signal and before it listens for it."""

    def __init__(self, controller: AbortController, reason: object) -> None:
        super().__init__()
        self.controller, self.reason, self.armed = controller, reason, False

    async def get(self, request_id: str) -> PendingRecord | None:
        record = await super().get(request_id)
        if self.armed:
            self.armed = False
            self.controller.abort(self.reason)
        return record


@pytest.mark.parametrize("reason", [None, Released()], ids=["abort", "release"])
async def test_an_abort_while_the_wait_begins_is_not_lost(reason: object) -> None:
    controller = AbortController()
    store = AbortsDuringARead(controller, reason)

    def posted(_: str) -> None:
        store.armed = True

    async with SlackHarness(store=store) as h:
        task = h.ask(
            one(options=["Yes"]), signal=controller.signal, options=AskOptions(on_posted=posted)
        )
        with pytest.raises(UserQuestionError) as caught:
            async with asyncio.timeout(5):  # lost, it would wait for a click forever
                await task
        assert caught.value.code == "ASK_ABORTED"
        assert controller.signal.aborted and not store.armed
        # Aborted, the request ended; released, it stays open for whoever asks next.
        assert len(await store.open_records()) == (0 if reason is None else 1)


async def test_cancelling_the_awaiting_task_ends_the_request() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        final = await finished(h, message)
        assert "Cancelled" in all_text(final.blocks)
        assert h.provider.pending_count == 0
        assert await h.provider.store.open_records() == []


async def test_dismiss_gives_ask_cancelled() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        await h.click(message, h.alice, text="Dismiss")
        with pytest.raises(UserQuestionError) as caught:
            await task
        assert caught.value.code == "ASK_CANCELLED"
        final = await finished(h, message)
        assert "Dismissed" in all_text(final.blocks)


async def test_rate_limited_post_is_retried_then_succeeds() -> None:
    async with SlackHarness() as h:
        h.slack.faults.add(method="chat.postMessage", kind="ratelimit", count=1, retry_after=0)
        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        assert [c.status for c in h.slack.calls("chat.postMessage")][:1] == [429]
        await h.click(message, h.alice, text="Yes")
        assert (await task).answers[0].selected == ["Yes"]


async def test_delivery_failure_raises_delivery_failed_and_leaves_nothing() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Yes"]), options=AskOptions(channel="C_DOES_NOT_EXIST"))
        with pytest.raises(UserQuestionError) as caught:
            await task
        assert caught.value.code == "DELIVERY_FAILED"
        assert "channel_not_found" in caught.value.message
        assert h.provider.pending_count == 0
        assert await h.provider.store.open_records() == []


@pytest.mark.slow
async def test_a_failed_update_after_the_answer_does_not_lose_the_answer() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        h.slack.faults.add(method="chat.update", kind="server_error", count=10, status=500)
        await h.click(message, h.alice, text="Yes")
        assert (await task).answers[0].selected == ["Yes"]


async def test_a_stale_click_gets_a_polite_note_and_the_message_is_brought_up_to_date() -> None:
    async with SlackHarness() as h:
        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        stale = h.slack.click(message, user=h.alice, text="Yes")
        # the request vanishes from the store (expired), then the old button is clicked
        record = await h.provider.store.get(stale["actions"][0]["block_id"].split(":")[1])
        assert record is not None
        h.provider.store._records.clear()  # type: ignore[attr-defined]
        await h.slack.deliver(stale)
        note = await until(lambda: h.ephemerals(h.alice))
        assert "no longer open" in note[0].text
        current = await h.updated(message)
        assert not interactive_elements(current.blocks)
        task.cancel()


async def test_foreign_actions_are_ignored() -> None:
    async with SlackHarness() as h:

        @h.app.action("other_app_button")
        async def other(ack: Any) -> None:
            await ack()

        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        payload = h.slack.click(message, user=h.alice, text="Yes")
        payload["actions"][0]["action_id"] = "other_app_button"
        payload["actions"][0]["block_id"] = "someone-else"
        status, _ = await h.slack.deliver(payload)
        assert status == 200
        await asyncio.sleep(0.05)
        assert not task.done() and h.ephemerals(h.alice) == []
        task.cancel()


async def test_idempotency_key_attaches_instead_of_posting_twice() -> None:
    async with SlackHarness() as h:
        first = h.ask(one(options=["Yes"]), options=AskOptions(key="rpc-1"))
        message = await h.posted()
        second = h.ask(one(options=["Yes"]), options=AskOptions(key="rpc-1"))
        await asyncio.sleep(0.05)
        assert h.slack.calls.count("chat.postMessage") == 1
        await h.click(message, h.alice, text="Yes")
        assert (await first).to_wire() == (await second).to_wire()


async def test_timeout_fails_with_ask_timeout() -> None:
    async with SlackHarness(timeout=0.2) as h:
        task = h.ask(one(options=["Yes"]))
        message = await h.posted()
        with pytest.raises(UserQuestionError) as caught:
            await task
        assert caught.value.code == "ASK_TIMEOUT"
        final = await finished(h, message)
        assert "Timed out: no answer within 0.2 seconds." in all_text(final.blocks)
        assert final.text.startswith("Timed out")


async def test_shutdown_interrupts_pending_questions() -> None:
    async with SlackHarness() as h:
        tasks = [h.ask(one(f"Q{i}", ["Yes"])) for i in range(3)]
        await h.posted(3)
        await h.provider.aclose(grace=2.0)
        for task in tasks:
            with pytest.raises(UserQuestionError) as caught:
                await task
            assert caught.value.code == "ASK_ABORTED"
        for message in h.top_messages():
            assert "Interrupted" in all_text(h.current(message).blocks)
        assert h.provider.pending_count == 0 and h.provider.background_count == 0


@pytest.mark.slow
async def test_no_pending_entry_leaks_whatever_the_ending() -> None:
    async with SlackHarness(timeout=1.0) as h:
        controller = AbortController()
        answered = h.ask(one("a", ["Yes"]))
        aborted = h.ask(one("b", ["Yes"]), signal=controller.signal)
        dismissed = h.ask(one("c", ["Yes"]))
        timed_out = h.ask(one("d", ["Yes"]))
        await h.posted(4)
        by_question = {m.text: m for m in h.top_messages()}
        await h.click(by_question["a"], h.alice, text="Yes")
        controller.abort()
        await h.click(by_question["c"], h.alice, text="Dismiss")
        results = await asyncio.gather(
            answered, aborted, dismissed, timed_out, return_exceptions=True
        )
        codes = [getattr(r, "code", "ok") for r in results]
        assert codes == ["ok", "ASK_ABORTED", "ASK_CANCELLED", "ASK_TIMEOUT"]
        await until(lambda: h.provider.background_count == 0)
        assert h.provider.pending_count == 0
        assert h.provider.refreshing_count == 0
        assert await h.provider.store.open_records() == []


# --- issue 16: outcomes in words, names where mentions cannot render ---------------------


async def test_a_late_modal_submit_names_the_first_answerer_by_name() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("What should the project be called?"))
        message = await h.posted()
        await h.click(message, h.carol, text="Answer…")
        await h.modal(h.carol)
        await h.click(message, h.bob, text="Answer…")
        view = await h.modal(h.bob)  # opened after the ack, in the background
        await h.slack.deliver(h.slack.submission(view.id, values={"aq1.text": "Bluebird"}))
        await task
        status, body = await h.type_into_modal(h.carol, "Carol's name")
        assert status == 200
        assert json.loads(body)["errors"] == {
            next(iter(json.loads(body)["errors"])): "This question was already answered by @bob."
        }
        assert h.bob not in body  # never the raw user id


async def test_a_declined_plan_says_declined_with_the_feedback_everywhere() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan())
        message = await h.posted()
        await h.click(message, h.bob, text="Decline with feedback…")
        await h.type_into_modal(h.bob, "Phase 3 needs a *rollback* test first.")
        answer = await task
        assert answer.answers[0].custom == "Phase 3 needs a *rollback* test first."
        final = await finished(h, message)
        line = f"Declined by <@{h.bob}> — «Phase 3 needs a {ROLLBACK} test first.»"
        assert final.text.startswith(line)  # the notification; the message quotes it above
        assert "> Phase 3 needs a *rollback* test first.\n:x: Declined by" in all_text(final.blocks)
        assert "Answered" not in all_text(final.blocks) + final.text


async def test_an_approved_plan_says_approved() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan())
        message = await h.posted()
        await h.click(message, h.alice, action_id="aq1.pick.0")
        await task
        final = await finished(h, message)
        assert f"Approved by <@{h.alice}>" in all_text(final.blocks)
        assert final.text.startswith(f"Approved by <@{h.alice}>: ")


async def test_an_empty_submit_asks_first_then_the_record_says_skipped() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("Which targets?", ["Code", "Docs", "Tests"], multiSelect=True))
        message = await h.posted()
        await h.click(message, h.bob, action_id="aq1.draft", values={"aq1.draft": ["1"]})
        status, _ = await h.click(message, h.alice, text="Submit", values={"aq1.draft": []})
        assert status == 200
        view = await h.modal(h.alice)
        assert "Submit with nothing selected?" in json.dumps(view.definition)
        await asyncio.sleep(0.05)
        assert not task.done()  # nothing is sent (and Bob's pick not lost) until confirmed
        await h.slack.deliver(h.slack.submission(view.id, values={}))
        answer = await task
        assert answer.to_wire() == {"answers": [{"id": "q", "selected": []}]}
        final = await finished(h, message)
        assert f"Skipped by <@{h.alice}>" in all_text(final.blocks)


async def test_two_people_filling_one_form_each_submit_their_own_choices() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("Which targets?", ["Code", "Docs", "Tests"], multiSelect=True))
        message = await h.posted()
        await h.click(message, h.alice, action_id="aq1.draft", values={"aq1.draft": ["0"]})
        await h.click(message, h.bob, action_id="aq1.draft", values={"aq1.draft": ["1", "2"]})
        await h.click(message, h.bob, text="Other…")
        await h.type_into_modal(h.bob, "Bob's extra")
        await h.click(message, h.alice, text="Submit", values={"aq1.draft": ["0"]})
        answer = await task
        assert answer.to_wire() == {"answers": [{"id": "q", "selected": ["Code"]}]}


# --- issue 16: deadlines, reminders, escalation, link -----------------------------------


class FastClock:
    """Wall-clock time running ``speed`` times faster (a minute of schedule in 0.3 s)."""

    def __init__(self, speed: float = 200.0) -> None:
        self.speed = speed
        self._start = time.time()
        self._t0 = time.monotonic()

    def now(self) -> float:
        return self._start + (time.monotonic() - self._t0) * self.speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed)


class ManualClock:
    """Time that moves only when the test says so: ``sleep`` returns once ``advance`` passes it."""

    def __init__(self) -> None:
        self._now = time.time()
        self.sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        woken = asyncio.get_running_loop().create_future()
        self.sleepers.append((self._now + seconds, woken))
        await woken

    def advance(self, seconds: float) -> None:
        self._now += seconds
        due = [s for s in self.sleepers if s[0] <= self._now]
        self.sleepers = [s for s in self.sleepers if s[0] > self._now]
        for _, woken in due:
            if not woken.done():
                woken.set_result(None)


def replies(h: SlackHarness, message: Any) -> list[str]:
    current = h.current(message)
    return [h.slack.workspace.message(current.channel, ts).text for ts in current.replies]


async def test_a_deadline_is_shown_reminded_escalated_and_times_out() -> None:
    clock = ManualClock()
    async with SlackHarness(clock=clock, allowed_users=None) as h:
        h.provider.defaults.allowed_users = [h.alice, h.bob]
        options = AskOptions(
            timeout=60,
            reminders=(30, 10, 90),  # 90 s before a 60 s deadline: never
            escalate_after=20,
            escalate_to="S0ONCALL1",
            link="https://ci.example/runs/42",
        )
        asked = clock.now()
        task = h.ask(one("Deploy?", ["Yes", "No"]), options=options)
        message = await h.posted()
        shown = re.search(r":alarm_clock: Answer by <!date\^(\d+)\^", all_text(message.blocks))
        assert shown is not None and int(shown.group(1)) == int(asked + 60)
        (link,) = [e for e in interactive_elements(message.blocks) if e.get("url")]
        assert link["url"] == "https://ci.example/runs/42"
        await message_ts_kept(h.provider.store)  # in Slack as far as the schedule knows
        # the escalation at 20 s, the reminders at 30 and 50 s, each sent when its time comes
        for step, sent in ((20, 1), (10, 2), (20, 3)):
            await until(lambda: clock.sleepers != [], what="the schedule to wait")
            clock.advance(step)
            await until(lambda n=sent: len(replies(h, message)) == n, what=f"reply {sent}")
        await until(lambda: clock.sleepers != [], what="the schedule to wait for the deadline")
        clock.advance(10)
        with pytest.raises(UserQuestionError) as caught:
            await task
        assert caught.value.code == "ASK_TIMEOUT"
        sent = replies(h, message)
        assert len(sent) == 3, sent
        escalation, first, second = sent
        assert escalation.startswith(":rotating_light: <!subteam^S0ONCALL1>")
        for reminder in (first, second):
            assert reminder.startswith(f":alarm_clock: <@{h.alice}> <@{h.bob}> Reminder:")
            assert "Answer by <!date^" in reminder
        final = await finished(h, message)
        assert ":hourglass: Timed out: no answer within 60 seconds." in all_text(final.blocks)
        assert final.text.startswith("Timed out")


async def test_an_answer_stops_the_reminders() -> None:
    clock = ManualClock()
    async with SlackHarness(clock=clock) as h:
        options = AskOptions(timeout=60, reminders=(30,), escalate_after=20, escalate_to="U0ESC")
        task = h.ask(one("Deploy?", ["Yes", "No"]), options=options)
        message = await h.posted()
        waits = h.provider._lifecycle.waits
        await until(lambda: waits.keeper_count == 1, what="the schedule to start")
        await h.click(message, h.alice, text="Yes")
        assert (await task).answers[0].selected == ["Yes"]
        assert waits.keeper_count == 0  # forgotten as it ended
        clock.advance(120)  # past the whole schedule: the escalation, the reminder, the deadline
        await asyncio.sleep(0.2)
        assert replies(h, message) == []


LINK = "https://ci.example/runs/42?step=deploy&try=2"
LINK_TEXT = "Open the asker's page ↗"


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["answered", "cancelled", "timed out"])
async def test_the_link_stays_on_the_record_once_the_question_ends(ending: str) -> None:
    clock = FastClock()
    async with SlackHarness(clock=clock) as h:
        controller = AbortController()
        options = AskOptions(link=LINK, timeout=60 if ending == "timed out" else None)
        task = h.ask(one("Deploy?", ["Yes", "No"]), options=options, signal=controller.signal)
        message = await h.posted()
        if ending == "answered":
            await h.click(message, h.alice, text="Yes")
            assert (await task).answers[0].selected == ["Yes"]
        else:
            if ending == "cancelled":
                controller.abort()
            with pytest.raises(UserQuestionError):
                await task
        final = await finished(h, message)
        words = {"answered": "Answered by", "cancelled": "Cancelled", "timed out": "Timed out"}
        assert words[ending] in all_text(final.blocks)
        assert check_message(final.blocks, final.text) == []
        (link,) = interactive_elements(final.blocks)  # the link, and nothing that answers
        assert link["type"] == "button" and link["url"] == LINK
        assert link["text"]["type"] == "plain_text" and link["text"]["text"] == LINK_TEXT
        assert "value" not in link and "style" not in link
        # A click on it only opens the page: acknowledged, and nothing else happens.
        edits = len(h.current(message).edits)
        status, _ = await h.click(final, h.bob, text=LINK_TEXT)
        assert status == 200
        await asyncio.sleep(0.2)
        assert h.ephemerals(h.bob) == []
        assert len(h.current(message).edits) == edits


async def test_several_keepers_of_one_request_send_each_reminder_once() -> None:
    # Another process serving the same request, and one started after a restart, keep
    # its deadlines too: each reminder and the escalation is taken in the record first.
    clock = FastClock()
    async with SlackHarness(clock=clock) as h:
        options = AskOptions(
            timeout=60, reminders=(30, 10), escalate_after=20, escalate_to="U0ESC", remind=("U0L",)
        )
        task = h.ask(one("Deploy?", ["Yes", "No"]), options=options)
        message = await h.posted()
        (record,) = await h.provider.store.open_records()
        log = logging.getLogger("tests")
        p = h.provider
        crew = Crew(p.client, p.store, p._sync, p._endings, clock, log)
        others = [Waits(crew) for _ in range(3)]
        assert all(other.keep(record) for other in others)
        with pytest.raises(UserQuestionError) as caught:
            await task
        assert caught.value.code == "ASK_TIMEOUT"
        for other in others:
            await until(lambda o=other: o.keeper_count == 0, what="every schedule to end")
            await other.close()
        sent = replies(h, message)
        assert len(sent) == 3, sent  # the escalation and two reminders, once each
        ended = await h.provider.store.get(record.id)
        assert ended is not None and (ended.reminded, ended.escalated) == (2, True)


async def test_a_starting_bot_shows_an_interrupted_open_question_open_again() -> None:
    # An open question owned by no process whose message an earlier bot marked
    # "Interrupted": the bot that adopts it at start shows it open again, same message.
    async with SlackHarness() as h:
        task = h.ask(one("Deploy?", ["Yes", "No"]))
        message = await h.posted()
        (record,) = await h.provider.store.open_records()
        for _ in range(500):  # until the message's ts is in the store
            stored = await h.provider.store.get(record.id)
            if stored is not None and stored.message_ts is not None:
                break
            await asyncio.sleep(0.01)
        await h.provider.release(record.id, SHUTDOWN_NOTE)
        await until(lambda: "Interrupted" in all_text(h.current(message).blocks))

        assert len(await h.provider.resume()) == 1
        await until(lambda: "Interrupted" not in all_text(h.current(message).blocks))
        assert interactive_elements(h.current(message).blocks)
        adopted = await h.provider.store.get(record.id)
        assert adopted is not None and adopted.is_open and adopted.note is None
        await h.click(message, h.alice, text="Yes")
        assert (await task).answers[0].selected == ["Yes"]
        assert len(h.top_messages()) == 1


# --- issue 16: App Home, "Waiting for you" ------------------------------------------------


def home_of(h: SlackHarness, user: str) -> str:
    view = h.slack.workspace.home_views.get(user)
    return json.dumps(view, ensure_ascii=False) if view else ""


@pytest.mark.slow
async def test_app_home_lists_what_a_person_may_answer_and_updates_when_it_closes() -> None:
    async with SlackHarness() as h:
        anyone = h.ask(one("Ship 2.4 for everyone?", ["Yes", "No"]))
        first = await h.posted()
        h.provider.defaults.allowed_users = [h.bob]
        only_bob = h.ask(one("Rotate the keys (Bob only)?", ["Rotate", "Wait"]))
        await h.posted(2)
        h.provider.defaults.allowed_users = None

        status, _ = await h.slack.open_home(h.alice)
        assert status == 200
        await until(lambda: "Ship 2.4 for everyone?" in home_of(h, h.alice), what="alice's home")
        assert "Rotate the keys" not in home_of(h, h.alice)  # not hers to answer
        await h.slack.open_home(h.bob)
        await until(lambda: "Rotate the keys" in home_of(h, h.bob), what="bob's home")
        assert "Ship 2.4 for everyone?" in home_of(h, h.bob)
        assert "Open the question>" in home_of(h, h.bob)

        # A one-tap question answers from the Home tab with the message's own buttons.
        home = h.slack.workspace.home_views[h.alice]
        payload = click(home["blocks"], user=h.alice, button_text="Yes")
        status, _ = await h.slack.deliver(payload)
        assert status == 200
        assert (await anyone).answers[0].selected == ["Yes"]
        await finished(h, first)
        # Both Home tabs follow: the answered question is gone from each.
        await until(lambda: "Ship 2.4" not in home_of(h, h.bob), what="bob's home to update")
        await until(lambda: "Nothing is waiting" in home_of(h, h.alice), what="alice's home")
        assert "Rotate the keys" in home_of(h, h.bob)
        only_bob.cancel()


async def test_a_release_after_another_process_answered_returns_the_answer(
    sqlite_store_factory: Any,
) -> None:
    # The answer is written by another process on the same file; this one would notice it
    # at its next poll (not within this test). Released meanwhile (a stop), the waiter
    # returns the answer that came first instead of ASK_ABORTED.
    mine = await sqlite_store_factory(poll_interval=3600)
    other = await sqlite_store_factory()
    controller = AbortController()
    async with SlackHarness(store=mine) as h:
        task = h.ask(one(options=["Yes"]), signal=controller.signal)
        await h.posted()
        # Waiting on the ending or the signal (it listens for the signal only then), its post
        # placed (a placement written after the answer would write the ending here itself).
        await until(lambda: controller.signal._listeners, what="the ask waiting")
        await message_ts_kept(mine)
        (record,) = await mine.open_records()
        given = AskUserQuestionAnswer.model_validate({"answers": [{"id": "q", "selected": ["Y"]}]})
        _, written = await mutate(
            other,
            record.id,
            lambda r: r.next(
                state="answered", answer=given, answered_by=h.alice, finished_at=time.time()
            ),
        )
        assert written is not None
        await asyncio.sleep(0.05)
        assert not task.done()  # no watch fired: the ending is not known here yet
        controller.abort(Released())
        async with asyncio.timeout(5):
            answer = await task
        assert answer == given
