"""The sandbox workspace: everything the Slack stand-in knows, kept in memory.

A ``Workspace`` holds users, user groups, channels (DMs opened per user), messages,
ephemeral messages, modal views, trigger ids, response URLs and uploaded files (the
dataclasses of ``records``). Every
operation is a plain method that either changes the state (and tells the observers with a
``Change``) or raises ``SlackError`` with the error code Slack's Web API would answer.
There is no I/O here: the HTTP layer (``webapi``) and a browser page both drive this model.

Times come from an injectable ``clock`` (seconds, like ``time.time``) so tests can expire
trigger ids and response URLs without sleeping.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from adapters.slack.sandbox.blockcheck.table import MAX_VIEW_STACK
from adapters.slack.sandbox.records import (
    Change,
    Channel,
    Ephemeral,
    Message,
    ResponseUrl,
    Revision,
    SlackError,
    Trigger,
    UploadedFile,
    User,
    Usergroup,
    View,
)

__all__ = [
    "RESPONSE_URL_LIFETIME",
    "RESPONSE_URL_USES",
    "TRIGGER_LIFETIME",
    "Clock",
    "Workspace",
]

Clock = Callable[[], float]
TRIGGER_LIFETIME: Final = 3.0
RESPONSE_URL_LIFETIME: Final = 30 * 60.0
RESPONSE_URL_USES: Final = 5


def _normalise(blocks: Iterable[Mapping[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Copy of ``blocks`` with a ``block_id``/``action_id`` wherever Slack would add one."""
    out = copy.deepcopy([dict(b) for b in blocks])
    for block in out:
        if block.get("type") == "markdown":
            block.pop("block_id", None)  # Slack ignores and drops a markdown block's id
            continue
        block.setdefault("block_id", _token(rng, 5))
        elements = list(block.get("elements") or []) if block.get("type") == "actions" else []
        for key in ("accessory", "element"):
            if isinstance(block.get(key), dict):
                elements.append(block[key])
        for element in elements:
            if isinstance(element, dict) and element.get("type") != "image":
                element.setdefault("action_id", _token(rng, 5))
    return out


