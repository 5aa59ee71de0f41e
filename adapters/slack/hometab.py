"""``HomeTab``: each person's App Home lists what waits for their answer (views.publish).

Opening the Home tab (``app_home_opened``) publishes the person's "Waiting for you" list;
afterwards every question that opens or closes republishes it for everyone who has opened
their Home tab since the bot started (coalesced: one round of publishes at a time).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Final

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.authorize import Gatekeeper
from adapters.slack.failures import SLACK_FAILURES
from adapters.slack.home import render_home
from adapters.slack.stores import PendingStore
from adapters.slack.synchroniser import MessageSynchroniser

__all__ = ["MAX_VIEWERS", "HomeTab"]

MAX_VIEWERS: Final = 1000
"""People whose Home tab is kept up to date (the most recent openers)."""
SETTLE: Final = 0.2
"""Seconds a refresh waits so that changes arriving together publish once."""


class HomeTab:
    """Publishes "Waiting for you" Home tabs and keeps the opened ones current."""

    def __init__(
        self,
        client: AsyncWebClient,
        store: PendingStore,
        gate: Gatekeeper,
        sync: MessageSynchroniser,
        logger: logging.Logger,
    ) -> None:
        self._client = client
        self._store = store
        self._gate = gate
        self._sync = sync
        self._logger = logger
        self._viewers: OrderedDict[str, None] = OrderedDict()
        self._pending = False

    @property
    def viewers(self) -> list[str]:
        """People whose Home tab is kept current, oldest opener first."""
        return list(self._viewers)

    def open_later(self, user: str) -> None:
        """``opened``, in a tracked background task (the listener returns at once)."""
        self._sync.spawn(self.opened(user), "views.publish")

    async def opened(self, user: str) -> None:
        """``user`` opened the app's Home tab: remember them and publish their list."""
        self._viewers.pop(user, None)
        self._viewers[user] = None
        while len(self._viewers) > MAX_VIEWERS:
            self._viewers.popitem(last=False)
        await self.publish(user)

    async def publish(self, user: str) -> None:
        """Publish ``user``'s list of the open questions they may answer."""
        records = await self._store.open_records()
        mine = [
            record
            for record in records
            if record.questions  # questions only (tool approvals have their own panel)
            and await self._gate.allowed(user, record.allowed_users, record.allowed_usergroups)
        ]
        try:
            await self._client.views_publish(user_id=user, view=render_home(mine))
        except SLACK_FAILURES as exc:
            self._logger.warning(
                "home tab not published", extra={"user": user, "error": type(exc).__name__}
            )

    def changed(self, request_id: str | None = None) -> None:
        """A question opened or closed: republish every kept Home tab (coalesced)."""
        if self._pending or not self._viewers:
            return
        self._pending = True
        self._sync.spawn(self._refresh(), "views.publish")

    async def _refresh(self) -> None:
        await asyncio.sleep(SETTLE)
        self._pending = False
        for user in list(self._viewers):
            await self.publish(user)
