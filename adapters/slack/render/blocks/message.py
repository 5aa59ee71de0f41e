"""The question message: open (the questions, their widgets, Submit and Dismiss), then as a
record of its outcome, who answered what and when (pure)."""

from __future__ import annotations

from functools import partial
from typing import Any

from adapters.slack import blockkit
from adapters.slack.model import ids
from adapters.slack.model.audience import who_may
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks import options, overflow, parts
from adapters.slack.render.layout import Layout, layout_of, plan_review_of
from adapters.slack.render.messages import NO_LONGER_OPEN
from adapters.slack.render.mrkdwn import escape, plain, shorten, shorten_escaped
from adapters.slack.render.outcomes import ICONS, as_mrkdwn, date, one_line, outcome_of
from adapters.slack.render.review_view import feedback_block, revision_blocks, tally_blocks
from adapters.slack.render.rich import Block, Piece, italic, rich_text, words
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from bot.questions.models import AskUserQuestionAnswerItem, AskUserQuestionItem


def render_open(record: PendingRecord) -> parts.Rendered:
    """The open question message (and continuation messages for long details)."""
    layout = layout_of(record.questions)
    revised, diff_replies = _revision(record, layout)
    inline, shown = _placing(record, layout, revised)
    text = parts.fallback(record)
    render = partial(_open_blocks, record, layout, revised, shown, inline)
    blocks = render(blockkit.MAX_SECTION_TEXT)
    problems = blockkit.check_message(blocks, text)
    if problems:  # cut what changes after the post (label, note, tally, drafts) to fit
        blocks = overflow.fitted(render, blocks)
        problems = blockkit.check_message(blocks, text)
    # The thread: the details' rest, a revision's long diff, the options' full texts.
    thread, files = overflow.thread_parts(record, shown)
    if diff_replies and len(thread) + len(diff_replies) > overflow.MAX_THREAD_REPLIES:
        assert record.revision is not None
        files.append(
            overflow.diff_file(record.revision.previous_plan, record.questions[0].detail or "")
        )
    else:
        thread.extend(diff_replies)
    if not inline:
        thread.extend(options.options_thread(record, layout))
    return parts.checked(parts.Rendered(text, blocks, thread, files), "request", problems)


def shown_details(record: PendingRecord) -> list[str]:
    """The part of each question's detail that every rendering of ``record`` shows."""
    layout = layout_of(record.questions)
    return _placing(record, layout, _revision(record, layout)[0])[1]


def _revision(record: PendingRecord, layout: Layout) -> tuple[list[Block], list[list[Block]]]:
    """What a revised plan review shows above its plan, and its diff's thread replies."""
    if layout != "plan" or record.revision is None:
        return [], []
    return revision_blocks(record.revision, record.questions[0].detail or "")


def _placing(record: PendingRecord, layout: Layout, revised: list[Block]) -> tuple[bool, list[str]]:
    """Whether options' full texts are in the message (else the thread), and what it shows."""
    fulls = [question.detail or "" for question in record.questions]
    nothing = [""] * len(fulls)
    listed = any(options.options_blocks(question, layout, False) for question in record.questions)
    if not any(fulls) and not listed:
        return True, nothing  # nothing to size: no details, no full texts to place
    # Ids are not text: version 0 keeps a final record's later version out of block ids.
    changing: dict[str, Any] = {"label": None, "note": None, "votes": [], "review": None}
    # Measured open, naming who may answer as the open message does, whatever its state.
    users, groups = who_may(record)
    same = {"state": "pending", "allowed_users": users, "allowed_usergroups": groups}
    bare = record.model_copy(update={**changing, **same, "drafts": [], "version": 0})
    markers = sum(blockkit.block_text_length(overflow.detail_blocks("", full)) for full in fulls)
    chosen = sum(map(_chosen_room, record.questions)) if layout == "form" else 0
    kept = overflow.kept_room(record, layout, chosen)
    for inline in (True, False) if listed else (True,):
        rest = _open_blocks(bare, layout, revised, nothing, inline, blockkit.MAX_SECTION_TEXT)
        room = blockkit.MESSAGE_TEXT_BUDGET - (blockkit.block_text_length(rest) - markers) - kept
        if room >= 0:
            return inline, overflow.shares_within(record, room)
    # The parts that never change leave no room: the details go to the thread whole, and
    # the rendering says whether the rest fits at all.
    return not listed, nothing


def _chosen_room(question: AskUserQuestionItem) -> int:
    """The most text a form question's chosen options add (``initial_options`` repeat them)."""
    sizes = [blockkit.block_text_length([choice]) for choice in options.choices(question)]
    return sum(sizes) if question.is_multi_select else max(sizes, default=0)


