"""Pure decisions: what an interaction does to a pending record (a team review's vote too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from adapters.slack.model.interactions import (
    Approve,
    ConfirmSkip,
    Dismiss,
    DraftChange,
    Interaction,
    OpenText,
    Origin,
    Pick,
    ReadPlan,
    Submit,
    TextAnswer,
)
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.model.tally import Membership, Vote, cast, combined_feedback, tally
from adapters.slack.render.blocks.message import shown_details
from adapters.slack.render.blocks.modals import render_skip_modal, render_text_modal
from adapters.slack.render.layout import layout_of, plan_review_of
from adapters.slack.render.messages import ALREADY_VOTED, ENTER_AN_ANSWER
from adapters.slack.render.outcomes import refusal
from bot.questions.models import (
    AskUserQuestionAnswer,
    AskUserQuestionAnswerItem,
    AskUserQuestionItem,
)

NO_LONGER_OPEN_APPROVAL: Final = "This approval is no longer open."


@dataclass(frozen=True, slots=True)
class Save:
    """Write this record (a terminal one resolves the waiter); re-render when ``rerender``."""

    record: PendingRecord
    rerender: bool = True


@dataclass(frozen=True, slots=True)
class Modal:
    """Open this modal with the interaction's trigger."""

    view: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Refuse:
    """Tell the person privately why nothing happened: a note, or a modal's error on its
    input (``plain``: without mentions)."""

    text: str
    plain: str | None = None


Decision = Save | Modal | Refuse | None
"""What a click does; ``None``: nothing (a stale widget, a no-op change)."""


def _item(question: AskUserQuestionItem, draft: Draft) -> AskUserQuestionAnswerItem:
    labels = question.option_labels
    chosen = [labels[i] for i in sorted({i for i in draft.selected if 0 <= i < len(labels)})]
    custom = (draft.custom or "").strip() or None
    if not question.is_multi_select:  # free text replaces the choice
        chosen = [] if custom else chosen[:1]
    return AskUserQuestionAnswerItem(id=question.id, selected=chosen, custom=custom)


def encode_answer(
    questions: list[AskUserQuestionItem], drafts: list[Draft]
) -> AskUserQuestionAnswer:
    """The answer for these drafts: question order, one item per question, skips included."""
    items = [
        _item(question, drafts[i] if i < len(drafts) else Draft())
        for i, question in enumerate(questions)
    ]
    return AskUserQuestionAnswer(answers=items)


def _vote(
    record: PendingRecord, interaction: Pick | TextAnswer, now: float, groups: frozenset[str]
) -> Decision:
    """A team review's vote: kept on the open record, or the one that ends the review (none
    for a click that is no vote, such as a stale option index)."""
    if isinstance(interaction, TextAnswer) and not interaction.text.strip():
        return Refuse(ENTER_AN_ANSWER)
    policy, review = record.review, plan_review_of(record.questions)
    assert policy is not None and review is not None  # decide's check; asks took only a plan's
    origin = interaction.origin
    if isinstance(interaction, Pick):
        if interaction.option not in (review.approve, review.decline):
            return None
        approve, feedback = interaction.option == review.approve, None
    else:
        approve, feedback = False, interaction.text.strip() or None
    required = [i for i, r in enumerate(policy.required) if r.contains(origin.user, groups)]
    said = groups.unreadable if isinstance(groups, Membership) else {}
    vote = Vote(
        user=origin.user,
        name=origin.name,
        approve=approve,
        feedback=feedback,
        at=now,
        required=required,
        unreadable={g: error for g, error in said.items() if g in policy.usergroups},
        opened_whole_plan=_opened(record, origin),
    )
    after = apply_vote(record, vote)
    return Refuse(ALREADY_VOTED) if after is None else Save(after)


def _drafts_of(record: PendingRecord, user: str) -> list[Draft]:
    """A copy of ``user``'s own drafts, one per question (never another person's)."""
    return [record.draft(i, user).model_copy(deep=True) for i in range(len(record.questions))]


def _save(record: PendingRecord, user: str, drafts: list[Draft]) -> Save:
    # Nothing in the shared message shows a draft: re-rendering it would reset the widgets
    # everyone else is still filling in.
    return Save(record.next(user_drafts={**record.user_drafts, user: drafts}), False)


def _ended(record: PendingRecord, by: Origin | Vote, at: float, **changes: Any) -> Save:
    """``record`` ended by who acted (or voted), at ``at``."""
    ended = dict(answered_by=by.user, answered_by_name=by.name, finished_at=at, note=None)
    return Save(record.next(**ended, **changes))


def _finish(record: PendingRecord, origin: Origin, now: float, drafts: list[Draft]) -> Save:
    answer, opened = encode_answer(record.questions, drafts), _opened(record, origin)
    return _ended(record, origin, now, state="answered", answer=answer, drafts=drafts,
                  opened_whole_plan=opened)  # fmt: skip


