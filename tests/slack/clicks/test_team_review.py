"""Team plan reviews end to end: a real bolt app, the Slack stand-in, signed clicks.

A policy turns Approve / decline clicks into votes; the message is a live tally; the
review ends once, with the seam's encoding, whoever clicks at the same time.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from adapters.slack.sandbox.blockcheck import check_message
from bot.questions import AskOptions, ReviewPolicy, UserQuestionError
from tests.slack.asks.test_slack_provider import finished, plan
from tests.slack.render.test_review_wording import diff_rows
from tests.slack_harness import SlackHarness, all_text, interactive_elements, until


def policy(**wire: Any) -> AskOptions:
    return AskOptions(review=ReviewPolicy.model_validate(wire))


async def vote(h: SlackHarness, message: Any, user: str, text: str) -> None:
    status, _ = await h.click(message, user, text=text)
    assert status == 200


async def stale_vote(h: SlackHarness, snapshot: Any, user: str, text: str) -> None:
    """``user`` clicks a button of the message as it was (their client not yet updated)."""
    status, _ = await h.slack.deliver(h.slack.click(snapshot, user=user, text=text))
    assert status == 200


async def edited_to(h: SlackHarness, message: Any, fragment: str) -> str:
    """Wait until the message shows ``fragment``; return its text."""
    return str(
        await until(
            lambda: (lambda t: t if fragment in t else None)(all_text(h.current(message).blocks)),
            what=repr(fragment),
        )
    )


async def test_two_of_three_approvals_end_it_approved_with_every_vote_listed() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan(), options=policy(approvals=2))
        message = await h.posted()
        snapshot = copy.deepcopy(message)
        assert "Waiting for approval* — 0 of 2 approvals so far" in all_text(message.blocks)
        await vote(h, message, h.alice, "Approve")
        text = await edited_to(h, message, "1 of 2 approvals so far")
        assert "still needs 1 more approval" in text
        assert "*Approved" not in text
        assert f"<@{h.alice}> approved" in text
        assert not task.done()
        await vote(h, message, h.bob, "Approve")
        answer = await task
        assert answer.to_wire() == {"answers": [{"id": "plan-review", "selected": ["Approve"]}]}
        final = await finished(h, message)
        text = all_text(final.blocks)
        assert f"Approved by <@{h.alice}>, <@{h.bob}>" in text
        assert f"<@{h.alice}> approved" in text and f"<@{h.bob}> approved" in text
        assert check_message(final.blocks, final.text) == []
        # A third reviewer arrives late: told privately, nothing changes.
        await stale_vote(h, snapshot, h.carol, "Approve")
        note = await until(lambda: h.ephemerals(h.carol))
        assert "already approved" in note[-1].text


async def test_a_decline_after_one_approval_ends_it_declined_with_the_feedback() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan(), options=policy(approvals=2))
        message = await h.posted()
        await vote(h, message, h.alice, "Approve")
        await edited_to(h, message, "1 of 2 approvals so far")
        await vote(h, message, h.bob, "Decline with feedback…")
        await h.type_into_modal(h.bob, "Add a rollback step.")
        answer = await task
        assert answer.to_wire() == {
            "answers": [
                {"id": "plan-review", "selected": [], "custom": "bob: Add a rollback step."}
            ]
        }
        final = await finished(h, message)
        assert f"Declined by <@{h.bob}>" in all_text(final.blocks)
        assert final.text.startswith(f"Declined by <@{h.bob}>")


async def test_feedback_of_every_decliner_is_combined_and_attributed() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan(), options=policy(approvals=1, declines=2))
        message = await h.posted()
        await vote(h, message, h.alice, "Decline with feedback…")
        await h.type_into_modal(h.alice, "Stage it first.")
        await edited_to(h, message, f"<@{h.alice}> declined")
        assert not task.done()
        await vote(h, message, h.bob, "Decline with feedback…")
        await h.type_into_modal(h.bob, "And add a rollback.\nTwo lines.")
        answer = await task
        assert answer.answers[0].selected == []
        assert (
            answer.answers[0].custom
            == "alice: Stage it first.\nbob: And add a rollback.\nTwo lines."
        )


async def test_a_vote_can_change_before_the_quorum_and_never_counts_twice() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan(), options=policy(approvals=2, declines=2))
        message = await h.posted()
        await vote(h, message, h.alice, "Keep planning")
        await edited_to(h, message, f"<@{h.alice}> declined")
        await vote(h, message, h.alice, "Approve")
        text = await edited_to(h, message, f"<@{h.alice}> approved")
        assert f"<@{h.alice}> declined" not in text
        await vote(h, message, h.alice, "Approve")  # the same vote again
        note = await until(lambda: h.ephemerals(h.alice))
        assert "already counted" in note[-1].text
        assert "1 of 2 approvals so far" in all_text(h.current(message).blocks)
        assert not task.done()
        await vote(h, message, h.bob, "Approve")
        assert (await task).answers[0].selected == ["Approve"]


async def test_a_vote_from_outside_the_reviewers_is_refused() -> None:
    async with SlackHarness() as h:
        leads = h.slack.workspace.add_usergroup("platform-leads", [h.alice, h.bob])
        task = h.ask(plan(), options=policy(approvals=2, reviewers={"usergroups": [leads.id]}))
        message = await h.posted()
        assert f"still needs 2 from <!subteam^{leads.id}>" in all_text(message.blocks)
        await vote(h, message, h.carol, "Approve")
        note = await until(lambda: h.ephemerals(h.carol))
        assert note[-1].text == (
            f"You are not one of the reviewers of this plan; members of <!subteam^{leads.id}> can."
        )
        await vote(h, message, h.alice, "Approve")
        await edited_to(h, message, "1 of 2 approvals so far")
        assert f"<@{h.carol}>" not in all_text(h.current(message).blocks)
        await vote(h, message, h.bob, "Approve")
        assert (await task).answers[0].selected == ["Approve"]


async def test_required_group_approval_is_waited_for() -> None:
    async with SlackHarness() as h:
        leads = h.slack.workspace.add_usergroup("platform-leads", [h.carol])
        task = h.ask(
            plan(),
            options=policy(approvals=2, required=[{"usergroups": [leads.id], "count": 1}]),
        )
        message = await h.posted()
        await vote(h, message, h.alice, "Approve")
        await vote(h, message, h.bob, "Approve")
        text = await edited_to(h, message, "2 of 2 approvals so far")
        waiting = "*Waiting for approval* — 2 of 2 approvals so far; still needs 1 from "
        assert f"{waiting}<!subteam^{leads.id}>" in text
        assert "*Approved" not in text
        assert not task.done()
        await vote(h, message, h.carol, "Approve")
        assert (await task).answers[0].selected == ["Approve"]


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(200))
async def test_three_simultaneous_votes_with_quorum_two_end_once(round_: int) -> None:
    async with SlackHarness() as h:
        task = h.ask(plan(), options=policy(approvals=2))
        message = await h.posted()
        request_id = _request_id(message)
        people = [h.alice, h.bob, h.carol]
        results = await asyncio.gather(*(h.click(message, p, text="Approve") for p in people))
        assert all(status == 200 for status, _ in results)
        answer = await task
        assert answer.answers[0].selected == ["Approve"]
        record = await h.provider.store.get(request_id)
        assert record is not None and record.state == "answered"
        counted = {v.user for v in record.votes}
        assert len(counted) == 2 and counted <= set(people)
        # Every vote is accounted for: counted in the record, or its voter told it ended.
        (late,) = set(people) - counted
        note = await until(lambda: h.ephemerals(late))
        assert "already approved" in note[-1].text
        final = await finished(h, message)
        assert all(f"<@{u}> approved" in all_text(final.blocks) for u in counted)


def _request_id(message: Any) -> str:
    from adapters.slack.model import ids

    for block in message.blocks:
        ref = ids.parse_block_id(block.get("block_id"))
        if ref is not None:
            return ref.request_id
    raise AssertionError("no request id in the message")


async def test_a_revision_links_the_previous_review_quotes_feedback_and_shows_the_diff() -> None:
    old = "# Plan\n\n1. Migrate\n2. Deploy"
    new = "# Plan\n\n1. Migrate\n2. Deploy to staging\n3. Deploy"
    async with SlackHarness() as h:
        first = h.ask(plan(old), options=policy(approvals=1))
        message = await h.posted()
        first_id = _request_id(message)
        await vote(h, message, h.bob, "Decline with feedback…")
        await h.type_into_modal(h.bob, "Stage it <first>.")
        await first
        second = h.ask(
            plan(new), options=AskOptions(review=ReviewPolicy(approvals=1), revises=first_id)
        )
        revised = await h.posted(2)
        text = all_text(revised.blocks)
        link = f"https://{h.slack.workspace.domain}.slack.com/archives/{message.channel}/p"
        assert f"<{link}{message.ts.replace('.', '')}|the previous review>" in text
        assert "> bob: Stage it &lt;first&gt;." in text
        changed = ["− 2. Deploy", "+ 2. Deploy to staging", "+ 3. Deploy"]
        assert diff_rows(revised.blocks)[1:4] == changed
        assert "unchanged: 3 lines" in text
        assert check_message(revised.blocks, revised.text) == []
        assert not revised.edits
        # Votes do not carry over: the new review needs its own approval.
        assert "Waiting for approval* — 0 of 1 approval so far" in text
        await vote(h, revised, h.alice, "Approve")
        assert (await second).answers[0].selected == ["Approve"]
        # The approved revision's record keeps what it revised, the feedback and the diff.
        record = await finished(h, revised)
        kept = all_text(record.blocks)
        assert f"<{link}{message.ts.replace('.', '')}|the previous review>" in kept
        assert "> bob: Stage it &lt;first&gt;." in kept and "unchanged: 3 lines" in kept
        assert diff_rows(record.blocks)[1:4] == changed
        assert f"Approved by <@{h.alice}>" in kept


async def test_review_options_on_a_request_that_is_not_a_plan_review_are_refused() -> None:
    async with SlackHarness() as h:
        wire = {"questions": [{"id": "q", "question": "Go?", "options": [{"label": "Yes"}]}]}
        with pytest.raises(UserQuestionError) as caught:
            await h.ask(wire, options=policy(approvals=2))
        assert caught.value.code == "BAD_REVIEW"
        with pytest.raises(UserQuestionError) as caught:
            await h.ask(plan(), options=AskOptions(revises="aq-unknown"))
        assert caught.value.code == "BAD_REVIEW"
        assert "aq-unknown" in caught.value.message
        assert not h.top_messages()


async def test_without_a_policy_one_click_still_decides() -> None:
    async with SlackHarness() as h:
        task = h.ask(plan())
        message = await h.posted()
        assert "Waiting for approval" not in all_text(message.blocks)
        await vote(h, message, h.alice, "Approve")
        assert (await task).answers[0].selected == ["Approve"]
        assert not interactive_elements((await finished(h, message)).blocks)


async def trail_of_two_votes(h: SlackHarness, user: str, text: str) -> list[Any]:
    """Alice approves a review needing two approvals, then ``user`` clicks ``text``; the
    review's audit trail once it ended."""
    task = h.ask(plan(), options=policy(approvals=2))
    message = await h.posted()
    await vote(h, message, h.alice, "Approve")
    await edited_to(h, message, "1 of 2 approvals so far")
    await vote(h, message, user, text)
    await task
    return await h.provider.store.events(_request_id(message))