def _open_blocks(
    record: PendingRecord,
    layout: Layout,
    revised: list[Block],
    shown: list[str],
    inline: bool,
    limit: int,
) -> list[Block]:
    """The message's blocks, the parts that change after the post cut to ``limit``."""
    blocks: list[Block] = [*parts.byline_blocks(record, limit)]
    if record.deadline is not None:
        blocks.append(parts.context(f":alarm_clock: {parts.answer_by(record.deadline)}"))
    blocks.extend(parts.hidden_notice(record.label, *_words_of(record.questions)))
    count = len(record.questions)

    if layout == "plan":
        question = record.questions[0]
        blocks.extend(_asked(record, 0, shown[0], revised))
        blocks.extend(options.options_blocks(question, layout, inline))
        blocks.extend(tally_blocks(record, overflow.outcome_limit(limit)))
        read = len(shown[0]) < len(question.detail or "")  # "Read the whole plan"
        blocks.extend([plan_actions(record, read=read), parts.context(_plan_buttons_say(record))])
    else:
        for index in range(count):
            blocks.extend(_question_blocks(record, layout, index, shown[index], inline, limit))
        if layout == "form":
            submit = options.button("Submit", ids.action_id("submit"), "0", "primary")
            blocks.append(parts.actions(record, None, "s", [submit, options.dismiss_button()]))
            if count > 1:
                blocks.append(parts.context("A question left unanswered is sent as skipped."))
    if record.note and record.is_open:
        blocks.append(parts.context(f":warning: {shorten_escaped(escape(record.note), limit)}"))
    blocks.extend(parts.link_blocks(record))
    if len(blocks) > blockkit.MAX_BLOCKS_MESSAGE:
        raise UserQuestionError(
            f"this request needs {len(blocks)} blocks; a Slack message holds at most "
            f"{blockkit.MAX_BLOCKS_MESSAGE} (ask fewer questions at once)",
            SLACK_LIMIT,
        )
    return blocks


def _words_of(questions: list[AskUserQuestionItem]) -> list[str | None]:
    """Every text of ``questions`` a person reads: question, header, detail, options."""
    texts: list[str | None] = []
    for item in questions:
        texts += [item.question, item.header, item.detail]
        texts += [t for o in item.options or [] for t in (o.label, o.description)]
    return texts


def plan_actions(record: PendingRecord, *, read: bool = False, whole: bool = False) -> Block:
    """A plan review's buttons (``read``: Read the whole plan first; ``whole``: no Dismiss)."""
    review = plan_review_of(record.questions)
    assert review is not None
    texts = options.button_labels(record.questions[0])
    buttons = [options.button("Read the whole plan", ids.action_id("read"), "0")] * read
    for n, (option, style) in enumerate(((review.approve, "primary"), (review.decline, "danger"))):
        if option is not None:
            buttons.append(
                options.button(
                    texts[option], ids.action_id("pick", n), ids.option_value(option), style
                )
            )
    buttons.append(options.button("Decline with feedback…", ids.action_id("text"), "0"))
    return parts.actions(record, 0, "a", buttons + ([] if whole else [options.dismiss_button()]))


def _plan_buttons_say(record: PendingRecord) -> str:
    """One line on what the buttons that do not approve do (escaped mrkdwn)."""
    review = plan_review_of(record.questions)
    labels = record.questions[0].option_labels
    no = "" if review is None or review.decline is None else labels[review.decline]
    named = f"*{escape(shorten(one_line(no), 40))}* or " if no.strip() else ""
    return (
        f"{named}*Decline with feedback…*: the agent keeps planning (with your words). "
        "*Dismiss*: the agent gets no answer."
    )


def _question_blocks(
    record: PendingRecord,
    layout: Layout,
    index: int,
    shown: str,
    inline: bool,
    limit: int,
) -> list[Block]:
    question = record.questions[index]
    blocks = [
        *_asked(record, index, shown, None),
        *options.options_blocks(question, layout, inline),
    ]
    typed = ids.action_id("text")
    other = options.button("Other…", typed, str(index))
    if layout == "tap":
        labels = enumerate(options.button_labels(question))
        picks = [
            options.button(text, ids.action_id("pick", i), ids.option_value(i))
            for i, text in labels
        ]
        elements = [*picks, other, options.dismiss_button()]
    elif layout == "menu":
        elements = [options.menu(question, "pick"), other, options.dismiss_button()]
    elif layout == "text":
        elements = [
            options.button("Answer…", typed, str(index), "primary"),
            options.dismiss_button(),
        ]
    else:
        draft = record.draft(index)
        answer = [options.button("Answer…", typed, str(index))]
        elements = [options.draft_widget(question, draft), other] if question.options else answer
        if draft.custom:
            custom = shorten_escaped(escape(shorten(draft.custom, 2000)), limit)
            blocks.append(parts.context(f":pencil2: {custom}"))
    return [*blocks, parts.actions(record, index, "c", elements)]


