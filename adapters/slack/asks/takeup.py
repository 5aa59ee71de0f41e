"""``TakeUp``: posts, or finds in Slack, the messages of questions another process left."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.posting import Poster
from adapters.slack.asks.reconcile import posted_in
from adapters.slack.asks.synchroniser import MessageSynchroniser
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.approval import render_record
from adapters.slack.stores import PendingStore, settle
from bot.questions import UserQuestionError

__all__ = ["TakeUp"]

_Place = tuple[str, str | None]


class TakeUp:
    """Claims unposted questions for this process and posts them (one search per place)."""

    def __init__(
        self,
        poster: Poster,
        client: AsyncWebClient,
        store: PendingStore,
        sync: MessageSynchroniser,
        logger: logging.Logger,
    ) -> None:
        self._poster = poster
        self._client = client
        self._store = store
        self._sync = sync
        self._logger = logger

    async def claim(self, records: Iterable[PendingRecord]) -> list[PendingRecord]:
        """Take for this process those of ``records`` still open, unowned and unposted."""
        me = self._store.process_id
        claimed: list[PendingRecord] = []
        for record in records:
            _, written = await settle(
                self._store,
                record.id,
                lambda r: (
                    r.next(owner=me, detached=True)
                    if r.is_open and r.owner is None and r.message_ts is None
                    else None
                ),
            )
            if written is not None:
                claimed.append(written)
        return claimed

    def take_up(self, records: list[PendingRecord]) -> None:
        """Post (or find in Slack) the messages of ``records``, in the background."""
        if self._poster.closing:
            return  # stopping: they stay this process's until its heartbeat is gone
        places: dict[_Place, list[PendingRecord]] = defaultdict(list)
        for record in records:
            places[(record.channel, record.thread_ts)].append(record)
        for place, waiting in places.items():
            self._sync.spawn(self._take_up(place, waiting), "take up posts")

    async def _take_up(self, place: _Place, records: list[PendingRecord]) -> None:
        found = await posted_in(self._client, place, min(r.created_at for r in records))
        for record in records:
            ts = found.get(record.id)
            if ts is not None:
                await self._adopt(record, ts)
            else:
                self._sync.spawn(self._post_taken(record), "post taken up")
        self._logger.info(
            "took up %d question(s) whose message was not stored (%d found in Slack)",
            len(records),
            sum(r.id in found for r in records),
            extra={"channel": place[0]},
        )

    async def _adopt(self, record: PendingRecord, ts: str) -> None:
        """Slack has ``record``'s message: the record learns it (owned by no process)."""
        me = self._store.process_id

        def found(r: PendingRecord) -> PendingRecord | None:
            if not r.is_open or r.message_ts is not None or r.owner != me:
                return None
            return r.next(message_ts=ts, message_channel=record.channel, owner=None)

        await self._sync.write(record.id, found, event=self._poster.asked)

    async def _post_taken(self, record: PendingRecord) -> None:
        try:
            await self._poster.post(record, render_record(record))
        except UserQuestionError as exc:  # failed (the record says so) or handed over
            self._logger.info(
                "a question taken up was not posted",
                extra={"request": record.id, "code": exc.code},
            )

    async def post_again(self, record: PendingRecord) -> None:
        """Post an open request again whose message is gone (deleted while no bot ran)."""
        gone = record.message_ts

        def unplaced(r: PendingRecord) -> PendingRecord | None:
            return r.next(message_ts=None) if r.is_open and r.message_ts == gone else None

        _, written = await settle(self._store, record.id, unplaced)
        if written is not None:
            await self._poster.post(written, render_record(written))
