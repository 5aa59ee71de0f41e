"""The Slack stand-in, driven through slack_sdk's real AsyncWebClient on 127.0.0.1."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack.sandbox import (
    Change,
    Channel,
    Faults,
    SlackStandIn,
    User,
    Workspace,
    build_interaction_request,
    send_interaction,
)
from adapters.slack.sandbox.blockcheck import check_message

Json = dict[str, Any]
SECRET = "sandbox-signing-secret"


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now: float = 1_733_150_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def plain(text: str) -> Json:
    return {"type": "plain_text", "text": text}


def opt(text: str, value: str) -> Json:
    return {"text": plain(text), "value": value}


def button(text: str, action_id: str, **extra: Any) -> Json:
    return {"type": "button", "text": plain(text), "action_id": action_id, **extra}


QUESTION: list[Json] = [
    {"type": "section", "block_id": "q", "text": {"type": "mrkdwn", "text": "Pick a colour"}},
    {
        "type": "actions",
        "block_id": "choices",
        "elements": [
            {
                "type": "radio_buttons",
                "action_id": "radio",
                "options": [opt("Red", "red"), opt("Blue", "blue")],
            },
            {
                "type": "checkboxes",
                "action_id": "boxes",
                "options": [opt("A", "a"), opt("B", "b")],
                "initial_options": [opt("A", "a")],
            },
        ],
    },
    {
        "type": "input",
        "block_id": "other",
        "optional": True,
        "label": plain("Other"),
        "element": {"type": "plain_text_input", "action_id": "text"},
    },
    {
        "type": "actions",
        "block_id": "buttons",
        "elements": [
            button("Submit", "submit", value="go", style="primary"),
            button("Other…", "open_other", value="other"),
        ],
    },
]

MODAL: Json = {
    "type": "modal",
    "callback_id": "other_modal",
    "title": plain("Your answer"),
    "submit": plain("Send"),
    "blocks": [
        {
            "type": "input",
            "block_id": "answer",
            "label": plain("Answer"),
            "element": {"type": "plain_text_input", "action_id": "text", "multiline": True},
        }
    ],
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def slack(clock: FakeClock) -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(clock=clock, signing_secret=SECRET) as standin:
        yield standin


@pytest.fixture
def client(slack: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(token=slack.token, base_url=slack.url)


@pytest.fixture
def alice(slack: SlackStandIn) -> User:
    return slack.workspace.add_user("alice", real_name="Alice A")


@pytest.fixture
def bob(slack: SlackStandIn) -> User:
    return slack.workspace.add_user("bob")


@pytest.fixture
def general(slack: SlackStandIn) -> Channel:
    return slack.workspace.add_channel("general")


async def refusal(call: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        await call
    return str(info.value.response["error"])


# Auth and the directory.


async def test_a_bot_token_is_required(slack: SlackStandIn, client: AsyncWebClient) -> None:
    anonymous = AsyncWebClient(base_url=slack.url)
    assert await refusal(anonymous.auth_test()) == "not_authed"
    wrong = AsyncWebClient(token="xoxb-wrong", base_url=slack.url)
    assert await refusal(wrong.auth_test()) == "invalid_auth"
    me = await client.auth_test()
    ws = slack.workspace
    assert (me["user_id"], me["bot_id"], me["team_id"]) == (ws.bot_user.id, ws.bot_id, ws.team_id)


async def test_unknown_methods_are_refused(client: AsyncWebClient) -> None:
    assert await refusal(client.api_call("chat.frobnicate")) == "unknown_method"


async def test_users_info(client: AsyncWebClient, alice: User) -> None:
    info = await client.users_info(user=alice.id)
    assert info["user"]["id"] == alice.id and info["user"]["real_name"] == "Alice A"
    assert await refusal(client.users_info(user="U404")) == "user_not_found"


async def test_usergroups(
    slack: SlackStandIn, client: AsyncWebClient, alice: User, bob: User
) -> None:
    group = slack.workspace.add_usergroup("oncall", [alice.id, bob.id])
    assert group.id.startswith("S")
    assert (await client.usergroups_users_list(usergroup=group.id))["users"] == [alice.id, bob.id]
    assert await refusal(client.usergroups_users_list(usergroup="S404")) == "no_such_subteam"
    slack.workspace.plan = "free"
    refused = await refusal(client.usergroups_users_list(usergroup=group.id))
    assert refused == "plan_upgrade_required"


async def test_conversations_open_gives_the_dm_posts_land_in(
    client: AsyncWebClient, alice: User, bob: User
) -> None:
    opened = await client.conversations_open(users=alice.id)
    assert opened["channel"]["id"].startswith("D")
    posted = await client.chat_postMessage(channel=alice.id, text="hi")
    assert posted["channel"] == opened["channel"]["id"]
    group = await client.conversations_open(users=[alice.id, bob.id])
    assert group["channel"]["id"].startswith("G")
    assert await refusal(client.conversations_open(users="U404")) == "user_not_found"


# Messages.


async def test_post_stores_messages_with_increasing_ts(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel
) -> None:
    stamps = []
    for i in range(5):
        posted = await client.chat_postMessage(channel=general.id, text=f"m{i}")
        assert re.fullmatch(r"\d{10}\.\d{6}", posted["ts"])
        assert posted["message"]["bot_id"] == slack.workspace.bot_id
        stamps.append(posted["ts"])
    assert stamps == sorted(stamps, key=float) and len(set(stamps)) == 5
    assert [m.text for m in slack.workspace.history(general.id)] == [f"m{i}" for i in range(5)]
    assert slack.calls.last("chat.postMessage").params["text"] == "m4"


async def test_post_by_channel_name_and_errors(client: AsyncWebClient, general: Channel) -> None:
    assert (await client.chat_postMessage(channel="#general", text="x"))["channel"] == general.id
    assert await refusal(client.chat_postMessage(channel="C404", text="x")) == "channel_not_found"
    no_text = client.api_call("chat.postMessage", json={"channel": general.id})
    assert await refusal(no_text) == "no_text"


async def test_threads(slack: SlackStandIn, client: AsyncWebClient, general: Channel) -> None:
    parent = await client.chat_postMessage(channel=general.id, text="question")
    reply = await client.chat_postMessage(channel=general.id, text="more", thread_ts=parent["ts"])
    assert reply["message"]["thread_ts"] == parent["ts"]
    thread = await client.conversations_replies(channel=general.id, ts=parent["ts"])
    assert [m["text"] for m in thread["messages"]] == ["question", "more"]
    assert thread["messages"][0]["reply_count"] == 1
    history = await client.conversations_history(channel=general.id)
    assert [m["text"] for m in history["messages"]] == ["question"]


async def test_blocks_are_checked_with_the_sandbox_block_checker(
    client: AsyncWebClient, general: Channel
) -> None:
    bad = [{"type": "actions", "elements": [button("x" * 76, "a")]}]
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel=general.id, text="x", blocks=bad)
    assert info.value.response["error"] == "invalid_blocks"
    assert info.value.response["errors"] == check_message(bad)
    assert info.value.response["errors"] == [
        "blocks[0].elements[0].text.text: 76 characters, Slack allows at most 75"
    ]
    huge = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}] * 5
    refused = await refusal(client.chat_postMessage(channel=general.id, text="x", blocks=huge))
    assert refused == "msg_blocks_too_long"


async def test_slack_fills_in_block_and_action_ids(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel
) -> None:
    blocks: list[Json] = [
        {
            "type": "actions",
            "elements": [button("Go", "go"), {"type": "button", "text": plain("Up")}],
        },
        {"type": "markdown", "text": "# plan", "block_id": "dropped"},
    ]
    posted = await client.chat_postMessage(channel=general.id, text="x", blocks=blocks)
    stored = posted["message"]["blocks"]
    assert stored[0]["block_id"] and stored[0]["elements"][1]["action_id"]
    assert "block_id" not in stored[1]


async def test_long_text_is_truncated_with_a_warning(
    client: AsyncWebClient, general: Channel
) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="x" * 40_005)
    assert posted["warning"] == "message_truncated"
    assert len(posted["message"]["text"]) == 40_000


async def test_update_keeps_history_and_follows_slacks_rules(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="v1", blocks=QUESTION)
    ts = posted["ts"]
    updated = await client.chat_update(channel=general.id, ts=ts, text="v2")
    assert updated["message"]["text"] == "v2" and updated["message"]["blocks"]  # blocks kept
    assert updated["message"]["edited"]["user"] == slack.workspace.bot_user.id
    await client.chat_update(channel=general.id, ts=ts, text="v3", blocks=[])
    message = slack.workspace.message(general.id, ts)
    assert message.blocks == [] and [r.text for r in message.edits] == ["v1", "v2"]
    assert len(slack.calls("chat.update")) == 2

    refused = await refusal(client.chat_update(channel=general.id, ts="1.000001", text="x"))
    assert refused == "message_not_found"
    dm = await client.chat_postMessage(channel=alice.id, text="dm")
    refused = await refusal(client.chat_update(channel=alice.id, ts=dm["ts"], text="x"))
    assert refused == "channel_not_found"
    assert (await client.chat_update(channel=dm["channel"], ts=dm["ts"], text="y"))["ok"]
    bad = [{"type": "header", "text": plain("x" * 151)}]
    update = client.chat_update(channel=general.id, ts=ts, text="x", blocks=bad)
    assert await refusal(update) == "invalid_blocks"
    assert await refusal(client.chat_update(channel=general.id, ts=ts, text="x" * 4001)) == (
        "msg_too_long"
    )
    theirs = slack.workspace.post(general, text="typed by a person", user=alice.id)
    refused = await refusal(client.chat_update(channel=general.id, ts=theirs.ts, text="x"))
    assert refused == "cant_update_message"


async def test_delete(slack: SlackStandIn, client: AsyncWebClient, general: Channel) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="bye")
    assert (await client.chat_delete(channel=general.id, ts=posted["ts"]))["ok"]
    assert slack.workspace.history(general.id) == []
    refused = await refusal(client.chat_delete(channel=general.id, ts=posted["ts"]))
    assert refused == "message_not_found"


async def test_ephemeral_messages(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User, bob: User
) -> None:
    sent = await client.chat_postEphemeral(channel=general.id, user=alice.id, text="only you")
    (note,) = slack.workspace.ephemerals_for(alice.id)
    assert note.ts == sent["message_ts"] and note.text == "only you"
    assert slack.workspace.ephemerals_for(bob.id) == []
    bot = slack.workspace.bot_user.id  # in the channel: the refusal is about alice
    private = slack.workspace.add_channel("private", members=[bob.id, bot])
    refused = await refusal(client.chat_postEphemeral(channel=private.id, user=alice.id, text="x"))
    assert refused == "user_not_in_channel"
    refused = await refusal(client.chat_update(channel=general.id, ts=note.ts, text="x"))
    assert refused == "message_not_found"  # chat.update cannot edit ephemeral messages


# Views.


async def test_views_open_needs_a_fresh_unused_trigger(
    slack: SlackStandIn, client: AsyncWebClient, alice: User, clock: FakeClock
) -> None:
    trigger = slack.new_trigger_id(alice.id)
    opened = await client.views_open(trigger_id=trigger, view=MODAL)
    view = opened["view"]
    assert view["id"].startswith("V") and view["hash"] and view["root_view_id"] == view["id"]
    assert slack.workspace.stacks[alice.id] == [view["id"]]
    assert await refusal(client.views_open(trigger_id=trigger, view=MODAL)) == (
        "exchanged_trigger_id"
    )
    late = slack.new_trigger_id(alice.id)
    clock.advance(3.01)
    assert await refusal(client.views_open(trigger_id=late, view=MODAL)) == "expired_trigger_id"
    assert await refusal(client.views_open(trigger_id="1.2.3", view=MODAL)) == (
        "invalid_trigger_id"
    )


async def test_an_invalid_view_is_refused_without_using_the_trigger(
    slack: SlackStandIn, client: AsyncWebClient, alice: User
) -> None:
    trigger = slack.new_trigger_id(alice.id)
    bad = {**MODAL, "title": plain("x" * 25)}
    with pytest.raises(SlackApiError) as info:
        await client.views_open(trigger_id=trigger, view=bad)
    assert info.value.response["error"] == "invalid_arguments"
    assert info.value.response["errors"] == ["title.text: 25 characters, Slack allows at most 24"]
    assert (await client.views_open(trigger_id=trigger, view=MODAL))["ok"]


async def test_views_update_and_push(
    slack: SlackStandIn, client: AsyncWebClient, alice: User
) -> None:
    view = (
        await client.views_open(
            trigger_id=slack.new_trigger_id(alice.id), view={**MODAL, "external_id": "ext-1"}
        )
    )["view"]
    renamed = {**MODAL, "title": plain("Renamed"), "external_id": "ext-1"}
    updated = (await client.views_update(view_id=view["id"], hash=view["hash"], view=renamed))[
        "view"
    ]
    assert updated["id"] == view["id"] and updated["hash"] != view["hash"]
    stale = client.views_update(view_id=view["id"], hash=view["hash"], view=MODAL)
    assert await refusal(stale) == "hash_conflict"
    by_external = await client.views_update(external_id="ext-1", view=renamed)
    assert by_external["view"]["id"] == view["id"]
    assert await refusal(client.views_update(view_id="V404", view=MODAL)) == "not_found"

    for depth in (2, 3):
        trigger = slack.new_trigger_id(alice.id, view_id=view["id"])
        pushed = (await client.views_push(trigger_id=trigger, view=MODAL))["view"]
        assert (
            pushed["root_view_id"] == view["id"] and len(slack.workspace.stacks[alice.id]) == depth
        )
    trigger = slack.new_trigger_id(alice.id, view_id=view["id"])
    refused = await refusal(client.views_push(trigger_id=trigger, view=MODAL))
    assert refused == "push_limit_reached"


# Files.


async def test_files_upload_v2_end_to_end(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel
) -> None:
    parent = await client.chat_postMessage(channel=general.id, text="plan below")
    uploaded = await client.files_upload_v2(
        channel=general.id,
        content="# The plan\n\n" + "step\n" * 3000,
        filename="plan.md",
        title="Plan",
        initial_comment="Full plan",
        thread_ts=parent["ts"],
    )
    file = uploaded["file"]
    assert file["title"] == "Plan" and file["channels"] == [general.id]
    stored = slack.workspace.files[file["id"]]
    assert stored.content is not None and stored.content.startswith(b"# The plan")
    shared = slack.workspace.history(general.id)[-1]
    assert shared.thread_ts == parent["ts"] and shared.text == "Full plan"
    assert shared.files[0]["id"] == file["id"]
    methods = [c.method for c in slack.calls()]
    assert methods[-3:] == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]


# response_url.


async def test_response_url_replaces_posts_and_wears_out_after_five_uses(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="q", blocks=QUESTION)
    message = slack.workspace.message(general.id, posted["ts"])
    payload = slack.click(message, user=alice.id, text="Submit")
    hook = AsyncWebhookClient(payload["response_url"])

    replaced = await hook.send(text="answered", replace_original=True)
    assert replaced.status_code == 200 and json.loads(replaced.body) == {"ok": True}
    assert message.text == "answered" and message.blocks == []
    await hook.send(text="just for you", replace_original=False)
    assert [e.text for e in slack.workspace.ephemerals_for(alice.id)] == ["just for you"]
    await hook.send(text="for everyone", response_type="in_channel", replace_original=False)
    assert slack.workspace.history(general.id)[-1].text == "for everyone"
    bad = await hook.send(text="x", blocks=[{"type": "header", "text": plain("x" * 151)}])
    assert bad.status_code == 400 and json.loads(bad.body)["error"] == "invalid_blocks"
    for _ in range(2):
        assert (await hook.send(text="again", replace_original=True)).status_code == 200
    worn_out = await hook.send(text="sixth", replace_original=True)
    assert worn_out.status_code == 404 and json.loads(worn_out.body)["error"] == "used_url"
    assert len(slack.calls("response_url")) == 7


async def test_response_url_expires_and_can_delete(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User, clock: FakeClock
) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="q", blocks=QUESTION)
    message = slack.workspace.message(general.id, posted["ts"])
    hook = AsyncWebhookClient(slack.click(message, user=alice.id, text="Submit")["response_url"])
    late = AsyncWebhookClient(slack.click(message, user=alice.id, text="Submit")["response_url"])
    assert (await hook.send_dict({"delete_original": True})).status_code == 200
    assert slack.workspace.history(general.id) == []
    clock.advance(30 * 60 + 1)
    expired = await late.send(text="x")
    assert expired.status_code == 404 and json.loads(expired.body)["error"] == "expired_url"


async def test_clicks_on_ephemeral_messages(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User, bob: User
) -> None:
    sent = await client.chat_postEphemeral(
        channel=general.id, user=alice.id, text="q", blocks=QUESTION
    )
    note = slack.workspace.find_ephemeral(sent["message_ts"])
    assert note is not None
    payload = slack.click(note, user=alice.id, text="Submit")
    assert payload["container"]["is_ephemeral"] is True and "message" not in payload
    with pytest.raises(ValueError, match="cannot see"):
        slack.click(note, user=bob.id, text="Submit")
    await AsyncWebhookClient(payload["response_url"]).send(text="thanks", replace_original=True)
    assert note.text == "thanks" and note.blocks == []


# Clicking like a person.


async def test_click_payloads_carry_the_action_and_every_stateful_element(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="q", blocks=QUESTION)
    message = slack.workspace.message(general.id, posted["ts"])

    payload = slack.click(
        message, user=alice.id, text="Submit", values={"radio": "blue", "text": "hi"}
    )
    assert payload["type"] == "block_actions" and payload["user"]["id"] == alice.id
    assert payload["container"] == {
        "type": "message",
        "message_ts": message.ts,
        "channel_id": general.id,
        "is_ephemeral": False,
    }
    assert payload["message"]["ts"] == message.ts and payload["channel"]["name"] == "general"
    (action,) = payload["actions"]
    assert (action["type"], action["action_id"], action["block_id"]) == (
        "button",
        "submit",
        "buttons",
    )
    assert (action["value"], action["style"], action["text"]["text"]) == ("go", "primary", "Submit")
    values = payload["state"]["values"]
    assert values["choices"]["radio"] == {
        "type": "radio_buttons",
        "selected_option": opt("Blue", "blue"),
    }
    assert values["choices"]["boxes"] == {"type": "checkboxes", "selected_options": [opt("A", "a")]}
    assert values["other"]["text"] == {"type": "plain_text_input", "value": "hi"}
    assert payload["trigger_id"] in slack.workspace.triggers

    chose = slack.click(message, user=alice.id, text="Red")
    assert chose["actions"][0]["selected_option"] == opt("Red", "red")
    assert chose["state"]["values"]["choices"]["radio"]["selected_option"] == opt("Red", "red")
    ticked = slack.click(message, user=alice.id, text="B")
    assert ticked["actions"][0]["selected_options"] == [opt("A", "a"), opt("B", "b")]
    unticked = slack.click(message, user=alice.id, text="A")
    assert unticked["actions"][0]["selected_options"] == []
    by_id = slack.click(message, user=alice.id, action_id="boxes", values={"boxes": ["b"]})
    assert by_id["actions"][0]["selected_options"] == [opt("B", "b")]
    with pytest.raises(LookupError):
        slack.click(message, user=alice.id, text="Nope")
    with pytest.raises(ValueError):
        slack.click(message, user=alice.id, text="Submit", values={"radio": "green"})


# Signing, and a real bolt app answering through the stand-in.


def test_signed_requests_verify_with_slack_sdk() -> None:
    payload = {"type": "block_actions", "actions": [{"action_id": "a", "value": "x & y=z"}]}
    body, headers = build_interaction_request(payload, SECRET)
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert SignatureVerifier(SECRET).is_valid_request(body, headers)
    assert not SignatureVerifier("other").is_valid_request(body, headers)
    assert json.loads(parse_qs(body)["payload"][0]) == payload
    old, old_headers = build_interaction_request(payload, SECRET, timestamp=int(time.time()) - 600)
    assert not SignatureVerifier(SECRET).is_valid_request(old, old_headers)  # replay window


@pytest.fixture
async def bolt(slack: SlackStandIn) -> AsyncIterator[AsyncApp]:
    client = AsyncWebClient(token=slack.token, base_url=slack.url)
    app = AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)

    async def events(request: web.Request) -> web.StreamResponse:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    server = web.Application()
    server.router.add_post("/slack/events", events)
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    slack.interactivity_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    yield app
    await runner.cleanup()


async def test_a_bolt_app_answers_clicks_and_submissions_through_the_standin(
    slack: SlackStandIn, bolt: AsyncApp, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    @bolt.action("submit")
    async def submit(ack: AsyncAck, body: Json, client: AsyncWebClient) -> None:
        await ack()
        chosen = body["state"]["values"]["choices"]["radio"]["selected_option"]["value"]
        await client.chat_update(
            channel=body["channel"]["id"],
            ts=body["message"]["ts"],
            text=f"chose {chosen}",
            blocks=[],
        )

    @bolt.action("open_other")
    async def open_other(ack: AsyncAck, body: Json, client: AsyncWebClient) -> None:
        await ack()
        await client.views_open(trigger_id=body["trigger_id"], view=MODAL)

    @bolt.view("other_modal")
    async def other(ack: AsyncAck, view: Json) -> None:
        text = view["state"]["values"]["answer"]["text"]["value"]
        if not text:
            await ack(response_action="errors", errors={"answer": "Say something"})
        else:
            await ack()

    posted = await client.chat_postMessage(channel=general.id, text="q", blocks=QUESTION)
    message = slack.workspace.message(general.id, posted["ts"])

    status, _ = await slack.deliver(slack.click(message, user=alice.id, text="Other…"))
    assert status == 200
    (view_id,) = slack.workspace.stacks[alice.id]
    status, _ = await slack.deliver(slack.submission(view_id, values={"text": ""}))
    assert status == 200 and slack.workspace.views[view_id].errors == {"answer": "Say something"}
    status, _ = await slack.deliver(slack.submission(view_id, values={"text": "teal"}))
    assert status == 200 and view_id not in slack.workspace.views

    status, _ = await slack.deliver(
        slack.click(message, user=alice.id, text="Submit", values={"radio": "red"})
    )
    assert status == 200 and message.text == "chose red" and message.blocks == []

    slack.signing_secret = "not-the-apps-secret"
    status, _ = await slack.deliver({"type": "block_actions"})
    assert status == 401


async def test_send_interaction_posts_the_signed_body(slack: SlackStandIn) -> None:
    received: list[tuple[str, dict[str, str]]] = []

    async def echo(request: web.Request) -> web.Response:
        received.append((await request.text(), dict(request.headers)))
        return web.Response(text="ok")

    server = web.Application()
    server.router.add_post("/", echo)
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{runner.addresses[0][1]}/"
            status, text = await send_interaction(session, url, {"type": "x"}, SECRET)
    finally:
        await runner.cleanup()
    assert (status, text) == (200, "ok")
    ((body, headers),) = received
    assert SignatureVerifier(SECRET).is_valid_request(body, headers)


# Faults.


@pytest.mark.slow
async def test_ratelimit_carries_retry_after_and_the_retry_handler_waits_it_out(
    slack: SlackStandIn, general: Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    slack.faults.add(method="chat.postMessage", kind="ratelimit", retry_after=1)
    plain_client = AsyncWebClient(token=slack.token, base_url=slack.url)
    with pytest.raises(SlackApiError) as info:
        await plain_client.chat_postMessage(channel=general.id, text="x")
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] == "1"

    monkeypatch.setattr(random, "random", lambda: 0.0)  # no jitter in the handler's wait
    slack.faults.add(method="chat.postMessage", kind="ratelimit", retry_after=1)
    retrying = AsyncWebClient(
        token=slack.token,
        base_url=slack.url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    started = time.monotonic()
    posted = await retrying.chat_postMessage(channel=general.id, text="after the wait")
    assert posted["ok"] and time.monotonic() - started >= 1.0
    calls = slack.calls("chat.postMessage")
    assert [(c.status, c.fault) for c in calls] == [
        (429, "ratelimit"),
        (429, "ratelimit"),
        (200, None),
    ]
    assert [m.text for m in slack.workspace.history(general.id)] == ["after the wait"]


@pytest.mark.slow
async def test_server_errors(slack: SlackStandIn, general: Channel) -> None:
    slack.faults.add(method="chat.update", kind="server_error", status=503)
    slack.faults.add(method="chat.postMessage", kind="server_error", status=500, count=2)
    client = AsyncWebClient(token=slack.token, base_url=slack.url)
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel=general.id, text="x")
    assert info.value.response.status_code == 500
    retrying = AsyncWebClient(
        token=slack.token, base_url=slack.url, retry_handlers=[AsyncServerErrorRetryHandler()]
    )
    posted = await retrying.chat_postMessage(channel=general.id, text="second try")
    with pytest.raises(SlackApiError) as info:
        await client.chat_update(channel=general.id, ts=posted["ts"], text="y")
    assert info.value.response.status_code == 503
    assert [c.status for c in slack.calls()] == [500, 500, 200, 503]


@pytest.mark.slow
async def test_a_dropped_connection_is_retried_by_the_default_handler(
    slack: SlackStandIn, general: Channel
) -> None:
    slack.faults.add(method="chat.postMessage", kind="drop")
    bare = AsyncWebClient(token=slack.token, base_url=slack.url, retry_handlers=[])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await bare.chat_postMessage(channel=general.id, text="lost")
    slack.faults.add(method="chat.postMessage", kind="drop")
    client = AsyncWebClient(token=slack.token, base_url=slack.url)
    assert isinstance(client.retry_handlers[0], AsyncConnectionErrorRetryHandler)
    posted = await client.chat_postMessage(channel=general.id, text="kept")
    assert posted["ok"]
    assert [m.text for m in slack.workspace.history(general.id)] == ["kept"]
    assert [(c.status, c.fault) for c in slack.calls()] == [(0, "drop"), (0, "drop"), (200, None)]
    assert slack.calls()[0].response is None and slack.calls()[2].ok


@pytest.mark.slow
async def test_delays_and_wildcards(slack: SlackStandIn, client: AsyncWebClient) -> None:
    slack.faults.add(kind="delay", delay=0.2, count=2)
    started = time.monotonic()
    await client.auth_test()
    await client.auth_test()
    assert time.monotonic() - started >= 0.4
    await client.auth_test()
    assert [c.fault for c in slack.calls()] == ["delay", "delay", None]


async def test_faults_reach_response_urls_and_uploads(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    posted = await client.chat_postMessage(channel=general.id, text="q", blocks=QUESTION)
    message = slack.workspace.message(general.id, posted["ts"])
    hook = AsyncWebhookClient(slack.click(message, user=alice.id, text="Submit")["response_url"])
    slack.faults.add(method="response_url", kind="ratelimit", retry_after=7)
    limited = await hook.send(text="x", replace_original=True)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "7"
    assert message.text == "q"  # the limited call changed nothing
    assert (await hook.send(text="x", replace_original=True)).status_code == 200

    slack.faults.add(method="upload", kind="server_error")
    with pytest.raises(SlackRequestError, match="Failed to upload"):
        await client.files_upload_v2(channel=general.id, content="x", filename="a.txt")


def test_rates_draw_from_a_seeded_random() -> None:
    def pattern(seed: int) -> list[bool]:
        faults = Faults(seed)
        faults.add(kind="server_error", rate=0.3)
        return [faults.draw("chat.update") is not None for _ in range(200)]

    first = pattern(7)
    assert first == pattern(7) and 30 < sum(first) < 90
    faults = Faults()
    capped = faults.add(kind="drop", method="views.open", rate=1.0, count=3)
    assert [faults.draw("views.open") is capped for _ in range(5)] == [True] * 3 + [False] * 2
    assert faults.draw("chat.update") is None
    with pytest.raises(ValueError):
        faults.add(kind="explode")  # type: ignore[arg-type]


# Observers and the page's view of the state.


async def test_observers_see_every_change(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    queue = slack.subscribe()
    seen: list[Change] = []
    stop = slack.observe(seen.append)
    posted = await client.chat_postMessage(channel=general.id, text="q", blocks=QUESTION)
    await client.chat_update(channel=general.id, ts=posted["ts"], text="q2")
    await client.chat_postEphemeral(channel=general.id, user=alice.id, text="psst")
    view = (await client.views_open(trigger_id=slack.new_trigger_id(alice.id), view=MODAL))["view"]
    await client.views_update(view_id=view["id"], view=MODAL)
    slack.workspace.close_view(view["id"])
    await client.chat_delete(channel=general.id, ts=posted["ts"])
    kinds = [
        "message.posted",
        "message.updated",
        "ephemeral.posted",
        "view.opened",
        "view.updated",
        "view.closed",
        "message.deleted",
    ]
    assert [c.kind for c in seen] == kinds
    assert [queue.get_nowait().kind for _ in kinds] == kinds
    assert seen[0].data["message"]["ts"] == posted["ts"]
    stop()
    slack.unsubscribe(queue)
    await client.chat_postMessage(channel=general.id, text="unseen")
    assert len(seen) == len(kinds) and queue.empty()


async def test_the_snapshot_is_json(
    slack: SlackStandIn, client: AsyncWebClient, general: Channel, alice: User
) -> None:
    await client.chat_postMessage(channel=alice.id, text="hello", blocks=QUESTION)
    await client.views_open(trigger_id=slack.new_trigger_id(alice.id), view=MODAL)
    snapshot = json.loads(json.dumps(slack.workspace.snapshot()))
    assert {c["name"] for c in snapshot["channels"]} == {"general", alice.id}
    dm = next(c for c in snapshot["channels"] if c["is_im"])
    assert dm["messages"][0]["text"] == "hello" and snapshot["views"][0]["user"] == alice.id


def test_a_workspace_mints_slack_shaped_ids(clock: FakeClock) -> None:
    ws = Workspace(clock=clock)
    user, channel = ws.add_user("carol"), ws.add_channel("ops")
    assert re.fullmatch(r"U[0-9A-F]{8}", user.id) and re.fullmatch(r"C[0-9A-F]{8}", channel.id)
    assert ws.open_dm(user.id) is ws.open_dm(user.id)
    first, second = ws.next_ts(), ws.next_ts()
    assert first == "1733150000.000000" and second == "1733150000.000001"
