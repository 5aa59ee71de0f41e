"""The click and submission paths under a slow Slack or a broken store.

- A modal submission is acked within Slack's 3 s even when the group lookup it needs is
  slow, and what the person is told matches what happened: applied (on the members last
  read) or "press Send again" with nothing applied.
- "Answer…", "Other…" and the empty-Submit confirmation open their modal before the
  trigger expires, however slow the lookup; a modal Slack will not open is followed by a
  private note.
- A store failure tells the person a fixed sentence; its details (Redis address, SQLite
  path) go to the log only.
- In a form, emptying a question's free text clears it (§6.2: the web UI lets a person
  empty the box, and empty custom is omitted); a one-question text layout still refuses it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis

from adapters.slack.sandbox.webapi import ACK_TIMEOUT
from adapters.slack.stores.redis import RedisPendingStore
from tests.slack.asks.test_slack_provider import one
from tests.slack_harness import SlackHarness, until

pytestmark = pytest.mark.timeout(60)

SLOW = 3.5
"""Seconds Slack takes to answer a slow call: past the 3 s ack and trigger deadlines."""


def slow_group_lookups(h: SlackHarness, count: int = 1) -> None:
    h.slack.faults.add(method="usergroups.users.list", kind="delay", delay=SLOW, count=count)


def lookups(h: SlackHarness) -> int:
    return h.slack.calls.count("usergroups.users.list")


def view_of(h: SlackHarness, user: str) -> Any:
    return next((v for v in h.slack.workspace.views.values() if v.user == user), None)


# -- 1. a submission during a slow group lookup --------------------------------------------


@pytest.mark.slow
async def test_a_submission_during_a_slow_lookup_is_acked_and_applied_on_the_members_last_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with SlackHarness(usergroup_ttl=0.2) as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_usergroups = [group.id]
        task = h.ask(one("Release name?"))
        message = await h.posted()
        await h.click(message, h.carol, text="Answer…")
        view = await h.modal(h.carol)
        await until(lambda: lookups(h) == 1, what="the group read once")
        await asyncio.sleep(0.3)  # Carol types for longer than the group's ttl
        slow_group_lookups(h)
        with caplog.at_level(logging.INFO, logger="adapters.slack"):
            status, body = await h.slack.deliver(
                h.slack.submission(view.id, values={"aq1.text": "Orca"})
            )
        assert (status, body) != (None, ACK_TIMEOUT)
        assert status == 200 and "errors" not in body  # the modal closes: she is told it went
        assert (await asyncio.wait_for(task, 5)).answers[0].custom == "Orca"
        assert "members last read" in caplog.text


@pytest.mark.slow
async def test_a_submission_with_no_members_read_yet_asks_to_send_again_and_applies_nothing() -> (
    None
):
    async with SlackHarness() as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_usergroups = [group.id]
        task = h.ask(one("Release name?"))
        message = await h.posted()
        slow_group_lookups(h)  # the first read of the group takes 3.5 s
        await h.click(message, h.carol, text="Answer…")
        view = await h.modal(h.carol)  # opened at once, before the read
        status, body = await h.slack.deliver(
            h.slack.submission(view.id, values={"aq1.text": "Orca"})
        )
        assert status == 200, body  # acked in time
        errors = json.loads(body)["errors"]
        assert "again" in next(iter(errors.values()))
        await asyncio.sleep(0.2)
        assert not task.done()  # told "press Send again": nothing was applied
        assert view_of(h, h.carol) is not None  # the modal stays, her text in it
        await until(lambda: lookups(h) == 1, within=5, what="the slow read to end")
        status, body = await h.slack.deliver(
            h.slack.submission(view.id, values={"aq1.text": "Orca"})
        )
        assert status == 200 and "errors" not in body
        assert (await asyncio.wait_for(task, 5)).answers[0].custom == "Orca"
        assert lookups(h) == 1  # the second Send found the read the first one started


# -- 3. modals open before the trigger expires ---------------------------------------------


@pytest.mark.slow
async def test_other_in_a_form_opens_its_modal_during_a_slow_group_lookup() -> None:
    async with SlackHarness() as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_usergroups = [group.id]
        task = h.ask(one("Which targets?", ["Code", "Docs"], multiSelect=True))
        message = await h.posted()
        slow_group_lookups(h)
        status, _ = await h.click(message, h.carol, text="Other…")
        assert status == 200
        view = await h.modal(h.carol)
        assert all(c.response and c.response.get("ok") for c in h.slack.calls("views.open"))
        await until(lambda: lookups(h) == 1, within=5, what="the slow read to end")
        await h.type_into_modal(h.carol, "Changelog")
        await until(lambda: view_of(h, h.carol) is None, within=8)
        await h.click(message, h.carol, text="Submit", values={"aq1.draft": ["1"]})
        assert (await asyncio.wait_for(task, 5)).to_wire() == {
            "answers": [{"id": "q", "selected": ["Docs"], "custom": "Changelog"}]
        }
        assert view.user == h.carol


@pytest.mark.slow
async def test_an_empty_submit_opens_its_confirmation_during_a_slow_group_lookup() -> None:
    async with SlackHarness() as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_usergroups = [group.id]
        task = h.ask(one("Which targets?", ["Code", "Docs"], multiSelect=True))
        message = await h.posted()
        slow_group_lookups(h)
        await h.click(message, h.carol, text="Submit", values={"aq1.draft": []})
        view = await h.modal(h.carol)
        assert "Submit with nothing selected?" in json.dumps(view.definition)
        await asyncio.sleep(0.2)
        assert not task.done()


async def test_a_non_member_gets_the_modal_but_its_submission_is_refused() -> None:
    """The modal opened before authorization shows nothing private; the submission is
    authorized again and refused."""
    async with SlackHarness() as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_usergroups = [group.id]
        task = h.ask(one("Release name?"))
        message = await h.posted()
        await h.click(message, h.bob, text="Answer…")
        await h.modal(h.bob)
        await until(lambda: lookups(h) == 1, what="the group read")
        status, body = await h.type_into_modal(h.bob, "Mine")
        assert status == 200 and "not one of the people" in body
        await asyncio.sleep(0.1)
        assert not task.done()


@pytest.mark.slow
@pytest.mark.parametrize("cold", [False, True], ids=["cached", "cold-group-cache"])
async def test_a_modal_slack_does_not_open_is_followed_by_a_note(cold: bool) -> None:
    async with SlackHarness() as h:
        if cold:
            group = h.slack.workspace.add_usergroup("oncall", [h.carol])
            h.provider.defaults.allowed_usergroups = [group.id]
        h.ask(one("Release name?"))
        message = await h.posted()
        # views.open reaches Slack after its trigger expired
        h.slack.faults.add(method="views.open", kind="delay", delay=3.2)
        status, _ = await h.click(message, h.carol, text="Answer…")
        assert status == 200
        notes = await until(lambda: h.ephemerals(h.carol), within=8, what="a note")
        failed = [(c.response or {}).get("error") for c in h.slack.calls("views.open")]
        assert failed == ["expired_trigger_id"]
        assert "could not be opened" in notes[-1].text and "again" in notes[-1].text
        assert view_of(h, h.carol) is None


# -- 2. store errors: a fixed sentence for the person, the detail in the log ---------------


class _Relay:
    """A TCP relay in front of the test Redis that a test can cut: Redis is gone."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    async def restore(self) -> None:
        """Listen again on the same port: Redis is back (the harness stops cleanly)."""
        if self._server is None:
            await self.start()


