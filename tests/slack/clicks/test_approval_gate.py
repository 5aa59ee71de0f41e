"""Who may decide a tool-permission approval, and what a click on one gets from Slack's side.

Each test clicks a real approval message (posted by ``ask_approval`` through a real bolt
app to the Slack stand-in) with a signed payload, as Slack sends it:

- the approvers are exactly ``DSH_APPROVERS`` + ``DSH_APPROVER_USERGROUPS`` when either is
  set; the people who may answer questions only when both are unset;
- a click whose decision needs a user-group lookup is acked at once (the lookup may take
  longer than Slack's 3 seconds), and decided, or refused by a private note, afterwards;
- a click the pending store cannot take is acked 200 (over HTTP and as a Socket Mode
  envelope) with a private "not recorded" note and no traceback.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from pathlib import Path

import pytest

from adapters.slack.asks.status import QuestionStatus
from adapters.slack.clicks.bolt_app import build_app, close_web_client, web_client
from adapters.slack.model.record import ApprovalView
from adapters.slack.provider import SlackQuestionProvider
from adapters.slack.render.messages import NOT_AN_APPROVER
from adapters.slack.sandbox.records import Message
from adapters.slack.sandbox.webapi import ACK_DEADLINE, ACK_TIMEOUT, SlackStandIn
from bot.app.socket_mode import SocketMode
from bot.questions import AskOptions
from tests.slack.clicks.test_click_store_outage import FlakySqliteStore
from tests.slack_harness import FAST_LIMITS, SlackHarness, message_ts_kept, until
from tests.socket_mode_standin import SocketModeStandIn

VIEW = ApprovalView(tool_name="bash", headline="escalate sandbox", command="rm -rf /srv/x")
SLOW = 3.5
"""Seconds Slack takes to answer ``usergroups.users.list``: past the 3-second ack."""


class People:
    """The harness's users plus two more, and who is in which group."""

    def __init__(self, h: SlackHarness) -> None:
        ws = h.slack.workspace
        self.approver = h.alice  # DSH_APPROVERS
        self.lead = h.bob  # in the DSH_APPROVER_USERGROUPS group
        self.answerer = h.carol  # SLACK_ALLOWED_USERS
        self.oncall = ws.add_user("dave").id  # in the SLACK_ALLOWED_USERGROUPS group
        self.outsider = ws.add_user("erin").id
        self.leads = ws.add_usergroup("leads", [self.lead]).id
        self.answerers = ws.add_usergroup("answerers", [self.oncall]).id

    def named(self, names: tuple[str, ...]) -> set[str]:
        return {getattr(self, n) for n in names}


async def _ask(
    h: SlackHarness,
    count: int,
    approvers: list[str] | None = None,
    approver_groups: list[str] | None = None,
) -> tuple[asyncio.Future[QuestionStatus], Message]:
    """Ask for an approval; the waiter and the ``count``-th message (the approval's)."""
    asked = h.provider.ask_approval(
        VIEW, options=AskOptions(), approvers=approvers, approver_groups=approver_groups
    )
    task = asyncio.ensure_future(asked)
    h.tasks.append(task)  # type: ignore[arg-type]
    return task, await h.posted(count)


async def _refused(
    h: SlackHarness, task: asyncio.Future[QuestionStatus], message: Message, user: str
) -> None:
    """``user`` clicks Allow once on ``message``: acked, then told privately they may not."""
    before = len(h.ephemerals(user))
    status, body = await h.click(message, user, text="Allow once")
    assert status == 200, body
    await until(lambda: task.done() or h.ephemerals(user)[before:], what=f"a note for {user}")
    assert not task.done(), f"{task.result().answered_by} decided it"
    assert NOT_AN_APPROVER[:-1] in h.ephemerals(user)[-1].text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("approvers", "groups", "deciders"),
    [
        (False, False, ("answerer", "oncall")),  # unset (both): who may answer questions
        (True, False, ("approver",)),  # DSH_APPROVERS only
        (False, True, ("lead",)),  # DSH_APPROVER_USERGROUPS only
        (True, True, ("approver", "lead")),
    ],
    ids=["neither", "users-only", "groups-only", "both"],
)
async def test_exactly_the_approvers_decide(
    approvers: bool, groups: bool, deciders: tuple[str, ...]
) -> None:
    async with SlackHarness() as h:
        people = People(h)
        h.provider.defaults.allowed_users = [people.answerer]
        h.provider.defaults.allowed_usergroups = [people.answerers]
        everyone = people.named(("approver", "lead", "answerer", "oncall", "outsider"))
        allowed = people.named(deciders)
        users = [people.approver] if approvers else None
        usergroups = [people.leads] if groups else None
        for count, decider in enumerate(sorted(allowed), start=1):
            task, message = await _ask(h, count, users, usergroups)
            for user in sorted(everyone - allowed):
                await _refused(h, task, message, user)
            status, body = await h.click(message, decider, text="Reject")
            assert status == 200, body
            ended = await asyncio.wait_for(task, 10)
            assert (ended.decision, ended.answered_by) == ("rejected", decider)


@pytest.mark.slow
@pytest.mark.parametrize("member", [True, False], ids=["member", "non-member"])
async def test_a_click_needing_a_slow_group_lookup_is_acked_in_time(member: bool) -> None:
    async with SlackHarness() as h:
        people = People(h)
        slow = h.slack.faults.add(method="usergroups.users.list", kind="delay", delay=SLOW)
        task, message = await _ask(h, 1, approver_groups=[people.leads])
        clicker = people.lead if member else people.outsider
        started = time.monotonic()
        status, body = await h.click(message, clicker, text="Allow once")
        assert body != ACK_TIMEOUT, "the click missed Slack's 3 s ack"
        assert status == 200 and time.monotonic() - started < ACK_DEADLINE
        if member:
            ended = await asyncio.wait_for(task, 10)
            assert (ended.decision, ended.answered_by) == ("allowed-once", clicker)
        else:
            notes = await until(lambda: h.ephemerals(clicker), within=10)
            assert NOT_AN_APPROVER[:-1] in notes[-1].text
            assert not task.done()
        assert slow.fired == 1  # the decision did wait for Slack's slow answer


