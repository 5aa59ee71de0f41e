"""``HomeTab``: each person's App Home lists what waits for their answer (views.publish);
``render_home``, pure, renders that "Waiting for you" list of open questions they may answer."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.authorize import Conversations, Gatekeeper
from adapters.slack.asks.synchroniser import SLACK_FAILURES, MessageSynchroniser
from adapters.slack.blockkit import MAX_BUTTON_TEXT, MAX_SECTION_TEXT
from adapters.slack.model import ids
from adapters.slack.model.audience import Audience, Audiences, batches
from adapters.slack.model.audit_trail import SLACK_URL, permalink
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.options import button, button_labels
from adapters.slack.render.blocks.parts import answer_by, asker
from adapters.slack.render.layout import layout_of
from adapters.slack.render.mrkdwn import escape, mrkdwn, plain, reveal, shorten, shorten_escaped
from adapters.slack.render.rich import bold, italic, rich_text, words
from adapters.slack.stores import PendingStore
from adapters.slack.stores.viewers import HomeViewers
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskUserQuestionItem

Block = dict[str, Any]

MAX_HOME_ENTRIES: Final = 20
"""Questions listed at most (a Home tab holds 100 blocks; each entry takes up to four)."""
_SEPARATOR: Final = " · "
_ASKED_BY: Final = "Asked by "
_QUESTION_ROOM: Final = 2900
"""The most of a question's text an entry shows (a longer one is shortened: no one-tap answer)."""


def message_link(record: PendingRecord) -> str | None:
    """A link that opens the question's message in Slack (``None`` before it is posted)."""
    return permalink(SLACK_URL, record.message_channel or record.channel, record.message_ts)


def _ago(seconds: float) -> str:
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
    return f"<!date^{int(seconds)}^asked {{ago}}|asked {fallback}>"


def _facts(record: PendingRecord) -> str:
    """Where, by whom, when, the deadline and the link, as one context line. The asker's
    label (of any length) gets what the rest leaves: one long label cannot make Slack
    refuse the whole tab, and the link always shows."""
    where = record.message_channel or record.channel
    before = [f"<#{where}>"] if where.startswith(("C", "G")) else []
    after = [_ago(record.created_at)]
    if record.deadline is not None:
        after.append(answer_by(record.deadline))
    link = message_link(record)
    if link is not None:
        after.append(f"<{link}|Open the question>")
    who = (asker(record) or "").strip()
    if who:
        room = MAX_SECTION_TEXT - len(_SEPARATOR.join([*before, _ASKED_BY, *after]))
        before.append(_ASKED_BY + shorten_escaped(escape(who), room))
    return shorten_escaped(_SEPARATOR.join(before + after), MAX_SECTION_TEXT)


def _entry(record: PendingRecord) -> list[Block]:
    first = record.questions[0] if record.questions else None
    text = first.question.strip() if first is not None else ""
    more = len(record.questions) - 1
    if record.approval is not None:  # a tool approval: its headline is its question
        text = record.approval.headline.strip()
    pieces = [bold(shorten(text, _QUESTION_ROOM))] if text else [italic("(no question text)")]
    layout = layout_of(record.questions)
    kind = "Tool approval" if record.approval else "Plan review" if layout == "plan" else None
    if kind:
        pieces.insert(0, italic(f"{kind}: "))
    if more > 0:
        pieces.append(words(f" (+{more} more)"))
    blocks: list[Block] = [rich_text(*pieces)]
    blocks.append({"type": "context", "elements": [mrkdwn(_facts(record))]})
    if layout == "tap" and first is not None and _tappable(first, text):
        labels = enumerate(button_labels(first))  # as on the message: shortened ones never alike
        buttons = [
            button(text, ids.action_id("pick", i), ids.option_value(i)) for i, text in labels
        ]
        block_id = ids.block_id(record.id, 0, f"c{record.version}")
        blocks.append({"type": "actions", "block_id": block_id, "elements": buttons})
    return blocks


def _tappable(first: AskUserQuestionItem, text: str) -> bool:
    """Whether the entry may answer with one tap: only when it shows all the message shows
    before anyone chooses (the question whole; no detail nor descriptions; labels in full)."""
    if first.detail or len(text) > _QUESTION_ROOM:
        return False
    options = first.options or []
    if any((option.description or "").strip() for option in options):
        return False
    return all(len(reveal(label)) <= MAX_BUTTON_TEXT for label in first.option_labels)  # none cut


