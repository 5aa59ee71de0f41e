"""The API's open questions a starting bot took up from an earlier process: each holds a slot
of the open-question caps until it ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from adapters.slack import QuestionStatus
from bot.api.access import ApiTokens, OpenQuestionCaps, asker_of
from bot.questions.errors import HarnessError

__all__ = ["TakenUp"]

LOOK_AGAIN: Final = 5.0
"""Seconds before a watch that failed (the store unreachable) is set again."""


class TakenUp:
    """Slots of the caps held by questions taken up at start, each until it ends."""

    def __init__(
        self,
        caps: OpenQuestionCaps,
        tokens: ApiTokens,
        wait_ended: Callable[[str], Awaitable[object]],
        logger: logging.Logger,
    ) -> None:
        self._caps = caps
        self._tokens = tokens
        self._wait_ended = wait_ended
        self._logger = logger
        self._holding: dict[str, asyncio.Task[None]] = {}

    @property
    def count(self) -> int:
        """Questions taken up that hold a slot now."""
        return len(self._holding)

    def take(self, questions: Iterable[QuestionStatus]) -> int:
        """Take a slot for each open API question of ``questions``; how many were taken."""
        taken = 0
        for question in questions:
            api, name = asker_of(question.asked_by)
            tagged = self._tokens.owner_of(question.id)
            if not question.is_open or not (api or tagged) or self._caps.holds(question.id):
                continue
            self._caps.take(question.id, tagged or name)
            task = asyncio.ensure_future(self._hold(question.id))
            self._holding[question.id] = task
            taken += 1
        return taken

    def close(self) -> None:
        """Stop watching (shutdown): the questions stay open for the next process."""
        for task in self._holding.values():
            task.cancel()

    async def _hold(self, request_id: str) -> None:
        try:
            while True:
                try:
                    await self._wait_ended(request_id)
                    return
                except HarnessError as exc:  # the store is unreachable: look again later
                    self._logger.info(
                        "cannot watch a question taken up",
                        extra={"request": request_id, "error": exc.code},
                    )
                    await asyncio.sleep(LOOK_AGAIN)
        finally:
            self._caps.give_back(request_id)
            self._holding.pop(request_id, None)
