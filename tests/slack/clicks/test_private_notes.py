"""Private notes reach the person who clicked, even where the bot may not post ephemerals.

The bot posts in public channels it was not invited to (``chat:write.public``), but Slack
refuses ``chat.postEphemeral`` there (``not_in_channel``). A click's payload carries a
``response_url``, which Slack takes whatever the bot's membership (slack-platform.md §2.1):
a note for a click goes there (``response_type: ephemeral``, ``replace_original: false``),
and through ``chat.postEphemeral`` only when the interaction had none or the
``response_url`` failed. A modal's submission has none of its own: the modal carries the
one of the click that opened it. A ``response_url`` that is not Slack's (nor, in tests, the
stand-in's own) is never POSTed to. Every test runs a real bolt app against the stand-in.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from aiohttp import web

from adapters.slack.blockkit import MAX_EXTERNAL_ID, MAX_PRIVATE_METADATA
from adapters.slack.model import ids
from adapters.slack.model.interactions import parse_block_actions, parse_view_submission
from adapters.slack.model.record import ApprovalView
from adapters.slack.render.blocks.modals import render_skip_modal, render_text_modal
from adapters.slack.render.messages import (
    MODAL_NOT_OPENED,
    NOT_ALLOWED,
    NOT_AN_APPROVER,
    NOT_CHECKED,
)
from adapters.slack.sandbox.blockcheck import check_view
from adapters.slack.sandbox.records import Ephemeral
from bot.questions import AskOptions
from tests.slack.asks.test_slack_provider import one
from tests.slack.clicks.test_click_paths import slow_group_lookups
from tests.slack.clicks.test_slack_transitions import opts, record
from tests.slack_harness import SlackHarness, until
from tests.slack_payloads import click, submit_view


def refused(note: str, who: str) -> str:
    """The private note refusing a click, naming who can act instead."""
    return f"{note[:-1]}; {who} can."


RESPONSE_URL_OF_A_CLICK = "https://hooks.slack.com/actions/T0TEAM/1234567890123/abcDEF0123"
VIEW = ApprovalView(tool_name="bash", headline="escalate sandbox", command="rm -rf /srv/x")


def uninvited(h: SlackHarness) -> str:
    """A public channel everyone but the bot is in: posts need ``chat:write.public``."""
    people = [h.alice, h.bob, h.carol]
    return h.slack.workspace.add_channel("uninvited", members=people).id


async def note_for(h: SlackHarness, user: str) -> Ephemeral:
    """The one private note ``user`` sees (waits for it)."""
    await until(lambda: h.ephemerals(user), what=f"a note for {user}")
    notes = h.ephemerals(user)
    assert len(notes) == 1, [n.text for n in notes]
    return notes[0]


def hook_calls(h: SlackHarness) -> list[dict[str, Any]]:
    """The bodies the bot POSTed to ``response_url``s, with Slack's answers' status."""
    return [{**c.params, "status": c.status} for c in h.slack.calls("response_url")]


# --- notes for clicks: through the click's response_url --------------------------------


async def test_a_not_allowed_clicker_in_an_uninvited_public_channel_is_told() -> None:
    async with SlackHarness() as h:
        h.provider.defaults.allowed_users = [h.alice]
        public = uninvited(h)
        task = h.ask(one(options=["Deploy", "Wait"]), options=AskOptions(channel=public))
        message = await h.posted(channel=public)
        status, _ = await h.click(message, h.bob, text="Deploy")
        assert status == 200
        note = await note_for(h, h.bob)
        assert (note.text, note.channel) == (refused(NOT_ALLOWED, f"<@{h.alice}>"), public)
        [sent] = hook_calls(h)
        assert sent["response_type"] == "ephemeral" and sent["replace_original"] is False
        assert sent["status"] == 200
        assert h.slack.calls.count("chat.postEphemeral") == 0
        assert h.current(message).edits == [] and not task.done()


@pytest.mark.slow
async def test_an_allowed_persons_note_on_a_click_arrives_by_response_url() -> None:
    """Alice may answer; "Other…" cannot open its modal (Slack refuses ``views.open``): she
    is told, in a channel the bot was not invited to."""
    async with SlackHarness() as h:
        h.provider.defaults.allowed_users = [h.alice]
        public = uninvited(h)
        h.ask(one(options=["Deploy", "Wait"]), options=AskOptions(channel=public))
        message = await h.posted(channel=public)
        h.slack.faults.add(method="views.open", kind="server_error", count=5)
        await h.click(message, h.alice, text="Other…")
        note = await note_for(h, h.alice)
        assert note.text == MODAL_NOT_OPENED
        assert [c["status"] for c in hook_calls(h)] == [200]
        assert h.slack.calls.count("chat.postEphemeral") == 0


async def test_an_approval_refusal_in_an_uninvited_public_channel_is_told() -> None:
    async with SlackHarness() as h:
        public = uninvited(h)
        asked = h.provider.ask_approval(
            VIEW, options=AskOptions(channel=public), approvers=[h.alice]
        )
        task = asyncio.ensure_future(asked)
        h.tasks.append(task)  # type: ignore[arg-type]
        message = await h.posted(channel=public)
        status, _ = await h.click(message, h.bob, text="Allow once")
        assert status == 200
        note = await note_for(h, h.bob)
        assert note.text == refused(NOT_AN_APPROVER, f"<@{h.alice}>")
        assert [c["response_type"] for c in hook_calls(h)] == ["ephemeral"]
        assert h.slack.calls.count("chat.postEphemeral") == 0
        assert not task.done()


async def test_a_failing_response_url_falls_back_to_chat_post_ephemeral() -> None:
    async with SlackHarness() as h:
        h.provider.defaults.allowed_users = [h.alice]
        h.ask(one(options=["Deploy", "Wait"]))  # the harness's channel: the bot is in it
        message = await h.posted()
        h.slack.faults.add(method="response_url", kind="server_error", status=503)
        await h.click(message, h.bob, text="Deploy")
        note = await note_for(h, h.bob)
        assert note.text == refused(NOT_ALLOWED, f"<@{h.alice}>")
        assert [c["status"] for c in hook_calls(h)] == [503]
        assert h.slack.calls.count("chat.postEphemeral") == 1


# --- notes for modal submissions: the response_url of the click that opened the modal --


async def test_a_modal_submission_refusal_in_an_uninvited_channel_is_told() -> None:
    """Bob is not in the group that may answer; his empty Submit opens its confirmation
    before the group is read (the trigger expires in 3 s); his confirmation is refused. A
    submission has no ``response_url`` of its own: the note goes to the one of his Submit
    click, which the modal carried, so it arrives where the bot was not invited."""
    async with SlackHarness() as h:
        group = h.slack.workspace.add_usergroup("oncall", [h.carol])
        h.provider.defaults.allowed_users = None
        h.provider.defaults.allowed_usergroups = [group.id]
        public = uninvited(h)
        task = h.ask(
            one("Which targets?", ["Code", "Docs"], multiSelect=True),
            options=AskOptions(channel=public),
        )
        message = await h.posted(channel=public)
        await h.click(message, h.bob, text="Submit", values={"aq1.draft": []})
        view = await h.modal(h.bob)
        submission = h.slack.submission(view.id, values={})
        assert "response_url" not in submission and submission["response_urls"] == []
        # the release before this one reads the same metadata (rolling deploys)
        assert old_parse_private_metadata(submission["view"]["private_metadata"]) is not None
        assert ids.parse_external_id(submission["view"]["external_id"]) is not None
        status, _ = await h.slack.deliver(submission)
        assert status == 200
        note = await note_for(h, h.bob)
        assert (note.text, note.channel) == (
            refused(NOT_ALLOWED, f"members of <!subteam^{group.id}>"),
            public,
        )
        assert [(c["response_type"], c["status"]) for c in hook_calls(h)] == [("ephemeral", 200)]
        assert h.slack.calls.count("chat.postEphemeral") == 0
        assert not task.done()


def answerable_by_a_group(h: SlackHarness) -> None:
    """Only the group holding alice may answer: an empty Submit from anyone else opens its
    confirmation before the group is read (see the test above), which is then refused."""
    group = h.slack.workspace.add_usergroup("oncall", [h.alice])
    h.provider.defaults.allowed_users = None
    h.provider.defaults.allowed_usergroups = [group.id]


async def skip_modal(h: SlackHarness, message: Any, user: str) -> Any:
    """``user``'s empty Submit on ``message``: the confirmation modal it opens."""
    await h.click(message, user, text="Submit", values={"aq1.draft": []})
    return await h.modal(user)


