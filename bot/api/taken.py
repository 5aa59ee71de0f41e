"""The API's open questions once posted (or taken up at start): each holds a slot of the caps
until it ends, watched in the store with no task of its own; how it ended is logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from adapters.slack import BackgroundTasks, DeadlineUnkept, QuestionStatus, WaitReleased
from bot.api.access import ApiTokens, OpenQuestionCaps, asker_of
from bot.questions.errors import HarnessError

LOOK_AGAIN: Final = 5.0  # seconds before a watch that failed (store unreachable) is set again

Report = Callable[[str, QuestionStatus | BaseException | None], None]
Watch = Callable[[str, Report], Awaitable[bool]]  # the provider's ``report_ending``


class Held:
    """Open API questions holding a slot of the caps, each until it ends."""

    def __init__(
        self, caps: OpenQuestionCaps, tokens: ApiTokens, watch: Watch, logger: logging.Logger
    ) -> None:
        self._caps = caps
        self._tokens = tokens
        self._watch = watch
        self._logger = logger
        self.asked: dict[str, bool] = {}  # the ids held -> asked here (not taken up at start)
        self._looks = BackgroundTasks(logger)
        self.closing = False  # the gateway is closing: no new questions, none held again
        self._report = self._ended  # one bound method for every question held

    def take(self, questions: Iterable[QuestionStatus]) -> int:
        """Take a slot for each open API question of ``questions``; how many were taken."""
        taken = 0
        for question in questions:
            api, name = asker_of(question.asked_by)
            tagged = self._tokens.owner_of(question.id)
            if not question.is_open or not (api or tagged) or self._caps.holds(question.id):
                continue
            self._caps.take(question.id, tagged or name)
            self._looks.spawn(self.hold(question.id, asked=False), "hold")
            taken += 1
        return taken

    async def ask(self, request_id: str, asking: Awaitable[Any]) -> None:
        """Ask until the question is posted (its waiter let go then); then hold it."""
        try:
            await asking
        except WaitReleased:
            if self.closing:
                raise  # a stop: it stays open for the next process
            await self.hold(request_id, asked=True)

    async def hold(self, request_id: str, *, asked: bool) -> None:
        """Hold ``request_id``'s slot (taken already) until it ends."""
        self.asked[request_id] = asked
        try:
            if not await self._watch(request_id, self._report):
                self._ended(request_id, None)  # unknown: nothing holds the slot
        except Exception as exc:  # the store unreachable: looked at again later
            self._ended(request_id, exc)

    def _look_again(self, request_id: str) -> None:
        if request_id in self.asked and not self.closing:
            self._looks.spawn(self.hold(request_id, asked=self.asked[request_id]), "hold")

    def _ended(self, request_id: str, outcome: QuestionStatus | BaseException | None) -> None:
        if request_id not in self.asked:
            return
        unkept = isinstance(outcome, DeadlineUnkept)  # ended at its deadline, the store away
        if isinstance(outcome, BaseException) and not unkept and not self.closing:
            self._logger.info(  # the store is unreachable: look again later
                "cannot watch a question", extra={"request": request_id, "error": repr(outcome)}
            )
            asyncio.get_running_loop().call_later(LOOK_AGAIN, self._look_again, request_id)
            return
        del self.asked[request_id]
        self._caps.give_back(request_id)
        if isinstance(outcome, BaseException):  # a stop: it stays open for the next process
            self.log_end(request_id, outcome if unkept else WaitReleased())
        elif outcome is not None:
            self.log_end(request_id, outcome.error)

    def log_end(self, request_id: str, error: BaseException | None) -> None:
        """Log how a question ended: released at a stop, or its error (an answer: nothing)."""
        if isinstance(error, WaitReleased):
            self._logger.info("question released", extra={"request": request_id})
        elif error is not None:
            code = error.code if isinstance(error, HarnessError) else type(error).__name__
            self._logger.info("question ended", extra={"request": request_id, "code": code})
