"""A question longer than one block keeps its beginning and its end, never silently cut.

Through real parts (the harness, the Slack stand-in, ``check_message``): the posted
message, the free-text modal and the final record all show the question's end (where a
model usually puts the question itself) and say how many characters are left out.
"""

from __future__ import annotations

import re
import time

from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.message import render_final, render_open
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from tests.slack_harness import SlackHarness, all_text

CONTEXT = "Context: " + "the nightly export retried and failed again. " * 70
ASK = "So: should I DROP the staging table now?"
QUESTION = CONTEXT + ASK
GAP = re.compile(r"\[… ([\d,]+) characters left out here …\]")


def _check(text: str) -> None:
    assert ASK in text, text[-200:]
    assert text.startswith("Context: the nightly export") or "Context: the nightly" in text
    gap = GAP.search(text)
    assert gap is not None
    assert 0 < int(gap[1].replace(",", "")) < len(QUESTION)


async def test_a_long_question_shows_its_end_in_the_message_and_the_modal() -> None:
    assert len(QUESTION) > 3000
    request = {"questions": [{"id": "q", "question": QUESTION, "options": []}]}
    async with SlackHarness() as h:
        h.ask(request)
        message = await h.posted()
        assert check_message(message.blocks, message.text) == []
        _check(all_text(message.blocks))
        await h.click(message, h.alice, text="Answer…")
        view = await h.modal(h.alice)
        _check(all_text(view.definition["blocks"]))


def test_a_long_question_shows_its_end_in_the_final_record() -> None:
    record = PendingRecord(
        id="0123456789abcdef0123",
        owner="p",
        channel="C1",
        questions=[
            AskUserQuestionItem.model_validate(
                {"id": "q", "question": QUESTION, "options": [{"label": "Yes"}, {"label": "No"}]}
            )
        ],
        state="answered",
        answered_by="U0BOB",
        answered_by_name="bob",
        finished_at=time.time(),
        answer=AskUserQuestionAnswer.model_validate({"answers": [{"id": "q", "selected": ["No"]}]}),
    )
    out = render_final(record)
    assert check_message(out.blocks, out.text) == []
    _check(all_text(out.blocks))


def test_a_question_that_fits_is_shown_as_typed() -> None:
    record = PendingRecord(
        id="0123456789abcdef0123",
        owner="p",
        channel="C1",
        questions=[AskUserQuestionItem.model_validate({"id": "q", "question": ASK, "options": []})],
    )
    text = all_text(render_open(record).blocks)
    assert ASK in text and "left out" not in text