async def test_every_vote_is_in_the_audit_trail_bound_to_the_plan_shown() -> None:
    from adapters.slack.model.audit_trail import shown_digest
    from bot.questions.models import AskUserQuestionItem

    async with SlackHarness() as h:
        trail = await trail_of_two_votes(h, h.bob, "Approve")
    assert [(e.kind, e.by) for e in trail] == [
        ("asked", None),
        ("changed", h.alice),  # the vote that kept the review open
        ("answered", h.bob),
    ]
    shown = shown_digest([AskUserQuestionItem.model_validate(q) for q in plan()["questions"]])
    assert {e.shown_sha256 for e in trail} == {shown}  # each approval bound to this plan
    first, last = trail[1].detail["votes"], trail[2].detail["votes"]
    assert [(v["user"], v["approve"]) for v in first] == [(h.alice, True)]
    assert [(v["user"], v["approve"]) for v in last] == [(h.alice, True), (h.bob, True)]
    assert trail[1].version < trail[2].version and trail[1].at <= trail[2].at


async def test_a_changed_vote_is_its_own_event() -> None:
    async with SlackHarness() as h:
        trail = await trail_of_two_votes(h, h.alice, "Keep planning")  # she changed her mind
    assert [(e.kind, e.by) for e in trail] == [
        ("asked", None),
        ("changed", h.alice),
        ("answered", h.alice),
    ]
    (ended,) = trail[2].detail["votes"]
    assert (ended["user"], ended["approve"]) == (h.alice, False)