async def test_a_saved_draft_leaves_no_note_the_modal_says_what_save_does() -> None:
    async with SlackHarness() as h:
        task = h.ask(one("Which targets?", ["Code", "Docs"], multiSelect=True))
        message = await h.posted()
        await h.click(message, h.alice, text="Other…")
        view = await h.modal(h.alice)
        assert view.definition["submit"]["text"] == "Save"
        said = view.definition["blocks"][-1]["hint"]["text"]
        assert said.startswith("Only you see this until you press Submit on the message")
        status, body = await h.type_into_modal(h.alice, "Release notes")
        assert status == 200 and "errors" not in body
        await asyncio.sleep(0.1)
        assert h.ephemerals(h.alice) == [] and hook_calls(h) == []  # nothing left to go stale
        await h.click(message, h.alice, text="Submit", values={"aq1.draft": ["0"]})
        assert (await task).answers[0].custom == "Release notes"


async def test_a_failing_response_url_after_a_modal_falls_back_to_chat_post_ephemeral() -> None:
    """The opening click's ``response_url`` refused (as when it is spent: five uses, thirty
    minutes): the note goes by ``chat.postEphemeral`` in the message's channel (the bot is
    in it)."""
    async with SlackHarness() as h:
        answerable_by_a_group(h)
        h.ask(one("Which targets?", ["Code", "Docs"], multiSelect=True))
        view = await skip_modal(h, await h.posted(), h.bob)
        h.slack.faults.add(method="response_url", kind="server_error", status=503)
        await h.slack.deliver(h.slack.submission(view.id, values={}))
        note = await note_for(h, h.bob)
        assert note.text.startswith(NOT_ALLOWED[:-1]) and note.channel == h.channel
        assert [c["status"] for c in hook_calls(h)] == [503]
        assert h.slack.calls.count("chat.postEphemeral") == 1