@pytest.fixture
async def relayed_store(
    redis_url: str, store_prefix: str, redis_admin: aioredis.Redis
) -> AsyncIterator[tuple[RedisPendingStore, _Relay]]:
    """A Redis store reached through a relay the test can cut (its keys deleted after)."""
    target = urlsplit(redis_url)
    relay = _Relay(target.hostname or "127.0.0.1", target.port or 6379)
    await relay.start()
    auth = f"{target.username or ''}:{target.password}@" if target.password else ""
    url = f"redis://{auth}127.0.0.1:{relay.port}{target.path or '/0'}"
    store = RedisPendingStore(url, prefix=store_prefix, op_timeout=1.0, outage_limit=600)
    await store.start()
    try:
        yield store, relay
    finally:
        await relay.cut()
        await store.close()


def _shows_nothing_internal(text: str, relay: _Relay) -> None:
    assert str(relay.port) not in text and "127.0.0.1" not in text and "Redis" not in text
    assert "could not reach its storage" in text and "try again" in text


@pytest.mark.slow
async def test_a_store_outage_note_names_no_address_and_the_log_does(
    relayed_store: tuple[RedisPendingStore, _Relay], caplog: pytest.LogCaptureFixture
) -> None:
    store, relay = relayed_store
    async with SlackHarness(store=store, allowed_users=["U0NOBODY"]) as h:
        h.ask(one(options=["Yes", "No"]))
        message = await h.posted()
        await asyncio.sleep(0.2)
        await relay.cut()
        with caplog.at_level(logging.WARNING, logger="adapters.slack"):
            status, _ = await h.click(message, h.bob, text="Yes")  # Bob may not even answer
            notes = await until(lambda: h.ephemerals(h.bob), within=10)
        await relay.restore()
        assert status == 200
        _shows_nothing_internal(notes[-1].text, relay)
        logged = [r for r in caplog.records if r.getMessage() == "click not recorded"]
        assert logged and str(relay.port) in str(logged[-1].__dict__.get("error"))


@pytest.mark.slow
async def test_a_store_outage_modal_error_names_no_address(
    relayed_store: tuple[RedisPendingStore, _Relay], caplog: pytest.LogCaptureFixture
) -> None:
    store, relay = relayed_store
    async with SlackHarness(store=store) as h:
        task = h.ask(one("Release name?"))
        message = await h.posted()
        await h.click(message, h.alice, text="Answer…")
        await h.modal(h.alice)
        await relay.cut()
        with caplog.at_level(logging.WARNING, logger="adapters.slack"):
            status, body = await h.type_into_modal(h.alice, "Orca")
        await relay.restore()
        assert status == 200
        (error,) = json.loads(body)["errors"].values()
        _shows_nothing_internal(error, relay)
        assert not task.done()
        logged = [r for r in caplog.records if r.getMessage() == "submission not recorded"]
        assert logged and str(relay.port) in str(logged[-1].__dict__.get("error"))


