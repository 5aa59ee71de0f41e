"""Slack Web API methods answered from a sandbox ``Workspace`` (pure: params in, response out).

``WebApi.call(method, params)`` returns the JSON body Slack would send: ``{"ok": true, ...}``
or ``{"ok": false, "error": "..."}``. Params arrive the way slack_sdk sends them, JSON
bodies or form fields, so ``blocks``/``view``/``files`` may be JSON strings and booleans may be
``"true"``. Blocks and views are checked with ``blockcheck``: a broken limit gives
``invalid_blocks`` (with the checker's lines in ``errors``), ``msg_blocks_too_long``, or for a
view ``invalid_arguments``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from adapters.slack.blockkit import (
    INVALID_BLOCKS,
    MAX_MESSAGE_TEXT,
    MSG_BLOCKS_TOO_LONG,
    RECOMMENDED_MESSAGE_TEXT,
)
from adapters.slack.sandbox.blockcheck import message_problems, view_problems
from adapters.slack.sandbox.records import Channel, SlackError
from adapters.slack.sandbox.state import Workspace

__all__ = ["METHODS", "WebApi"]

Params = Mapping[str, Any]
Response = dict[str, Any]


class WebApi:
    """The Web API methods the Slack provider uses, over one ``Workspace``."""

    def __init__(self, workspace: Workspace, *, upload_url: Callable[[str], str]) -> None:
        self.workspace = workspace
        self._upload_url = upload_url

    def call(self, method: str, params: Params) -> Response:
        """Answer one Web API call as Slack would."""
        handler = METHODS.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        try:
            return handler(self, params)
        except SlackError as refusal:
            return {"ok": False, "error": refusal.code, **refusal.extra}

    # auth, users, groups, conversations

    def auth_test(self, params: Params) -> Response:
        """``auth.test``: who the token belongs to."""
        ws = self.workspace
        return {
            "ok": True,
            "url": f"https://{ws.domain}.slack.com/",
            "team": ws.domain,
            "user": ws.bot_user.name,
            "team_id": ws.team_id,
            "user_id": ws.bot_user.id,
            "bot_id": ws.bot_id,
            "is_enterprise_install": False,
        }

    def users_info(self, params: Params) -> Response:
        """``users.info``."""
        user = self.workspace.user(_text(params, "user", "user_not_found"))
        return {"ok": True, "user": user.to_dict(self.workspace.team_id)}

    def usergroups_users_list(self, params: Params) -> Response:
        """``usergroups.users.list``; a ``free`` plan refuses it like Slack does."""
        if self.workspace.plan == "free":
            raise SlackError("plan_upgrade_required")
        group = self.workspace.usergroups.get(_text(params, "usergroup", "no_such_subteam"))
        if group is None:
            raise SlackError("no_such_subteam")
        return {"ok": True, "users": list(group.users)}

    def conversations_info(self, params: Params) -> Response:
        """``conversations.info``: what kind of conversation ``channel`` is (a DM names its
        user); a private one the bot is not in is ``channel_not_found``, as in Slack."""
        ws = self.workspace
        channel = ws.channel(_text(params, "channel", "channel_not_found"))
        private = channel.is_im or channel.is_mpim or channel.id in ws.private_channels
        if private and channel.members is not None and ws.bot_user.id not in channel.members:
            raise SlackError("channel_not_found")
        info: dict[str, object] = {
            "id": channel.id,
            "name": channel.name,
            "is_channel": not (channel.is_im or channel.is_mpim),
            "is_im": channel.is_im,
            "is_mpim": channel.is_mpim,
            "is_private": private,
        }
        if channel.is_im:
            info["user"] = channel.user
        return {"ok": True, "channel": info}

    def conversations_open(self, params: Params) -> Response:
        """``conversations.open``: one user gives a DM, several a group DM."""
        if params.get("channel"):
            channel = self.workspace.channel(str(params["channel"]))
        else:
            users = params.get("users")
            ids = users if isinstance(users, list) else str(users or "").split(",")
            ids = [str(u).strip() for u in ids if str(u).strip()]
            if not ids:
                raise SlackError("users_list_not_supplied")
            ws = self.workspace
            channel = ws.open_dm(ids[0]) if len(ids) == 1 else ws.open_mpim(ids)
        return {"ok": True, "channel": channel.to_dict()}

    def conversations_history(self, params: Params) -> Response:
        """``conversations.history``: top-level messages, newest first, ``limit`` (100) of them.

        Message metadata is included only with ``include_all_metadata``, as Slack does.
        """
        channel = self.workspace.channel(_text(params, "channel", "channel_not_found"))
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("true", "1")
        try:
            limit = int(str(params.get("limit") or 100))
        except (TypeError, ValueError):
            raise SlackError("invalid_limit") from None
        limit = max(1, min(limit, 999))
        top = [
            m
            for m in self.workspace.history(channel.id)
            if m.thread_ts is None or m.thread_ts == m.ts
        ][::-1]
        messages = [m.to_dict(with_metadata=with_metadata) for m in top[:limit]]
        return {"ok": True, "messages": messages, "has_more": len(top) > limit}

    def conversations_replies(self, params: Params) -> Response:
        """``conversations.replies``: a thread, parent first (metadata as in the history)."""
        channel = self.workspace.channel(_text(params, "channel", "channel_not_found"))
        ts = _text(params, "ts", "thread_not_found")
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("true", "1")
        parent = self.workspace.find_message(channel.id, ts)
        if parent is None:
            raise SlackError("thread_not_found")
        replies = [
            m for m in self.workspace.history(channel.id) if m.thread_ts == ts and m is not parent
        ]
        thread = [parent, *replies]
        return {"ok": True, "messages": [m.to_dict(with_metadata=with_metadata) for m in thread]}

    # chat

    def chat_post_message(self, params: Params) -> Response:
        """``chat.postMessage``: a user id as ``channel`` posts into that user's DM.

        The bot must be in the conversation, or it must be a public channel and the app
        hold ``chat:write.public``.
        """
        ref = _text(params, "channel", "channel_not_found")
        channel = self.workspace.channel(ref, users_open_dm=True)
        self.workspace.check_bot_posts(channel, public_scope=True)
        text, blocks = _content(params)
        if not text and not blocks:
            raise SlackError("no_text")
        text, extra = _checked(blocks, text)
        thread_ts = _optional_text(params, "thread_ts")
        metadata = _metadata(params.get("metadata"))
        message = self.workspace.post(channel, text=text, blocks=blocks or [], thread_ts=thread_ts)
        message.metadata = metadata
        return {
            "ok": True,
            "channel": channel.id,
            "ts": message.ts,
            "message": message.to_dict(),
            **extra,
        }

    def chat_get_permalink(self, params: Params) -> Response:
        """``chat.getPermalink``: a message's link, in Slack's ``/archives/C…/p…`` form."""
        channel = self._conversation(params)
        ts = _text(params, "message_ts", "message_not_found")
        self.workspace.message(channel.id, ts)
        domain = self.workspace.domain
        link = f"https://{domain}.slack.com/archives/{channel.id}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel.id, "permalink": link}

    def chat_update(self, params: Params) -> Response:
        """``chat.update``: ``channel`` must be the conversation id (a ``D…`` for DMs)."""
        channel = self._conversation(params)
        message = self.workspace.message(channel.id, _text(params, "ts", "message_not_found"))
        text, blocks = _content(params)
        if "text" not in params and "blocks" not in params and "markdown_text" not in params:
            raise SlackError("no_text")
        if text is not None and len(text) > RECOMMENDED_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        new_text = message.text if text is None else text
        new_blocks = message.blocks if blocks is None else blocks
        _checked(new_blocks, new_text)
        self.workspace.update(message, text=text, blocks=blocks)
        return {
            "ok": True,
            "channel": channel.id,
            "ts": message.ts,
            "text": message.text,
            "message": message.to_dict(),
        }

    def chat_post_ephemeral(self, params: Params) -> Response:
        """``chat.postEphemeral``: the bot and the user must be members of the channel.

        ``chat:write.public`` does not cover ephemeral messages (``bot/app/scopes.py`` asks only
        ``chat:write`` for them).
        """
        ref = _text(params, "channel", "channel_not_found")
        channel = self.workspace.channel(ref, users_open_dm=True)
        self.workspace.check_bot_posts(channel, public_scope=False)
        user = _text(params, "user", "user_not_found")
        text, blocks = _content(params)
        if not text and not blocks:
            raise SlackError("no_text")
        text, _ = _checked(blocks, text)
        thread_ts = _optional_text(params, "thread_ts")
        ephemeral = self.workspace.post_ephemeral(
            channel, user, text=text or "", blocks=blocks or [], thread_ts=thread_ts
        )
        return {"ok": True, "message_ts": ephemeral.ts}

    def chat_delete(self, params: Params) -> Response:
        """``chat.delete``."""
        channel = self._conversation(params)
        message = self.workspace.message(channel.id, _text(params, "ts", "message_not_found"))
        self.workspace.delete(message)
        return {"ok": True, "channel": channel.id, "ts": message.ts}

    def _conversation(self, params: Params) -> Channel:
        channel = self.workspace.channels.get(_text(params, "channel", "channel_not_found"))
        if channel is None:
            raise SlackError("channel_not_found")
        return channel

    # views

    def views_open(self, params: Params) -> Response:
        """``views.open``: needs an unused trigger id younger than three seconds."""
        trigger = self.workspace.check_trigger(_trigger_id(params))
        view = self.workspace.open_view(trigger, _view(params))
        return {"ok": True, "view": view.to_dict()}

    def views_push(self, params: Params) -> Response:
        """``views.push``: onto the trigger user's open stack."""
        trigger = self.workspace.check_trigger(_trigger_id(params))
        view = self.workspace.push_view(trigger.user, _view(params), trigger=trigger)
        return {"ok": True, "view": view.to_dict()}

    def views_update(self, params: Params) -> Response:
        """``views.update`` by ``view_id`` or ``external_id``, guarded by ``hash``."""
        view_id = _optional_text(params, "view_id")
        external_id = _optional_text(params, "external_id")
        if not view_id and not external_id:
            raise SlackError("invalid_arguments")
        view = self.workspace.find_view(view_id=view_id, external_id=external_id)
        definition = _view(params)
        hash_ = _optional_text(params, "hash")
        self.workspace.update_view(view, definition, hash=hash_)
        return {"ok": True, "view": view.to_dict()}

    def views_publish(self, params: Params) -> Response:
        """``views.publish``: set a person's App Home tab."""
        user_id = _text(params, "user_id", "invalid_arguments")
        view = self.workspace.publish_home(user_id, _view(params))
        return {"ok": True, "view": view}

    # files

    def files_get_upload_url_external(self, params: Params) -> Response:
        """``files.getUploadURLExternal``: reserve a file and hand out its upload URL."""
        filename = _text(params, "filename", "invalid_arguments")
        try:
            length = int(params.get("length"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SlackError("invalid_arguments") from None
        upload = self.workspace.new_file(filename, length)
        return {"ok": True, "upload_url": self._upload_url(upload.id), "file_id": upload.id}

    def files_complete_upload_external(self, params: Params) -> Response:
        """``files.completeUploadExternal``: share the uploaded files in a channel."""
        items = _json(params.get("files"), "invalid_arguments")
        if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
            raise SlackError("invalid_arguments")
        ref = _optional_text(params, "channel_id") or _optional_text(params, "channels")
        channel = None if not ref else self.workspace.channel(ref.split(",")[0])
        uploads = self.workspace.complete_upload(
            items,
            channel=channel,
            initial_comment=_optional_text(params, "initial_comment") or "",
            thread_ts=_optional_text(params, "thread_ts"),
        )
        return {"ok": True, "files": [u.to_dict() for u in uploads]}


Handler = Callable[[WebApi, Params], Response]
METHODS: Final[Mapping[str, Handler]] = {
    "auth.test": WebApi.auth_test,
    "users.info": WebApi.users_info,
    "usergroups.users.list": WebApi.usergroups_users_list,
    "conversations.info": WebApi.conversations_info,
    "conversations.open": WebApi.conversations_open,
    "conversations.history": WebApi.conversations_history,
    "conversations.replies": WebApi.conversations_replies,
    "chat.postMessage": WebApi.chat_post_message,
    "chat.update": WebApi.chat_update,
    "chat.getPermalink": WebApi.chat_get_permalink,
    "chat.postEphemeral": WebApi.chat_post_ephemeral,
    "chat.delete": WebApi.chat_delete,
    "views.open": WebApi.views_open,
    "views.push": WebApi.views_push,
    "views.update": WebApi.views_update,
    "views.publish": WebApi.views_publish,
    "files.getUploadURLExternal": WebApi.files_get_upload_url_external,
    "files.completeUploadExternal": WebApi.files_complete_upload_external,
}
"""Method name -> implementation; anything else answers ``unknown_method``."""


def _text(params: Params, key: str, error: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise SlackError(error)
    return value


def _optional_text(params: Params, key: str) -> str | None:
    value = params.get(key)
    return str(value) if value not in (None, "") else None


def _json(value: object, error: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackError(error) from None
    return value


def _metadata(value: object) -> dict[str, Any] | None:
    """Message metadata: ``{"event_type": str, "event_payload": object}`` (else refused)."""
    if value in (None, ""):
        return None
    data = _json(value, "invalid_metadata_format")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("event_type"), str)
        or not isinstance(data.get("event_payload"), dict)
    ):
        raise SlackError("invalid_metadata_format")
    return {"event_type": data["event_type"], "event_payload": data["event_payload"]}


def _content(params: Params) -> tuple[str | None, list[dict[str, Any]] | None]:
    """``text`` and ``blocks`` (a list, or ``None`` when not given); ``markdown_text`` too."""
    text = params.get("text")
    if text is not None and not isinstance(text, str):
        text = str(text)
    blocks = _json(params.get("blocks"), "invalid_blocks_format")
    if blocks is not None and not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format")
    markdown = params.get("markdown_text")
    if markdown is not None:
        if text is not None or blocks is not None:
            raise SlackError("markdown_text_conflict")
        return str(markdown), [{"type": "markdown", "text": str(markdown)}]
    return text, blocks


def _checked(blocks: list[dict[str, Any]] | None, text: str | None) -> tuple[str, Response]:
    """Text to store (truncated like Slack) and warnings; refuses blocks that break limits."""
    problems = [p for p in message_problems(blocks or [], text) if not p.warning]
    invalid = [str(p) for p in problems if p.code == INVALID_BLOCKS]
    if invalid:
        raise SlackError(
            "invalid_blocks",
            errors=invalid,
            response_metadata={"messages": [f"[ERROR] {line}" for line in invalid]},
        )
    too_long = [str(p) for p in problems if p.code == MSG_BLOCKS_TOO_LONG]
    if too_long:
        raise SlackError("msg_blocks_too_long", errors=too_long)
    text = text or ""
    if len(text) > MAX_MESSAGE_TEXT:
        warning = {"warning": "message_truncated"}
        return text[:MAX_MESSAGE_TEXT], {
            **warning,
            "response_metadata": {"warnings": ["message_truncated"]},
        }
    return text, {}


def _trigger_id(params: Params) -> str | None:
    value = params.get("trigger_id") or params.get("interactivity_pointer")
    return str(value) if value else None


def _view(params: Params) -> dict[str, Any]:
    view = _json(params.get("view"), "invalid_arguments")
    if not isinstance(view, dict):
        raise SlackError("invalid_arguments")
    problems = [str(p) for p in view_problems(view) if not p.warning]
    if problems:
        raise SlackError(
            "invalid_arguments",
            errors=problems,
            response_metadata={"messages": [f"[ERROR] {line}" for line in problems]},
        )
    return view