async def test_a_revision_of_a_review_still_open_closes_the_earlier_one() -> None:
    # Two open reviews of one plan would let a reviewer approve the superseded text.
    old = "# Plan\n\n1. Migrate\n2. Deploy"
    new = "# Plan\n\n1. Migrate\n2. Deploy to staging\n3. Deploy"
    async with SlackHarness() as h:
        first = h.ask(plan(old), options=policy(approvals=2))
        message = await h.posted()
        first_id = _request_id(message)
        await vote(h, message, h.alice, "Approve")  # one of two: still open
        second = h.ask(plan(new), options=AskOptions(revises=first_id))
        revised = await h.posted(2)
        with pytest.raises(UserQuestionError) as caught:
            await asyncio.wait_for(first, 10)
        assert caught.value.code == "ASK_ABORTED"  # the seam's own words; the note says why
        closed = await finished(h, message)
        text = all_text(closed.blocks)
        link = f"https://slack.com/archives/{revised.channel}/p{revised.ts.replace('.', '')}"
        assert (
            f"Cancelled: superseded by a revised plan, posted for review; this one can no "
            f"longer be approved. <{link}|See the revised plan.>" in text
        )
        assert "Approved" not in text
        status = await h.provider.status(first_id)
        assert status is not None and status.state == "aborted"
        assert status.note is not None and status.note.startswith("Superseded by a revised plan")
        trail = await h.provider.events(first_id)
        assert trail[-1].kind == "aborted" and trail[-1].by == f"revision {_request_id(revised)}"
        # The revision itself is open and answers as usual.
        await vote(h, revised, h.bob, "Approve")
        assert (await second).answers[0].selected == ["Approve"]


async def test_a_revision_of_a_review_already_ended_leaves_its_record_as_it_was() -> None:
    async with SlackHarness() as h:
        first = h.ask(plan("# Plan\n\n1. Go"), options=policy(approvals=1))
        message = await h.posted()
        first_id = _request_id(message)
        await vote(h, message, h.bob, "Decline with feedback…")
        await h.type_into_modal(h.bob, "Go slowly.")
        await first
        before = await h.provider.events(first_id)
        second = h.ask(plan("# Plan\n\n1. Go slowly"), options=AskOptions(revises=first_id))
        revised = await h.posted(2)
        await vote(h, revised, h.alice, "Approve")
        await second
        assert await h.provider.events(first_id) == before
        status = await h.provider.status(first_id)
        assert status is not None and status.state == "answered"
