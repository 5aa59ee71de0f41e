"""The message as a record of its outcome: who answered what, and when (pure)."""

from __future__ import annotations

from adapters.slack.blockkit import MAX_BLOCKS_MESSAGE, MAX_HEADER_TEXT, MAX_SECTION_TEXT
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.open_message import shown_details
from adapters.slack.render.blocks.overflow import (
    detail_blocks,
    detail_shares,
    fitted,
    label_within,
    outcome_limit,
)
from adapters.slack.render.blocks.parts import (
    MAX_FALLBACK_TEXT,
    Block,
    Rendered,
    byline_blocks,
    context,
    fallback,
    header_block,
    link_blocks,
    question_block,
    tally_blocks,
)
from adapters.slack.render.layout import layout_of
from adapters.slack.render.messages import NO_LONGER_OPEN
from adapters.slack.render.mrkdwn import escape, plain, shorten_escaped
from adapters.slack.render.outcomes import ICONS, as_mrkdwn, date, outcome_of
from adapters.slack.render.review_view import feedback_block, revision_blocks
from adapters.slack.render.rich import Piece, italic, rich_text, words
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskUserQuestionAnswerItem

__all__ = ["outcome_line", "render_final", "render_stale"]


def _answer_pieces(item: AskUserQuestionAnswerItem | None) -> list[Piece]:
    """One answer as typed after ``→``: the chosen labels and the free text, or *skipped*."""
    if item is None:
        return [words("→ "), italic("no answer")]
    said = [*item.selected, *([f"“{item.custom}”"] if item.custom else [])]
    return [words(f"→ {', '.join(said)}")] if said else [words("→ "), italic("skipped")]


def outcome_line(record: PendingRecord, limit: int = MAX_SECTION_TEXT) -> str:
    """The outcome in words (declined feedback is in its own block above), then when, then
    the note, within ``limit`` characters."""
    outcome = outcome_of(record)
    if outcome is None:
        return escape(record.state)
    said = f"{ICONS.get(outcome.verb, '')} {as_mrkdwn(outcome, feedback=False)}".strip()
    if record.replaced_by:
        said += f" <{record.replaced_by}|See the revised plan.>"
    when = f" · {date(record.finished_at)}" if record.finished_at else ""
    note = ""
    if record.note and record.state in ("answered", "cancelled"):
        note = shorten_escaped(f"\n{escape(record.note)}", max(0, (limit - len(when)) // 3))
    return shorten_escaped(said, max(1, limit - len(when) - len(note))) + when + note


def render_final(record: PendingRecord) -> Rendered:
    """The message as a record of its outcome: who answered what, and when."""
    shown = _shown(record)
    blocks = fitted(lambda limit: _final_blocks(record, shown, limit))
    outcome = outcome_of(record)
    # The notification says what the body says ("Declined by @bob — «…»", "Answered in
    # another client"), without a sentence's full stop before the question.
    said = as_mrkdwn(outcome).rstrip(".") if outcome is not None else escape(record.state)
    text = shorten_escaped(f"{said}: {fallback(record)}", MAX_FALLBACK_TEXT)
    return Rendered(text, blocks)


def _shown(record: PendingRecord) -> list[str]:
    """The part of each detail the open message showed."""
    try:
        return shown_details(record)
    except UserQuestionError:  # a request that could never be shown still gets its record
        return detail_shares(record)


def _final_blocks(record: PendingRecord, shown: list[str], limit: int) -> list[Block]:
    """The record's blocks, the parts that change (answers, label, tally, outcome) cut to
    ``limit`` (the outcome line and the tally to ``outcome_limit``, never dropped)."""
    count = len(record.questions)
    blocks: list[Block] = [*byline_blocks(label_within(record, limit), mention=False)]
    plan = layout_of(record.questions) == "plan"
    if plan:
        header = record.questions[0].header or "Plan review"
        blocks.append({"type": "header", "text": plain(header, MAX_HEADER_TEXT)})
        if record.revision is not None:  # the diff's long form stays in the thread
            blocks.extend(revision_blocks(record.revision, record.questions[0].detail or "")[0])
    items = dict(enumerate(record.answer.answers)) if record.answer is not None else {}
    for index, question in enumerate(record.questions):
        if question.header and not plan:
            blocks.append(header_block(question.header))
        blocks.append(question_block(question, index, count))
        blocks.extend(detail_blocks(shown[index], question.detail or ""))
        if record.state == "answered" and not plan:
            blocks.append(rich_text(*_answer_pieces(items.get(index)), limit=limit))
    if plan:
        blocks.extend(tally_blocks(record, outcome_limit(limit)))
    outcome = outcome_of(record)
    if outcome is not None and outcome.feedback and not outcome.people:
        blocks.append(feedback_block(outcome.feedback, outcome_limit(limit)))
    # The outcome line and the asker's page (one click away) come last, always.
    tail = [context(outcome_line(record, outcome_limit(limit))), *link_blocks(record)]
    return [*blocks[: MAX_BLOCKS_MESSAGE - len(tail)], *tail]


def render_stale(text: str = NO_LONGER_OPEN) -> Rendered:
    """What a message of an unknown (expired) request is turned into."""
    return Rendered(text, [context(f":hourglass: {text}")])