def _opened(record: PendingRecord, origin: Origin) -> bool | None:
    """Whether who decides a plan longer than its message opened it whole (else ``None``)."""
    if layout_of(record.questions) != "plan":
        return None
    if shown_details(record)[0] == record.questions[0].detail:
        return None
    return origin.view_id is not None or origin.user in record.plan_readers


def decide(
    record: PendingRecord,
    interaction: Interaction,
    now: float,
    *,
    groups: frozenset[str] = frozenset(),
) -> Decision:
    """What ``interaction`` does to ``record`` (already authorized)."""
    if isinstance(interaction, Approve):  # the first allowed click on an open approval wins
        if not record.is_open or record.approval is None:
            return Refuse(NO_LONGER_OPEN_APPROVAL)
        view = record.approval.model_copy(update={"outcome": interaction.outcome})
        return _ended(record, interaction.origin, now, state="answered", approval=view)
    if record.approval is not None:  # a question's click naming an approval: forged
        return None
    if not record.is_open:
        return Refuse(refusal(record, mention=True), refusal(record, mention=False))
    layout = layout_of(record.questions)
    count = len(record.questions)
    origin = interaction.origin

    if record.review is not None and isinstance(interaction, Pick | TextAnswer):
        return _vote(record, interaction, now, groups)

    if isinstance(interaction, ReadPlan):  # kept for the record of their decision
        if origin.user in record.plan_readers:
            return None
        return Save(record.next(plan_readers=[*record.plan_readers, origin.user]), False)

    if isinstance(interaction, Dismiss):
        return _ended(record, origin, now, state="cancelled")

    if isinstance(interaction, Submit | ConfirmSkip | DraftChange) and layout != "form":
        return None  # a form's widget, on a message that is no form

    if isinstance(interaction, Submit):
        # The submitter's own choices: what their Submit payload shows, over their drafts.
        drafts = _drafts_of(record, origin.user)
        for index, chosen in interaction.selections.items():
            if 0 <= index < count:
                drafts[index].selected = list(chosen)
        if all(not d.selected and not (d.custom or "").strip() for d in drafts):
            return Modal(render_skip_modal(record, origin.response_url))
        return _finish(record, origin, now, drafts)

    if isinstance(interaction, ConfirmSkip):
        return _finish(record, origin, now, [Draft() for _ in record.questions])

    if not 0 <= interaction.question < count:
        return None
    question = record.questions[interaction.question]

    if isinstance(interaction, Pick):
        if layout not in ("plan", "tap", "menu"):
            return None
        if not 0 <= interaction.option < len(question.options or []):
            return None
        drafts = [Draft(selected=[interaction.option])]
        return _finish(record, origin, now, drafts)

    if isinstance(interaction, DraftChange):
        drafts = _drafts_of(record, origin.user)
        draft = drafts[interaction.question]
        draft.selected = list(interaction.options)
        if not question.is_multi_select and interaction.options and draft.custom:
            draft.custom = None  # a single-select choice replaces earlier free text
        return _save(record, origin.user, drafts)

    if isinstance(interaction, OpenText):
        return Modal(
            render_text_modal(record, interaction.question, origin.user, origin.response_url)
        )

    # TextAnswer: in a form, an emptied text box takes the question's free text back (§6.2)
    text = interaction.text.strip()
    form = layout == "form"
    drafts = _drafts_of(record, origin.user) if form else [Draft() for _ in record.questions]
    if not text and not (form and (drafts[interaction.question].custom or "").strip()):
        return Refuse(ENTER_AN_ANSWER)
    drafts[interaction.question].custom = text or None
    if not form:  # one question: the text is the answer
        return _finish(record, origin, now, drafts)
    if text and not question.is_multi_select:
        drafts[interaction.question].selected = []
    return _save(record, origin.user, drafts)


def _review_answer(
    record: PendingRecord, votes: list[Vote], approved: bool
) -> AskUserQuestionAnswer:
    """A decided review's answer: the approve label, or every decliner's feedback (or decline)."""
    question, review = record.questions[0], plan_review_of(record.questions)
    assert review is not None  # a review record is a plan review
    chosen, feedback = review.approve if approved else review.decline, None
    if not approved and (feedback := combined_feedback(votes)) is not None:
        chosen = None
    selected = [] if chosen is None else [question.option_labels[chosen]]
    item = AskUserQuestionAnswerItem(id=question.id, selected=selected, custom=feedback)
    return AskUserQuestionAnswer(answers=[item])


def apply_vote(record: PendingRecord, vote: Vote) -> PendingRecord | None:
    """The record after ``vote`` (ended when the tally decides); ``None`` if it changes nothing."""
    policy = record.review
    assert policy is not None
    earlier = next((v for v in record.votes if v.user == vote.user), None)
    if earlier is not None and (earlier.approve, earlier.feedback) == (vote.approve, vote.feedback):
        return None
    votes = cast(record.votes, vote)
    outcome = tally(policy, votes).outcome
    if outcome is None:
        return record.next(votes=votes)
    answer = _review_answer(record, votes, outcome == "approved")
    return _ended(record, vote, vote.at, state="answered", votes=votes, answer=answer).record
