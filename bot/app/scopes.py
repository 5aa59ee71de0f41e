"""The Slack Web API methods the bot calls, and the bot scopes each needs: ``manifest.yml``
asks exactly ``BOT_SCOPES`` (``tests/app/test_manifest.py`` checks both against the code)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

METHOD_SCOPES: Final[dict[str, tuple[str, ...]]] = {
    # bolt calls it once to learn the bot's own user id.
    "auth.test": (),
    # Socket Mode's URL, asked with SLACK_APP_TOKEN (connections:write is not a bot scope).
    "apps.connections.open": (),
    # chat:write.public lets the bot post into a public channel it has not joined.
    "chat.postMessage": ("chat:write", "chat:write.public"),
    "chat.update": ("chat:write",),
    "chat.postEphemeral": ("chat:write",),
    # A revised plan review links to the review it revises.
    "chat.getPermalink": (),
    # No conversations.open (im:write): a question for a user is posted with their U… id as
    # the channel, and the D… id that chat.postMessage returns is kept for chat.update.
    "views.open": (),
    "views.update": (),
    "views.push": (),
    # The App Home tab's "Waiting for you" list (no scope, nor for app_home_opened).
    "views.publish": (),
    # Who can see a question that names nobody, for the Home tab: a public channel's is
    # listed for anyone, a DM's for its user, a private channel's or group DM's for nobody.
    "conversations.info": ("channels:read", "groups:read", "im:read", "mpim:read"),
    # Members of SLACK_ALLOWED_USERGROUPS.
    "usergroups.users.list": ("usergroups:read",),
    # A restarted bot, or one whose post timed out, finds its messages by their metadata
    # (posting metadata needs no scope; reading it back needs the history scopes).
    "conversations.history": ("channels:history", "groups:history"),
    # The same for a question in a thread, among the thread's replies.
    "conversations.replies": ("channels:history", "groups:history"),
    # A plan or detail too long for the thread cap, uploaded as one file.
    "files.getUploadURLExternal": ("files:write",),
    "files.completeUploadExternal": ("files:write",),
}
"""Web API method -> the bot scopes it needs (an empty tuple: none)."""


def scopes_for(methods: Iterable[str]) -> tuple[str, ...]:
    """The sorted union of the bot scopes ``methods`` need; unknown methods raise KeyError."""
    return tuple(sorted({scope for method in methods for scope in METHOD_SCOPES[method]}))


BOT_SCOPES: Final[tuple[str, ...]] = scopes_for(METHOD_SCOPES)
"""Every bot scope the app requests, sorted."""