async def test_a_submission_of_an_older_releases_modal_falls_back_to_chat_post_ephemeral() -> None:
    """A modal opened by a release that put no ``external_id`` on it (Slack sends ``""``):
    the submission is handled, and the note goes by ``chat.postEphemeral``."""
    async with SlackHarness() as h:
        answerable_by_a_group(h)
        h.ask(one("Which targets?", ["Code", "Docs"], multiSelect=True))
        view = await skip_modal(h, await h.posted(), h.bob)
        # as the release before opened it: three-field metadata, no external_id
        opened = view.definition
        opened["private_metadata"] = ids.SEP.join(opened["private_metadata"].split(ids.SEP)[:3])
        opened.pop("external_id", None)
        payload = h.slack.submission(view.id, values={})
        assert payload["view"]["external_id"] == ""
        status, _ = await h.slack.deliver(payload)
        assert status == 200
        note = await note_for(h, h.bob)
        assert note.text.startswith(NOT_ALLOWED[:-1]) and note.channel == h.channel
        assert hook_calls(h) == []
        assert h.slack.calls.count("chat.postEphemeral") == 1


async def test_modals_open_at_once_each_carry_their_own_clicks_response_url() -> None:
    """Slack refuses a view whose ``external_id`` another view has
    (``duplicate_external_id``): each modal has its own, and each note goes to the
    ``response_url`` of the click that opened that modal, where the bot was not invited."""
    async with SlackHarness() as h:
        answerable_by_a_group(h)
        public = uninvited(h)
        h.ask(
            one("Which targets?", ["Code", "Docs"], multiSelect=True),
            options=AskOptions(channel=public),
        )
        message = await h.posted(channel=public)
        slow_group_lookups(h, count=2)  # both open before the group is read
        bobs, carols = await skip_modal(h, message, h.bob), await skip_modal(h, message, h.carol)
        assert bobs.external_id and carols.external_id
        assert bobs.external_id != carols.external_id
        await h.slack.deliver(h.slack.submission(carols.id, values={}))
        await h.slack.deliver(h.slack.submission(bobs.id, values={}))
        for user in (h.bob, h.carol):  # refused, or asked again while the group is read
            note = await note_for(h, user)
            assert note.text.startswith((NOT_ALLOWED[:-1], NOT_CHECKED)), note.text
            assert note.channel == public
        hooks = {ids.parse_external_id(v.external_id) for v in (bobs, carols)}
        assert len(hooks) == 2
        assert [c["status"] for c in hook_calls(h)] == [200, 200]
        assert h.slack.calls.count("chat.postEphemeral") == 0