def _asked(
    record: PendingRecord, index: int, shown: str, revised: list[Block] | None
) -> list[Block]:
    """Question ``index`` as asked: its header (and a plan's ``revised``), text and detail."""
    question = record.questions[index]
    if revised is not None:
        header = plain(question.header or "Plan review", blockkit.MAX_HEADER_TEXT)
        head = [{"type": "header", "text": header}, *revised]
    else:
        chip = [plain(question.header, blockkit.MAX_SECTION_TEXT)] if question.header else []
        head = [{"type": "context", "elements": chip}] if chip else []
    detail = overflow.detail_blocks(shown, question.detail or "")
    return [*head, parts.question_block(question, index, len(record.questions)), *detail]


def _answer_pieces(item: AskUserQuestionAnswerItem | None) -> list[Piece]:
    """One answer as typed after ``→``: the chosen labels and the free text, or *skipped*."""
    if item is None:
        return [words("→ "), italic("no answer")]
    typed = f"“{item.custom}”" if item.custom else ""
    said = ", ".join(filter(None, (", ".join(item.selected), typed)))  # a blank label says nothing
    return [words(f"→ {said}")] if said else [words("→ "), italic("skipped")]


def outcome_line(record: PendingRecord, limit: int = blockkit.MAX_SECTION_TEXT) -> str:
    """The outcome of an ended ``record`` in words, when, and the note, within ``limit``."""
    outcome = outcome_of(record)
    said = f"{ICONS.get(outcome.verb, '')} {as_mrkdwn(outcome, feedback=False)}".strip()
    if record.replaced_by:
        said += f" <{record.replaced_by}|See the revised plan.>"
    when = f" · {date(record.finished_at)}" if record.finished_at else ""
    note = ""
    if record.note and record.state in ("answered", "cancelled"):
        note = shorten_escaped(f"\n{escape(record.note)}", max(0, (limit - len(when)) // 3))
    return shorten_escaped(said, max(1, limit - len(when) - len(note))) + when + note


def render_final(record: PendingRecord) -> parts.Rendered:
    """The message as a record of its outcome: who answered what, and when."""
    try:
        shown = shown_details(record)  # the part of each detail the open message showed
    except UserQuestionError:  # a request that could never be shown still gets its record
        shown = overflow.detail_shares(record)
    blocks = overflow.fitted(partial(_final_blocks, record, shown))
    outcome = outcome_of(record)
    # The notification says what the body says ("Declined by @bob — «…»", "Answered in
    # another client"), without a sentence's full stop before the question.
    said = as_mrkdwn(outcome).rstrip(".")
    text = shorten_escaped(f"{said}: {parts.fallback(record)}", parts.MAX_FALLBACK_TEXT)
    return parts.Rendered(text, blocks)


def _final_blocks(record: PendingRecord, shown: list[str], limit: int) -> list[Block]:
    """The record's blocks, the parts that change (answers, label, tally, outcome) cut to fit."""
    blocks: list[Block] = [*parts.byline_blocks(record, limit, mention=False)]
    layout = layout_of(record.questions)
    plan = layout == "plan"
    revised = _revision(record, layout)[0] if plan else None  # its long diff stays in the thread
    items = dict(enumerate(record.answer.answers)) if record.answer is not None else {}
    for index in range(len(record.questions)):
        blocks.extend(_asked(record, index, shown[index], revised))
        if record.state == "answered" and not plan:
            blocks.append(rich_text(*_answer_pieces(items.get(index)), limit=limit))
    blocks.extend(tally_blocks(record, overflow.outcome_limit(limit)))  # plan reviews only
    outcome = outcome_of(record)
    if outcome.feedback and not outcome.people:
        blocks.append(feedback_block(outcome.feedback, overflow.outcome_limit(limit)))
    # The outcome line and the asker's page (one click away) come last, always.
    tail = [
        parts.context(outcome_line(record, overflow.outcome_limit(limit))),
        *parts.link_blocks(record),
    ]
    return [*blocks[: blockkit.MAX_BLOCKS_MESSAGE - len(tail)], *tail]


def render_stale(text: str = NO_LONGER_OPEN) -> parts.Rendered:
    """What a message of an unknown (expired) request is turned into."""
    return parts.Rendered(text, [parts.context(f":hourglass: {text}")])