# -- 4. taking back a form's free text ------------------------------------------------------


async def test_emptying_a_form_questions_saved_text_clears_it() -> None:
    request = {
        "questions": [
            {"id": "a", "question": "Profile?", "options": [{"label": "A"}, {"label": "B"}]},
            {"id": "b", "question": "Anything else?"},
        ]
    }
    async with SlackHarness() as h:
        task = h.ask(request)
        message = await h.posted()
        await h.click(message, h.alice, text="Answer…")
        status, body = await h.type_into_modal(h.alice, "Ship on Friday")
        assert status == 200 and "errors" not in body
        await until(lambda: view_of(h, h.alice) is None)
        await h.click(message, h.alice, text="Answer…")  # she changes her mind
        view = await h.modal(h.alice)
        assert view.definition["blocks"][-1]["element"]["initial_value"] == "Ship on Friday"
        status, body = await h.type_into_modal(h.alice, "  ")
        assert status == 200 and "errors" not in body
        await until(lambda: view_of(h, h.alice) is None)
        assert h.ephemerals(h.alice) == []  # saved and taken back without a note
        await h.click(message, h.alice, text="Answer…")  # the box is empty now
        view = await h.modal(h.alice)
        assert "initial_value" not in view.definition["blocks"][-1]["element"]
        block = next(b["block_id"] for b in message.blocks if b["block_id"].endswith(":0:c0"))
        await h.click(message, h.alice, text="Submit", values={(block, "aq1.draft"): "1"})
        assert (await asyncio.wait_for(task, 5)).to_wire() == {
            "answers": [{"id": "a", "selected": ["B"]}, {"id": "b", "selected": []}]
        }


@pytest.mark.slow
async def test_emptying_the_other_text_of_a_one_question_form_clears_it() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("Which targets?", ["Code", "Docs", "Tests"], multiSelect=True))
        message = await h.posted()
        await h.click(message, h.alice, text="Other…")
        await h.type_into_modal(h.alice, "Release notes")
        await until(lambda: view_of(h, h.alice) is None)
        await h.click(message, h.alice, text="Other…")
        status, body = await h.type_into_modal(h.alice, "")
        assert status == 200 and "errors" not in body
        await h.click(message, h.alice, text="Submit", values={"aq1.draft": ["0"]})
        assert (await asyncio.wait_for(task, 5)).to_wire() == {
            "answers": [{"id": "q", "selected": ["Code"]}]
        }


@pytest.mark.slow
async def test_empty_text_with_nothing_saved_and_a_text_layouts_empty_answer_are_refused() -> None:
    async with SlackHarness() as h:
        form = h.ask(one("Which targets?", ["Code", "Docs"], multiSelect=True))
        message = await h.posted()
        await h.click(message, h.alice, text="Other…")
        status, body = await h.type_into_modal(h.alice, " ")  # nothing to clear
        assert status == 200 and "Please enter an answer." in body
        text = h.ask(one("Release name?"))
        second = await h.posted(2)
        await h.click(second, h.bob, text="Answer…")
        status, body = await h.type_into_modal(h.bob, "")  # the text IS the answer
        assert status == 200 and "Please enter an answer." in body
        await asyncio.sleep(0.1)
        assert not form.done() and not text.done()


def _form_record(saved: str | None, questions: int = 2) -> Any:
    from adapters.slack.model.record import Draft, PendingRecord
    from bot.questions import AskUserQuestionItem

    items = [
        AskUserQuestionItem.model_validate(
            {
                "id": f"q{i}",
                "question": f"Question {i}?",
                "options": [{"label": "A"}, {"label": "B"}],
            }
        )
        for i in range(questions)
    ]
    drafts = {"U0ALICE": [Draft(custom=saved if i == 0 else None) for i in range(questions)]}
    return PendingRecord(
        id="0123456789abcdef0123", owner=None, channel="C0QUESTION", questions=items,
        user_drafts=drafts if saved else {},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("saved", "questions", "optional"),
    [("Use Rust", 2, True), (None, 2, False), ("Use Rust", 1, False)],
    ids=["form-with-saved-text", "form-nothing-saved", "one-question"],
)
def test_a_form_questions_saved_text_can_be_emptied_in_slack(
    saved: str | None, questions: int, optional: bool
) -> None:
    """Slack sends no empty required input: the box a form question's saved text is shown
    in is optional (with a hint how to take it back); a box whose empty Send would only be
    refused stays required, so Slack asks for text itself."""
    from adapters.slack.render.blocks.modals import TAKE_BACK_HINT, render_text_modal
    from adapters.slack.sandbox.blockcheck import check_view

    view = render_text_modal(_form_record(saved, questions), 0, "U0ALICE")
    check_view(view)
    (field,) = [block for block in view["blocks"] if block["type"] == "input"]
    assert field.get("optional", False) is optional
    assert field.get("hint", {}).get("text", "").endswith(TAKE_BACK_HINT) is optional