def submission_payload(metadata: object, external_id: object = "") -> dict[str, Any]:
    """A free-text modal's submission whose ``private_metadata`` is ``metadata`` and whose
    ``external_id`` is ``external_id`` (Slack sends ``""`` for a view that has none)."""
    rid = "0123456789abcdef"
    block = ids.block_id(rid, 0, "in")
    return {
        "type": "view_submission",
        "user": {"id": "U0BOB", "name": "bob"},
        "view": {
            "callback_id": ids.callback_id("text"),
            "private_metadata": metadata,
            "external_id": external_id,
            "state": {"values": {block: {ids.action_id("text"): {"value": "hi"}}}},
        },
    }


def old_parse_private_metadata(value: object) -> ids.ModalRef | None:
    """``ids.parse_private_metadata`` of the release before (4f8895b), as it is deployed:
    during a rolling deploy a modal opened by this version may be submitted to it."""
    if not isinstance(value, str) or len(value) > MAX_PRIVATE_METADATA:
        return None
    fields = value.split(ids.SEP)
    if len(fields) != 3 or fields[0] != ids.PREFIX:
        return None
    _, request_id, index = fields
    if not _REQUEST_ID.match(request_id) or not _INDEX.match(index):
        return None
    return ids.ModalRef(request_id, int(index))


_REQUEST_ID = re.compile(r"^[a-z0-9]{8,40}\Z")
_INDEX = re.compile(r"^[0-9]{1,5}\Z")
MODAL_RECORD = record({"options": opts("S", "M", "L")}, {"question": "Why?"})


def opened_modals(url: str | None) -> list[dict[str, Any]]:
    """Every modal the bot opens (each free-text one, the empty Submit's confirmation),
    opened by a click whose ``response_url`` is ``url``."""
    texts = [render_text_modal(MODAL_RECORD, i, None, url) for i in range(2)]
    return [*texts, render_skip_modal(MODAL_RECORD, url)]


def submitted_by_bob(view: dict[str, Any]) -> dict[str, Any]:
    """Bob's submission of ``view``: "hi" in a free-text modal; the confirmation has no input."""
    skip = view["callback_id"] == ids.callback_id("skip")
    return submit_view(view, "hi", "U0BOB", values={} if skip else None)


@pytest.mark.parametrize(
    "url",
    [None, RESPONSE_URL_OF_A_CLICK, "https://hooks.slack.com/actions/" + "x" * 2900],
    ids=["no-url", "url", "long-url"],
)
def test_every_modal_the_bot_opens_parses_with_the_previous_release(url: str | None) -> None:
    """Rolling deploy: a modal opened by this version and submitted to the one before must
    not be dropped (that release takes only ``aq1:<request id>:<question>``)."""
    for view in opened_modals(url):
        assert check_view(view) == []
        ref = old_parse_private_metadata(view["private_metadata"])
        assert ref is not None and ref.request_id == MODAL_RECORD.id, view["private_metadata"]
        assert ids.parse_private_metadata(view["private_metadata"]) == ref
        submitted = parse_view_submission(submitted_by_bob(view))
        assert submitted is not None and submitted.request_id == MODAL_RECORD.id
        carried = url if url is not None and len(url) < 200 else None
        assert submitted.origin.response_url == carried


