"""Pure: what a reviewer's click does to a team plan review (a record with a policy)."""

from __future__ import annotations

from adapters.slack.model.interactions import Pick, TextAnswer
from adapters.slack.model.record import PendingRecord
from adapters.slack.model.tally import Membership, Vote, cast, combined_feedback, tally
from adapters.slack.render.layout import plan_review_of
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionAnswerItem

__all__ = ["apply_vote", "review_answer", "vote_of"]


def vote_of(
    record: PendingRecord, interaction: Pick | TextAnswer, now: float, groups: frozenset[str]
) -> Vote | None:
    """The vote this click casts (``None``: not a vote, such as a stale option index)."""
    policy, review = record.review, plan_review_of(record.questions)
    if policy is None or review is None:
        return None
    origin = interaction.origin
    if isinstance(interaction, Pick):
        if interaction.option not in (review.approve, review.decline):
            return None
        approve, feedback = interaction.option == review.approve, None
    else:
        approve, feedback = False, interaction.text.strip() or None
    required = [i for i, r in enumerate(policy.required) if r.contains(origin.user, groups)]
    said = groups.unreadable if isinstance(groups, Membership) else {}
    return Vote(
        user=origin.user,
        name=origin.name,
        approve=approve,
        feedback=feedback,
        at=now,
        required=required,
        unreadable={g: error for g, error in said.items() if g in policy.usergroups},
    )


def review_answer(
    record: PendingRecord, votes: list[Vote], approved: bool
) -> AskUserQuestionAnswer:
    """The seam's answer for a decided review: the approve label, or the decline with
    every decliner's feedback in ``custom`` (the decline label when nobody wrote any)."""
    question = record.questions[0]
    review = plan_review_of(record.questions)
    assert review is not None  # a review record is a plan review
    labels = question.option_labels
    if approved:
        item = AskUserQuestionAnswerItem(id=question.id, selected=[labels[review.approve]])
    elif (feedback := combined_feedback(votes)) is not None:
        item = AskUserQuestionAnswerItem(id=question.id, selected=[], custom=feedback)
    elif review.decline is not None:
        item = AskUserQuestionAnswerItem(id=question.id, selected=[labels[review.decline]])
    else:
        item = AskUserQuestionAnswerItem(id=question.id, selected=[])
    return AskUserQuestionAnswer(answers=[item])


def apply_vote(record: PendingRecord, vote: Vote) -> PendingRecord | None:
    """The record after ``vote`` (ended when the tally decides); ``None`` when the vote
    changes nothing (the reviewer already voted exactly so)."""
    policy = record.review
    assert policy is not None
    earlier = next((v for v in record.votes if v.user == vote.user), None)
    if earlier is not None and (earlier.approve, earlier.feedback) == (vote.approve, vote.feedback):
        return None
    votes = cast(record.votes, vote)
    outcome = tally(policy, votes).outcome
    if outcome is None:
        return record.next(votes=votes)
    return record.next(
        state="answered",
        votes=votes,
        answer=review_answer(record, votes, outcome == "approved"),
        answered_by=vote.user,
        answered_by_name=vote.name,
        finished_at=vote.at,
        note=None,
    )