def _token(rng: random.Random, size: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(rng.choice(alphabet) for _ in range(size))


class Workspace:
    """One Slack workspace with one bot installed, all in memory."""

    def __init__(
        self,
        *,
        team_id: str = "T0SANDBOX",
        domain: str = "sandbox",
        bot_name: str = "agent-questions",
        clock: Clock = time.time,
        seed: int = 0,
    ) -> None:
        self.team_id = team_id
        self.domain = domain
        self.clock = clock
        self.plan = "standard"
        """Set to ``"free"`` and ``usergroups.users.list`` answers ``plan_upgrade_required``."""
        self.chat_write_public = True
        """Whether the app holds ``chat:write.public`` (``manifest.yml`` asks for it): then
        ``chat.postMessage`` reaches a public channel the bot has not joined."""
        self.private_channels: set[str] = set()
        """Ids of private channels: one the bot is not in does not exist for it."""
        self._rng = random.Random(seed)
        self._counters: dict[str, int] = {}
        self._last_us = 0
        self.users: dict[str, User] = {}
        self.usergroups: dict[str, Usergroup] = {}
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, list[Message]] = {}
        self.ephemerals: list[Ephemeral] = []
        self.views: dict[str, View] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        """Each person's App Home tab, as ``views.publish`` last set it."""
        self.stacks: dict[str, list[str]] = {}
        self.triggers: dict[str, Trigger] = {}
        self.response_urls: dict[str, ResponseUrl] = {}
        self.files: dict[str, UploadedFile] = {}
        self._observers: list[Callable[[Change], None]] = []
        self.app_id = "A0SANDBOX"
        self.bot_id = self.mint("B")
        self.bot_user = self.add_user(bot_name, is_bot=True)

    # Ids, times, observers.

    def mint(self, prefix: str) -> str:
        """A fresh Slack-looking id such as ``U00000001`` or ``V00000003``."""
        return f"{prefix}{self._count(prefix):08X}"

    def _count(self, key: str) -> int:
        n = self._counters.get(key, 0) + 1
        self._counters[key] = n
        return n

    def next_ts(self) -> str:
        """A message timestamp like ``"1733150000.000100"``, strictly increasing."""
        us = max(int(self.clock() * 1_000_000), self._last_us + 1)
        self._last_us = us
        return f"{us // 1_000_000}.{us % 1_000_000:06d}"

    def observe(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback`` on every change; returns a function that stops it."""
        self._observers.append(callback)

        def stop() -> None:
            if callback in self._observers:
                self._observers.remove(callback)

        return stop

    def emit(self, kind: str, **data: Any) -> None:
        """Tell every observer about a change."""
        change = Change(kind, data)
        for callback in list(self._observers):
            callback(change)

    # Directory.

    def add_user(
        self, name: str, *, id: str | None = None, real_name: str = "", is_bot: bool = False
    ) -> User:
        """Add a member; ids are minted as ``U…`` unless given."""
        user = User(id or self.mint("U"), name, real_name=real_name, is_bot=is_bot)
        self.users[user.id] = user
        return user

    def add_channel(
        self,
        name: str,
        *,
        id: str | None = None,
        members: Iterable[str] | None = None,
        private: bool = False,
    ) -> Channel:
        """Add a channel; every user (the bot too) is a member unless ``members`` is given.

        A ``private`` channel needs the bot among ``members`` for the bot to post in it.
        """
        channel = Channel(
            id or self.mint("C"), name, members=None if members is None else set(members)
        )
        self.channels[channel.id] = channel
        if private:
            self.private_channels.add(channel.id)
        self.messages[channel.id] = []
        return channel

    def add_usergroup(
        self, handle: str, users: Iterable[str], *, id: str | None = None, name: str = ""
    ) -> Usergroup:
        """Add a user group (``S…``) with these members."""
        group = Usergroup(id or self.mint("S"), handle, name or handle, list(users))
        self.usergroups[group.id] = group
        return group

    def user(self, user_id: str) -> User:
        """The user with this id, or ``user_not_found``."""
        try:
            return self.users[user_id]
        except KeyError:
            raise SlackError("user_not_found") from None

    def user_ref(self, user_id: str) -> dict[str, str]:
        """The short user object of interaction payloads."""
        user = self.user(user_id)
        return {"id": user.id, "username": user.name, "name": user.name, "team_id": self.team_id}

    def open_dm(self, user_id: str) -> Channel:
        """The DM (``D…``) between the bot and ``user_id``, opened on first use."""
        user = self.user(user_id)
        for channel in self.channels.values():
            if channel.is_im and channel.user == user.id:
                return channel
        channel = Channel(
            self.mint("D"), user.id, is_im=True, user=user.id, members={user.id, self.bot_user.id}
        )
        self.channels[channel.id] = channel
        self.messages[channel.id] = []
        return channel

    def open_mpim(self, user_ids: Iterable[str]) -> Channel:
        """A group DM (``G…``) between the bot and these users."""
        members = {self.user(u).id for u in user_ids} | {self.bot_user.id}
        for channel in self.channels.values():
            if channel.is_mpim and channel.members == members:
                return channel
        name = "mpdm-" + "--".join(sorted(self.users[u].name for u in members))
        channel = Channel(self.mint("G"), name, is_mpim=True, members=members)
        self.channels[channel.id] = channel
        self.messages[channel.id] = []
        return channel

    def channel(self, ref: str, *, users_open_dm: bool = False) -> Channel:
        """The conversation ``ref`` names (an id, or ``#name``); a user id opens a DM if allowed."""
        if ref in self.channels:
            return self.channels[ref]
        if users_open_dm and ref in self.users:
            return self.open_dm(ref)
        name = ref.removeprefix("#")
        for channel in self.channels.values():
            if not (channel.is_im or channel.is_mpim) and channel.name == name:
                return channel
        raise SlackError("channel_not_found")

    def check_bot_posts(self, channel: Channel, *, public_scope: bool) -> None:
        """Refuse as Slack does when the bot may not post in ``channel``.

        A private channel the bot is not in is ``channel_not_found``; a public one is
        ``not_in_channel`` unless ``public_scope`` (the method honours ``chat:write.public``
        and the app holds it). A person's post and a ``response_url`` are not checked.
        """
        if channel.has_member(self.bot_user.id):
            return
        if channel.id in self.private_channels:
            raise SlackError("channel_not_found")
        if not (public_scope and self.chat_write_public):
            raise SlackError("not_in_channel")

    # Messages.

    def post(
        self,
        channel: Channel,
        *,
        text: str = "",
        blocks: Iterable[Mapping[str, Any]] = (),
        thread_ts: str | None = None,
        user: str | None = None,
        files: Iterable[dict[str, Any]] = (),
    ) -> Message:
        """Post a message: as the bot, or as ``user`` (a person typing in Slack)."""
        author = self.bot_user.id if user is None else self.user(user).id
        message = Message(
            channel=channel.id,
            ts=self.next_ts(),
            text=text,
            blocks=_normalise(blocks, self._rng),
            user=author,
            team=self.team_id,
            bot_id=self.bot_id if user is None else None,
            app_id=self.app_id if user is None else None,
            thread_ts=thread_ts,
            files=list(files),
        )
        if thread_ts is not None:
            parent = self.find_message(channel.id, thread_ts)
            if parent is not None:
                parent.replies.append(message.ts)
        self.messages.setdefault(channel.id, []).append(message)
        self.emit("message.posted", channel=channel.id, message=message.to_dict())
        return message

    def find_message(self, channel_id: str, ts: str) -> Message | None:
        """The message at ``ts`` in ``channel_id``, if any."""
        for message in self.messages.get(channel_id, []):
            if message.ts == ts:
                return message
        return None

    def message(self, channel_id: str, ts: str) -> Message:
        """The message at ``ts`` in ``channel_id``, or ``message_not_found``."""
        message = self.find_message(channel_id, ts)
        if message is None:
            raise SlackError("message_not_found")
        return message

    def history(self, channel_id: str) -> list[Message]:
        """Messages of a conversation, oldest first (thread replies included)."""
        return list(self.messages.get(channel_id, []))

    def all_messages(self) -> Iterator[Message]:
        """Every message in the workspace, channel by channel."""
        for messages in self.messages.values():
            yield from messages

    def update(
        self,
        message: Message,
        *,
        text: str | None = None,
        blocks: Iterable[Mapping[str, Any]] | None = None,
    ) -> Message:
        """Edit a bot message; ``None`` keeps that part, ``[]`` removes the blocks."""
        if message.bot_id != self.bot_id:
            raise SlackError("cant_update_message")
        edited_at = self.next_ts()
        message.edits.append(Revision(message.text, copy.deepcopy(message.blocks), edited_at))
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = _normalise(blocks, self._rng)
        self.emit("message.updated", channel=message.channel, message=message.to_dict())
        return message

    def delete(self, message: Message) -> None:
        """Delete a bot message."""
        if message.bot_id != self.bot_id:
            raise SlackError("cant_delete_message")
        self.messages[message.channel].remove(message)
        self.emit("message.deleted", channel=message.channel, ts=message.ts)

    def post_ephemeral(
        self,
        channel: Channel,
        user_id: str,
        *,
        text: str = "",
        blocks: Iterable[Mapping[str, Any]] = (),
        thread_ts: str | None = None,
    ) -> Ephemeral:
        """Show ``user_id`` a message only they see; they must be in the channel."""
        user = self.user(user_id)
        if not channel.has_member(user.id):
            raise SlackError("user_not_in_channel")
        ephemeral = Ephemeral(
            channel=channel.id,
            ts=self.next_ts(),
            user=user.id,
            text=text,
            blocks=_normalise(blocks, self._rng),
            bot_id=self.bot_id,
            app_id=self.app_id,
            thread_ts=thread_ts,
        )
        self.ephemerals.append(ephemeral)
        self.emit("ephemeral.posted", user=user.id, channel=channel.id, message=ephemeral.to_dict())
        return ephemeral

    def find_ephemeral(self, ts: str) -> Ephemeral | None:
        """The ephemeral message at ``ts``, if still shown."""
        return next((e for e in self.ephemerals if e.ts == ts), None)

    def ephemerals_for(self, user_id: str) -> list[Ephemeral]:
        """Ephemeral messages ``user_id`` currently sees."""
        return [e for e in self.ephemerals if e.user == user_id]

    # Interactions: trigger ids and response URLs.

    def issue_trigger(self, user_id: str, *, view_id: str | None = None) -> str:
        """Mint a trigger id for an interaction by ``user_id`` (from a view, if ``view_id``)."""
        now = self.clock()
        trigger_id = f"{int(now)}.{self._count('trigger')}.{self._rng.getrandbits(64):016x}"
        self.triggers[trigger_id] = Trigger(trigger_id, self.user(user_id).id, now, view_id)
        return trigger_id

    def check_trigger(self, trigger_id: object) -> Trigger:
        """The trigger if still usable, else ``invalid``/``exchanged``/``expired_trigger_id``."""
        trigger = self.triggers.get(trigger_id) if isinstance(trigger_id, str) else None
        if trigger is None:
            raise SlackError("invalid_trigger_id")
        if trigger.used:
            raise SlackError("exchanged_trigger_id")
        if self.clock() - trigger.issued_at > TRIGGER_LIFETIME:
            raise SlackError("expired_trigger_id")
        return trigger

    def issue_response_url(
        self, channel_id: str, user_id: str, message_ts: str | None, *, is_ephemeral: bool = False
    ) -> str:
        """Mint a response URL token for an interaction on a message."""
        token = f"{self.mint('R')}/{self._rng.getrandbits(96):024x}"
        self.response_urls[token] = ResponseUrl(
            token, channel_id, user_id, message_ts, is_ephemeral, self.clock()
        )
        return token

    def respond(self, token: str, body: Mapping[str, Any]) -> None:
        """Apply a ``response_url`` POST (``replace_original``/``delete_original``/new message)."""
        hook = self.response_urls.get(token)
        if hook is None:
            raise SlackError("invalid_token")
        if self.clock() - hook.issued_at > RESPONSE_URL_LIFETIME:
            raise SlackError("expired_url")
        if hook.uses >= RESPONSE_URL_USES:
            raise SlackError("used_url")
        hook.uses += 1
        channel = self.channels[hook.channel]
        original: Message | Ephemeral | None = None
        if hook.message_ts is not None:
            if hook.is_ephemeral:
                original = self.find_ephemeral(hook.message_ts)
            else:
                original = self.find_message(hook.channel, hook.message_ts)
        text, blocks = body.get("text"), body.get("blocks")
        if body.get("delete_original"):
            if original is None:
                raise SlackError("message_not_found")
            self._remove(original)
        elif body.get("replace_original"):
            if original is None:
                raise SlackError("message_not_found")
            if isinstance(original, Message):
                self.update(original, text=text if text is not None else "", blocks=blocks or [])
            else:
                original.text = text if text is not None else ""
                original.blocks = _normalise(blocks or [], self._rng)
                self.emit(
                    "ephemeral.updated",
                    user=original.user,
                    channel=original.channel,
                    message=original.to_dict(),
                )
        elif body.get("response_type") == "in_channel":
            self.post(
                channel, text=text or "", blocks=blocks or [], thread_ts=body.get("thread_ts")
            )
        else:
            self.post_ephemeral(
                channel,
                hook.user,
                text=text or "",
                blocks=blocks or [],
                thread_ts=body.get("thread_ts"),
            )

    def _remove(self, original: Message | Ephemeral) -> None:
        if isinstance(original, Message):
            self.delete(original)
        else:
            self.ephemerals.remove(original)
            self.emit("ephemeral.deleted", user=original.user, ts=original.ts)

    # Views.

    def open_view(self, trigger: Trigger, definition: Mapping[str, Any]) -> View:
        """Open a modal for the trigger's user, replacing any modal they had open."""
        self._claim_external_id(definition, None)
        trigger.used = True
        for view_id in reversed(self.stacks.get(trigger.user, [])):
            self._close(view_id)
        view = self._new_view(trigger.user, definition, root=None)
        self.stacks[trigger.user] = [view.id]
        self.emit("view.opened", user=view.user, view=view.to_dict())
        return view

    def push_view(
        self, user_id: str, definition: Mapping[str, Any], *, trigger: Trigger | None = None
    ) -> View:
        """Push a modal on ``user_id``'s stack (at most three deep), using up ``trigger``."""
        stack = self.stacks.get(user_id, [])
        if not stack:
            raise SlackError("not_found")
        if len(stack) >= MAX_VIEW_STACK:
            raise SlackError("push_limit_reached")
        self._claim_external_id(definition, None)
        if trigger is not None:
            trigger.used = True
        view = self._new_view(user_id, definition, root=self.views[stack[0]])
        view.previous_view_id = stack[-1]
        stack.append(view.id)
        self.emit("view.pushed", user=view.user, view=view.to_dict())
        return view

    def find_view(self, *, view_id: str | None = None, external_id: str | None = None) -> View:
        """An open view by id or external id, or ``not_found``."""
        for view in self.views.values():
            if (view_id and view.id == view_id) or (
                external_id and view.external_id == external_id
            ):
                return view
        raise SlackError("not_found")

    def update_view(
        self, view: View, definition: Mapping[str, Any], *, hash: str | None = None
    ) -> View:
        """Replace a view's definition; a stale ``hash`` gives ``hash_conflict``."""
        if hash is not None and hash != view.hash:
            raise SlackError("hash_conflict")
        self._claim_external_id(definition, view.id)
        view.definition = copy.deepcopy(dict(definition))
        view.definition["blocks"] = _normalise(definition.get("blocks") or [], self._rng)
        view.hash = self._view_hash()
        view.values = {}
        view.errors = {}
        self.emit("view.updated", user=view.user, view=view.to_dict())
        return view

    def close_view(self, view_id: str, *, everything: bool = False) -> None:
        """Close a view and the ones above it (``everything``: the whole stack)."""
        view = self.find_view(view_id=view_id)
        stack = self.stacks.get(view.user, [])
        cut = 0 if everything else stack.index(view.id)
        for closing in reversed(stack[cut:]):
            self._close(closing)
        del stack[cut:]
        if not stack:
            self.stacks.pop(view.user, None)

    def set_view_errors(self, view_id: str, errors: Mapping[str, str]) -> None:
        """Show validation errors under input blocks (``response_action: errors``)."""
        view = self.find_view(view_id=view_id)
        view.errors = dict(errors)
        self.emit("view.errors", user=view.user, view_id=view.id, errors=dict(errors))

    def _close(self, view_id: str) -> None:
        view = self.views.pop(view_id)
        self.emit("view.closed", user=view.user, view_id=view.id)

    def _new_view(self, user_id: str, definition: Mapping[str, Any], *, root: View | None) -> View:
        view_id = self.mint("V")
        data = copy.deepcopy(dict(definition))
        data["blocks"] = _normalise(definition.get("blocks") or [], self._rng)
        view = View(
            id=view_id,
            user=user_id,
            team_id=self.team_id,
            app_id=self.app_id,
            bot_id=self.bot_id,
            definition=data,
            hash=self._view_hash(),
            root_view_id=root.id if root is not None else view_id,
        )
        self.views[view.id] = view
        return view

    def _view_hash(self) -> str:
        return f"{int(self.clock())}.{_token(self._rng, 8)}"

    def _claim_external_id(self, definition: Mapping[str, Any], owner: str | None) -> None:
        external_id = definition.get("external_id")
        if not external_id:
            return
        for view in self.views.values():
            if view.id != owner and view.external_id == external_id:
                raise SlackError("duplicate_external_id")

    # Files.

    def new_file(self, filename: str, length: int) -> UploadedFile:
        """Reserve a file for an external upload."""
        upload = UploadedFile(self.mint("F"), filename, length, self.bot_user.id, int(self.clock()))
        self.files[upload.id] = upload
        return upload

    def receive_upload(self, file_id: str, content: bytes) -> UploadedFile:
        """Store the bytes sent to a file's upload URL."""
        upload = self.files.get(file_id)
        if upload is None or upload.completed:
            raise SlackError("file_not_found")
        upload.content = content
        return upload

    def complete_upload(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        channel: Channel | None,
        initial_comment: str = "",
        thread_ts: str | None = None,
    ) -> list[UploadedFile]:
        """Finish uploads and share them in ``channel`` as one message."""
        items = list(items)
        uploads: list[UploadedFile] = []
        for item in items:
            upload = self.files.get(str(item.get("id")))
            if upload is None or upload.content is None or upload.completed:
                raise SlackError("file_not_found")
            uploads.append(upload)
        for upload, item in zip(uploads, items, strict=True):
            upload.completed = True
            upload.title = str(item.get("title") or upload.name)
            if channel is not None:
                upload.channels.append(channel.id)
        if channel is not None:
            self.post(
                channel,
                text=initial_comment,
                thread_ts=thread_ts,
                files=[u.to_dict() for u in uploads],
            )
        self.emit("files.shared", files=[u.to_dict() for u in uploads])
        return uploads

    def publish_home(self, user_id: str, definition: Mapping[str, Any]) -> dict[str, Any]:
        """``views.publish``: set ``user_id``'s Home tab (a ``home`` view)."""
        if user_id not in self.users:
            raise SlackError("user_not_found")
        if definition.get("type") != "home":
            raise SlackError("invalid_arguments")
        previous = self.home_views.get(user_id)
        view = copy.deepcopy(dict(definition))
        view["blocks"] = _normalise(view.get("blocks") or [], self._rng)
        view["id"] = previous["id"] if previous else self.mint("V")
        view["hash"] = f"{self.clock():.6f}"
        self.home_views[user_id] = view
        self.emit("home", user=user_id, view_id=view["id"])
        return copy.deepcopy(view)

    # For a live page.

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-ready data."""
        return {
            "team": {"id": self.team_id, "domain": self.domain, "plan": self.plan},
            "bot": {"user_id": self.bot_user.id, "bot_id": self.bot_id, "app_id": self.app_id},
            "users": [u.to_dict(self.team_id) for u in self.users.values()],
            "usergroups": [
                {"id": g.id, "handle": g.handle, "name": g.name, "users": list(g.users)}
                for g in self.usergroups.values()
            ],
            "channels": [
                {**c.to_dict(), "messages": [m.to_dict() for m in self.messages.get(c.id, [])]}
                for c in self.channels.values()
            ],
            "ephemerals": [
                {"user": e.user, "channel": e.channel, **e.to_dict()} for e in self.ephemerals
            ],
            "views": [
                {"user": v.user, "errors": dict(v.errors), **v.to_dict()}
                for v in self.views.values()
            ],
            "files": [f.to_dict() for f in self.files.values() if f.completed],
            "home_views": copy.deepcopy(self.home_views),
        }