async def test_a_refused_approval_click_is_logged_with_who_and_which(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with SlackHarness() as h:
        people = People(h)
        task, message = await _ask(h, 1, [people.approver])
        with caplog.at_level(logging.INFO, logger="adapters.slack"):
            await _refused(h, task, message, people.outsider)
        refused = [r for r in caplog.records if r.getMessage().startswith("approval click refused")]
        assert [r.user for r in refused] == [people.outsider]  # type: ignore[attr-defined]
        asked = await h.provider.store.get(refused[0].request_id)  # type: ignore[attr-defined]
        assert asked is not None and asked.approval is not None


def _not_recorded(text: str) -> None:
    """The note for a click not recorded: says so, and nothing of the store's internals."""
    assert "not recorded" in text and "try again" in text, text
    assert "Redis" not in text and "store" not in text, text


@pytest.mark.slow
async def test_an_approval_click_the_store_cannot_take_is_acked_and_the_person_told(
    caplog: pytest.LogCaptureFixture, sqlite_path: Path
) -> None:
    store = FlakySqliteStore(path=sqlite_path, process_id="flaky")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            task, message = await _ask(h, 1)
            await message_ts_kept(store)  # fail only once the ask has written its post
            store.failing = True
            with caplog.at_level(logging.WARNING):
                status, _ = await h.click(message, h.alice, text="Allow once")
            store.failing = False
            assert status == 200
            note = await until(lambda: h.ephemerals(h.alice))
            _not_recorded(note[-1].text)
            assert not any(r.exc_info for r in caplog.records)
            assert "approval click not recorded" in caplog.text
            await h.click(message, h.alice, text="Allow once")  # clicked again: decided
            assert (await asyncio.wait_for(task, 10)).decision == "allowed-once"
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_store_failing_after_a_group_lookup_tells_the_person(
    caplog: pytest.LogCaptureFixture, sqlite_path: Path
) -> None:
    # The decision waits for the lookup, off the ack path; the store fails when it is written.
    store = FlakySqliteStore(path=sqlite_path, process_id="flaky")
    await store.start()
    try:
        async with SlackHarness(store=store) as h:
            people = People(h)
            h.slack.faults.add(method="usergroups.users.list", kind="delay", delay=0.5)
            task, message = await _ask(h, 1, approver_groups=[people.leads])
            await message_ts_kept(store)
            with caplog.at_level(logging.WARNING):
                status, _ = await h.click(message, people.lead, text="Allow once")
                store.failing = True  # acked before the lookup answered
                note = await until(lambda: h.ephemerals(people.lead))
            store.failing = False
            assert status == 200
            _not_recorded(note[-1].text)
            assert not any(r.exc_info for r in caplog.records)
            assert not task.done()
    finally:
        await store.close()


async def test_a_socket_mode_approval_click_the_store_cannot_take_is_acked(
    sqlite_path: Path,
) -> None:
    bot, app_token = f"xoxb-test-{secrets.token_hex(8)}", f"xapp-1-A0SANDBOX-{secrets.token_hex(8)}"
    web = SlackStandIn(token=bot)
    socket = SocketModeStandIn(app_token=app_token)
    alice = web.workspace.add_user("alice").id
    channel = web.workspace.add_channel("agents").id
    store = FlakySqliteStore(path=sqlite_path, process_id="flaky")
    await store.start()
    await socket.start()
    socket.install(web)
    await web.start()
    client = web_client(bot, base_url=web.url, limits=FAST_LIMITS)
    app = await build_app(client, signing_secret="unused")
    provider = SlackQuestionProvider(app, channel=channel, store=store)
    mode = SocketMode(app, app_token)
    task = asyncio.ensure_future(provider.ask_approval(VIEW, options=AskOptions()))
    try:
        await mode.connect()
        await socket.connected()
        message = await until(lambda: next(iter(web.workspace.messages.get(channel, [])), None))
        await message_ts_kept(store)
        store.failing = True
        envelope = await socket.send_interactive(web.click(message, user=alice, text="Reject"))
        ack = await socket.ack(envelope, within=ACK_DEADLINE)
        store.failing = False
        assert ack["envelope_id"] == envelope
        notes = await until(lambda: web.workspace.ephemerals_for(alice))
        _not_recorded(notes[-1].text)
    finally:
        task.cancel()
        await provider.aclose(grace=1.0)
        await mode.close()
        await close_web_client(client)
        await socket.stop()
        await web.stop()
        await store.close()


async def test_an_approval_decision_is_audited_with_who_decided_by_id_and_name() -> None:
    """The trail's decision event names the person (user id and display name, as Slack's
    payload gives them) and the outcome, as a question's answer does."""
    async with SlackHarness() as h:
        task, message = await _ask(h, 1, approvers=[h.alice])
        status, body = await h.click(message, h.alice, text="Allow once")
        assert status == 200, body
        ended = await asyncio.wait_for(task, 10)
        assert ended.answered_by_name == "alice"
        events = await h.provider.events(ended.id)
        decided = [e for e in events if e.kind == "answered"]
        assert len(decided) == 1, [e.kind for e in events]
        assert (decided[0].by, decided[0].by_name) == (h.alice, "alice")
        assert decided[0].detail == {"decision": "allowed-once"}