@pytest.mark.parametrize("kind", ["text", "skip"])
def test_a_modal_carries_the_opening_clicks_response_url_back(kind: str) -> None:
    """In its ``external_id`` (the release before ignores it), unique per modal as Slack
    wants; the ``private_metadata`` keeps the three-field form."""
    view = opened_modals(RESPONSE_URL_OF_A_CLICK)[0 if kind == "text" else 2]
    assert view["private_metadata"] == ids.private_metadata(MODAL_RECORD.id, 0)
    assert ids.parse_external_id(view["external_id"]) == RESPONSE_URL_OF_A_CLICK
    assert view["external_id"] != opened_modals(RESPONSE_URL_OF_A_CLICK)[0]["external_id"]
    parsed = parse_view_submission(submitted_by_bob(view))
    assert parsed is not None and parsed.request_id == MODAL_RECORD.id
    assert parsed.origin.response_url == RESPONSE_URL_OF_A_CLICK


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/actions/T0TEAM/1234/abc",
        "https://hooks.slack.com.evil.example/actions/T0TEAM/1234/abc",
        "http://10.0.0.5:8080/response/R1/abc",
        "https://hooks.slack.com/actions/T0TEAM/1234/a\nb",
        "http://hooks.slack.com/actions/T0TEAM/1234/abc",
    ],
)
def test_a_modal_submissions_response_url_that_cannot_be_slacks_is_dropped(url: str) -> None:
    """The ``external_id`` comes back in a signed payload, yet is checked as a click's
    ``response_url`` would be (and so is a 7857283 build's four-field metadata)."""
    carried = f"aq1r.0123456789abcdef.{url}"
    parsed = parse_view_submission(submission_payload("aq1:0123456789abcdef:0", carried))
    assert parsed is not None and parsed.origin.response_url is None
    parsed = parse_view_submission(submission_payload(f"aq1:0123456789abcdef:0:{url}"))
    assert parsed is not None and parsed.origin.response_url is None


def test_a_modal_opened_before_this_version_still_parses() -> None:
    """Modals open in Slack across an upgrade: the three-field metadata and no
    ``external_id`` (the note then goes by ``chat.postEphemeral``), or, from a 7857283
    build, the opening click's ``response_url`` as a fourth field."""
    parsed = parse_view_submission(submission_payload("aq1:0123456789abcdef:0"))
    assert parsed is not None and parsed.origin.response_url is None
    assert ids.parse_private_metadata("aq1:0123456789abcdef:0") == ids.ModalRef(
        "0123456789abcdef", 0
    )
    four = f"aq1:0123456789abcdef:0:{RESPONSE_URL_OF_A_CLICK}"
    parsed = parse_view_submission(submission_payload(four))
    assert parsed is not None and parsed.origin.response_url == RESPONSE_URL_OF_A_CLICK


def test_a_response_url_that_would_not_fit_the_external_id_is_left_out() -> None:
    """Slack takes at most 255 characters: a longer one is not sent (Slack would refuse
    the whole modal); the note then goes by ``chat.postEphemeral``."""
    fits = "https://hooks.slack.com/" + "x" * (MAX_EXTERNAL_ID - len("aq1r.0123456789abcdef.") - 24)
    view = render_text_modal(MODAL_RECORD, 0, None, fits)
    assert len(view["external_id"]) == MAX_EXTERNAL_ID
    assert "external_id" not in render_text_modal(MODAL_RECORD, 0, None, fits + "x")
    assert "external_id" not in render_skip_modal(MODAL_RECORD, None)


# --- a response_url that is not Slack's is never POSTed to ------------------------------