def render_home(records: Sequence[PendingRecord], total: int | None = None) -> Block:
    """The Home tab listing ``records`` (filtered for the person), oldest first; ``total``:
    how many they may answer in all, when ``records`` are only the oldest."""
    waiting = sorted((r for r in records if r.is_open), key=lambda r: r.created_at)
    blocks: list[Block] = [{"type": "header", "text": plain("Waiting for you")}]
    if not waiting:
        blocks.append(
            {"type": "section", "text": plain("Nothing is waiting for an answer from you.")}
        )
    for index, record in enumerate(waiting[:MAX_HOME_ENTRIES]):
        if index:
            blocks.append({"type": "divider"})
        blocks.extend(_entry(record))
    rest = max(len(waiting), total or 0) - min(len(waiting), MAX_HOME_ENTRIES)
    if rest > 0:
        blocks.append(
            {"type": "context", "elements": [plain(f"…and {rest} more, in the channels.")]}
        )
    return {"type": "home", "blocks": blocks}


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
        conversations: Conversations,
        *,
        viewers: HomeViewers,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._client, self._store, self._gate, self._sync = client, store, gate, sync
        self._logger, self._viewers, self._now = logger, viewers, now
        self._conversations = conversations  # the click path's too: a Home button's reads
        self._changed: set[str] = set()
        self._worker: asyncio.Task[None] | None = None

    def open_later(self, user: str) -> None:
        """``opened`` in a tracked background task: the listener returns at once."""
        self._sync.spawn(self.opened(user), "views.publish")

    async def opened(self, user: str) -> None:
        """``user`` opened the app's Home tab: remember them and publish their list."""
        try:
            await self._viewers.opened(user, self._now())
        except UserQuestionError as exc:  # their tab is still published, just not kept
            self._logger.warning(
                "home tab viewer not kept", extra={"user": user, "error": exc.code}
            )
        await self.publish(user)

    async def publish(self, user: str, round_: ListingRound | None = None) -> None:
        """Publish ``user``'s list of the open questions they may answer (from ``round_``)."""
        if round_ is None:
            round_ = await ListingRound.read(self._store, self._conversations)
        groups = await self._gate.groups_of(user, round_.audiences.usergroups)
        shown, total = await round_.listed(user, groups)
        try:
            await self._client.views_publish(user_id=user, view=render_home(shown, total=total))
        except SLACK_FAILURES as exc:
            self._logger.warning(
                "home tab not published", extra={"user": user, "error": type(exc).__name__}
            )

    def changed(self, request_id: str) -> None:
        """A question opened, changed or closed: republish the kept Home tabs it concerns
        (one round at a time)."""
        if self._viewers.known_empty():
            return  # nobody has opened a Home tab (and no other process shares the set)
        self._changed.add(request_id)
        if self._worker is None or self._worker.done():
            self._worker = self._sync.spawn(self._work(), "views.publish")

    async def _work(self) -> None:
        while self._changed:
            await asyncio.sleep(SETTLE)
            changed, self._changed = self._changed, set()
            await self._republish(changed)

    async def _republish(self, changed: set[str]) -> None:
        """One round: each viewer concerned by a ``changed`` request gets their list."""
        try:
            viewers = await self._viewers.current(self._now())
            if not viewers:
                return
            round_ = await ListingRound.read(self._store, self._conversations)
            # the changed records (one round trip); one unknown concerns everyone
            touched = await self._store.get_many(sorted(changed))
            everyone = None in touched
            for user in viewers:
                if everyone or [r for r in touched if r and await self._concerns(user, r)]:
                    await self.publish(user, round_)
        except UserQuestionError as exc:
            self._logger.warning("home tabs not republished", extra={"error": exc.code})

    async def _concerns(self, user: str, record: PendingRecord) -> bool:
        """Whether ``record`` is on ``user``'s list when open (the round's audiences' rule)."""
        audience = Audience.of(record, closed=True)
        if audience is not None and audience.channel is not None:
            audience = audience.resolved(await self._conversations.seen_by(audience.channel))
        if audience is None or audience.anyone:
            return audience is not None
        return await self._gate.allowed(user, audience.users, audience.usergroups)


class ListingRound:
    """One round's view of the store: the open questions' audiences, and the records listed
    so far (each read once: the oldest head most lists)."""

    def __init__(self, store: PendingStore, audiences: Audiences) -> None:
        self._store = store
        self.audiences = audiences
        self._read: dict[str, PendingRecord | None] = {}

    @classmethod
    async def read(
        cls, store: PendingStore, conversations: Conversations | None = None
    ) -> ListingRound:
        """A round over the open questions' audiences in ``store`` now; those naming nobody
        listed by who sees their conversation (without ``conversations``: only a DM's)."""
        audiences = Audiences()
        async for batch in batches(await store.open_audiences()):  # not all at once
            audiences.extend(batch)
        seen = await conversations.resolve(audiences.channels) if conversations is not None else {}
        audiences.resolve(seen)
        return cls(store, audiences)

    async def listed(self, user: str, groups: Iterable[str]) -> tuple[list[PendingRecord], int]:
        """``user``'s oldest open questions (``MAX_HOME_ENTRIES`` at most), given their user
        groups, and how many are open to them in all."""
        ids, total = self.audiences.waiting_for(user, groups, MAX_HOME_ENTRIES)
        unread = [request_id for request_id in ids if request_id not in self._read]
        if unread:  # in one read of the store
            self._read.update(zip(unread, await self._store.get_many(unread), strict=True))
        shown = [r for r in (self._read[i] for i in ids) if r is not None and r.is_open]
        return shown, total - (len(ids) - len(shown))
