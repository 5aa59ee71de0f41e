"""The records the sandbox workspace keeps: users, conversations, messages, views, files.

Plain dataclasses with the ``to_dict`` Slack's API would show; ``SlackError`` is a Web API
refusal and ``Change`` what observers are told. The behaviour lives in ``state.Workspace``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Change",
    "Channel",
    "Ephemeral",
    "Message",
    "ResponseUrl",
    "Revision",
    "SlackError",
    "Trigger",
    "UploadedFile",
    "User",
    "Usergroup",
    "View",
]


class SlackError(Exception):
    """A Web API refusal: ``code`` is Slack's ``error`` string, ``extra`` more response keys."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.extra = extra


@dataclass(frozen=True, slots=True)
class Change:
    """One state change, for observers: ``kind`` such as ``message.posted`` and its data."""

    kind: str
    data: dict[str, Any]


@dataclass(slots=True)
class User:
    """A workspace member."""

    id: str
    name: str
    real_name: str = ""
    is_bot: bool = False
    deleted: bool = False
    tz: str = "UTC"

    def to_dict(self, team_id: str) -> dict[str, Any]:
        """The ``user`` object of ``users.info``."""
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "real_name": self.real_name or self.name,
            "deleted": self.deleted,
            "is_bot": self.is_bot,
            "tz": self.tz,
            "profile": {
                "real_name": self.real_name or self.name,
                "display_name": self.name,
            },
        }


@dataclass(slots=True)
class Usergroup:
    """A user group (``S…``) and its members."""

    id: str
    handle: str
    name: str
    users: list[str]


@dataclass(slots=True)
class Channel:
    """A conversation: a channel (``C…``), a DM (``D…``) or a group DM (``G…``).

    ``members`` ``None`` means every workspace user is a member (the default for channels).
    """

    id: str
    name: str
    is_im: bool = False
    is_mpim: bool = False
    user: str | None = None
    members: set[str] | None = None

    def has_member(self, user_id: str) -> bool:
        """Whether ``user_id`` belongs to this conversation."""
        return self.members is None or user_id in self.members

    def to_dict(self) -> dict[str, Any]:
        """The conversation object Slack returns."""
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "is_channel": not (self.is_im or self.is_mpim),
            "is_im": self.is_im,
            "is_mpim": self.is_mpim,
        }
        if self.user is not None:
            data["user"] = self.user
        return data


@dataclass(slots=True)
class Revision:
    """An earlier version of an edited message and when it was replaced."""

    text: str
    blocks: list[dict[str, Any]]
    replaced_at: str


@dataclass(slots=True)
class Message:
    """A message in a channel; ``user`` is the author, ``bot_id`` set when the bot posted it."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    user: str
    team: str
    bot_id: str | None = None
    app_id: str | None = None
    thread_ts: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    edits: list[Revision] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None

    def to_dict(self, *, with_metadata: bool = False) -> dict[str, Any]:
        """The message object as Slack shows it (``metadata`` only where it is asked for)."""
        data: dict[str, Any] = {
            "type": "message",
            "ts": self.ts,
            "user": self.user,
            "team": self.team,
            "text": self.text,
        }
        if self.bot_id is not None:
            data["bot_id"] = self.bot_id
            data["app_id"] = self.app_id
        if self.blocks:
            data["blocks"] = copy.deepcopy(self.blocks)
        if self.thread_ts is not None:
            data["thread_ts"] = self.thread_ts
        if self.replies:
            data["reply_count"] = len(self.replies)
            data["latest_reply"] = self.replies[-1]
        if self.files:
            data["files"] = copy.deepcopy(self.files)
        if self.edits:
            data["edited"] = {"user": self.user, "ts": self.edits[-1].replaced_at}
        if with_metadata and self.metadata is not None:
            data["metadata"] = copy.deepcopy(self.metadata)
        return data


@dataclass(slots=True)
class Ephemeral:
    """An ephemeral message, seen only by ``user``; Slack keeps no copy."""

    channel: str
    ts: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    bot_id: str
    app_id: str
    thread_ts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The message object (ephemeral messages carry no author ``user``)."""
        data: dict[str, Any] = {
            "type": "message",
            "subtype": "bot_message",
            "ts": self.ts,
            "text": self.text,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "blocks": copy.deepcopy(self.blocks),
        }
        if self.thread_ts is not None:
            data["thread_ts"] = self.thread_ts
        return data


@dataclass(slots=True)
class View:
    """An open modal: the app's definition plus Slack's bookkeeping."""

    id: str
    user: str
    team_id: str
    app_id: str
    bot_id: str
    definition: dict[str, Any]
    hash: str
    root_view_id: str
    previous_view_id: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def external_id(self) -> str:
        """The app's ``external_id`` ("" when none)."""
        return str(self.definition.get("external_id") or "")

    def to_dict(self) -> dict[str, Any]:
        """The view object of ``views.*`` responses and of interaction payloads."""
        d = self.definition
        return {
            "id": self.id,
            "team_id": self.team_id,
            "type": d.get("type", "modal"),
            "blocks": copy.deepcopy(d.get("blocks", [])),
            "private_metadata": d.get("private_metadata", ""),
            "callback_id": d.get("callback_id", ""),
            "state": {"values": copy.deepcopy(self.values)},
            "hash": self.hash,
            "title": copy.deepcopy(d.get("title")),
            "clear_on_close": bool(d.get("clear_on_close", False)),
            "notify_on_close": bool(d.get("notify_on_close", False)),
            "close": copy.deepcopy(d.get("close")),
            "submit": copy.deepcopy(d.get("submit")),
            "previous_view_id": self.previous_view_id,
            "root_view_id": self.root_view_id,
            "app_id": self.app_id,
            "external_id": self.external_id,
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }


@dataclass(slots=True)
class Trigger:
    """A ``trigger_id`` handed out with an interaction: valid once, for three seconds."""

    id: str
    user: str
    issued_at: float
    view_id: str | None = None
    used: bool = False


@dataclass(slots=True)
class ResponseUrl:
    """A ``response_url``: five uses in thirty minutes, bound to the message it came from."""

    token: str
    channel: str
    user: str
    message_ts: str | None
    is_ephemeral: bool
    issued_at: float
    uses: int = 0


@dataclass(slots=True)
class UploadedFile:
    """A file from ``files.getUploadURLExternal``; ``content`` arrives with the upload."""

    id: str
    name: str
    length: int
    user: str
    created: int
    title: str = ""
    content: bytes | None = None
    channels: list[str] = field(default_factory=list)
    completed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The file object Slack returns."""
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title or self.name,
            "user": self.user,
            "created": self.created,
            "size": len(self.content) if self.content is not None else self.length,
            "mimetype": "text/plain",
            "filetype": "text",
            "channels": list(self.channels),
        }