class Catcher:
    """An HTTP server on loopback that records every request it gets."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Catcher:
        async def record(request: web.Request) -> web.Response:
            self.hits.append(await request.text())
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", record)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/response/R1/abc"
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.mark.parametrize("approval", [False, True], ids=["question", "approval"])
async def test_a_forged_response_url_is_not_posted_to_and_the_note_falls_back(
    approval: bool,
) -> None:
    """A signed payload whose ``response_url`` is on loopback, but not the Slack the bot
    calls: nothing is sent there; the note goes by ``chat.postEphemeral``."""
    async with SlackHarness() as h, Catcher() as catcher:
        h.provider.defaults.allowed_users = [h.alice]
        if approval:
            asked = h.provider.ask_approval(VIEW, options=AskOptions(), approvers=[h.alice])
            h.tasks.append(asyncio.ensure_future(asked))  # type: ignore[arg-type]
        else:
            h.ask(one(options=["Deploy", "Wait"]))
        message = await h.posted()
        payload = h.slack.click(
            h.current(message), user=h.bob, text="Allow once" if approval else "Deploy"
        )
        payload["response_url"] = catcher.url
        status, _ = await h.slack.deliver(payload)
        assert status == 200
        note = await note_for(h, h.bob)
        assert note.text == refused(NOT_AN_APPROVER if approval else NOT_ALLOWED, f"<@{h.alice}>")
        assert h.slack.calls.count("chat.postEphemeral") == 1
        await asyncio.sleep(0.1)
        assert catcher.hits == [] and hook_calls(h) == []


RESPONSE_URL = "https://hooks.slack.com/actions/T0TEAM/1234/abcDEF"


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/actions/T0TEAM/1234/abc",
        "http://hooks.slack.com/actions/T0TEAM/1234/abc",  # not https
        "https://hooks.slack.com.evil.example/actions/T0TEAM/1234/abc",
        "https://evil.example#@hooks.slack.com/actions/x",
        "https://user@hooks.slack.com/actions/T0TEAM/1234/abc",
        "https://hooks.slack.com:8443/actions/T0TEAM/1234/abc",
        "https://hooks.slack.com/actions/T0TEAM/1234/a\nb",
        "https://hooks.slack.com",  # no path
        "http://10.0.0.5:8080/response/R1/abc",  # a private address, not loopback
        "file:///etc/passwd",
        "hooks.slack.com/actions/T0TEAM/1234/abc",
        pytest.param("https://hooks.slack.com/actions/" + "x" * 3000, id="too-long"),
        12345,
    ],
)
def test_a_response_url_that_cannot_be_slacks_is_dropped_where_it_enters(url: object) -> None:
    payload = click_payload(url)
    parsed = parse_block_actions(payload)
    assert parsed is not None and parsed.origin.response_url is None
    approval = approval_payload(url)
    clicked = parse_block_actions(approval)
    assert clicked is not None and clicked.origin.response_url is None


@pytest.mark.parametrize("url", [RESPONSE_URL, "https://HOOKS.slack.com/actions/T0TEAM/1/x"])
def test_slacks_response_url_is_carried_on_the_origin(url: str) -> None:
    parsed = parse_block_actions(click_payload(url))
    assert parsed is not None and parsed.origin.response_url == url
    clicked = parse_block_actions(approval_payload(url))
    assert clicked is not None and clicked.origin.response_url == url


def click_payload(url: object) -> dict[str, Any]:
    """A tap on a one-question message, with ``url`` as its ``response_url``."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "actions",
            "block_id": ids.block_id("0123456789abcdef", 0, "a1"),
            "elements": [
                {
                    "type": "button",
                    "action_id": ids.action_id("pick", 0),
                    "text": {"type": "plain_text", "text": "Deploy"},
                    "value": ids.option_value(0),
                }
            ],
        }
    ]
    payload = click(blocks, button_text="Deploy")
    payload["response_url"] = url
    return payload


def approval_payload(url: object) -> dict[str, Any]:
    """An Allow once click on an approval, with ``url`` as its ``response_url``."""
    payload: dict[str, Any] = json.loads(json.dumps(click_payload(url)))
    payload["actions"][0]["action_id"] = ids.approval_action_id("allow")
    return payload
