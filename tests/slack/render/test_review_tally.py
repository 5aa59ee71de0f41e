"""Pure tests of team plan reviews: the policy, votes, the tally and the plan diff."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from adapters.slack.model.tally import Vote, cast, combined_feedback, tally
from adapters.slack.render.review_view import plan_diff, tally_line
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions import ReviewPolicy


def vote(
    user: str,
    approve: bool = True,
    *,
    feedback: str | None = None,
    required: list[int] | None = None,
    name: str | None = None,
    at: float = 0.0,
) -> Vote:
    return Vote(
        user=user, name=name, approve=approve, feedback=feedback, at=at, required=required or []
    )


def test_policy_wire_names_and_defaults() -> None:
    policy = ReviewPolicy.model_validate(
        {"approvals": 2, "required": [{"usergroups": ["SLEADS"], "count": 1}]}
    )
    assert policy.declines == 1
    assert policy.reviewers is None
    assert policy.usergroups == frozenset({"SLEADS"})
    assert policy.model_dump(mode="json", by_alias=True, exclude_defaults=True) == {
        "approvals": 2,
        "required": [{"usergroups": ["SLEADS"]}],
    }


@pytest.mark.parametrize(
    ("wire", "fragment"),
    [
        ({"approvals": 0}, "greater than or equal to 1"),
        ({"approvals": 1, "required": [{"users": ["UALICE"], "count": 2}]}, "more than approvals"),
        ({"reviewers": {"users": ["<!channel>"]}}, "should match pattern"),
        ({"reviewers": {"usergroups": ["S-1|x"]}}, "should match pattern"),
        ({"required": [{"count": 1}]}, "at least one user or user group"),
        ({"reviewers": {}}, "at least one user or user group"),
        ({"quorum": 2}, "Extra inputs are not permitted"),
        ({"declines": 0}, "greater than or equal to 1"),
    ],
)
def test_policy_refuses_what_cannot_be_decided(wire: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        ReviewPolicy.model_validate(wire)


def test_quorum_two_of_three() -> None:
    policy = ReviewPolicy(approvals=2)
    votes = cast([], vote("U1"))
    assert tally(policy, votes).outcome is None
    assert tally_line(policy, votes).endswith("still needs 1 more approval")
    votes = cast(votes, vote("U2"))
    assert tally(policy, votes).outcome == "approved"


def test_the_same_person_never_counts_twice() -> None:
    policy = ReviewPolicy(approvals=2)
    votes = cast(cast([], vote("U1", at=1)), vote("U1", at=2))
    assert len(votes) == 1
    assert tally(policy, votes).approvals == 1
    assert tally(policy, votes).outcome is None


def test_a_changed_vote_replaces_the_earlier_one() -> None:
    policy = ReviewPolicy(approvals=2, declines=2)
    votes = cast(cast([], vote("U1", False, feedback="no")), vote("U2"))
    assert tally(policy, votes).declines == 1
    votes = cast(votes, vote("U1"))
    assert tally(policy, votes).declines == 0
    assert tally(policy, votes).outcome == "approved"


def test_any_one_decline_ends_it_by_default() -> None:
    policy = ReviewPolicy(approvals=2)
    votes = cast(cast([], vote("U1")), vote("U2", False))
    assert tally(policy, votes).outcome == "declined"


def test_required_group_must_approve() -> None:
    policy = ReviewPolicy.model_validate(
        {"approvals": 2, "required": [{"usergroups": ["SLEADS"], "count": 1}]}
    )
    votes = cast(cast([], vote("U1")), vote("U2"))
    result = tally(policy, votes)
    assert result.outcome is None
    assert result.approvals == 2
    assert [n for _, n in result.waiting] == [1]
    assert tally_line(policy, votes).endswith("still needs 1 from <!subteam^SLEADS>")
    votes = cast(votes, vote("U3", required=[0]))
    assert tally(policy, votes).outcome == "approved"


def test_one_approver_counts_toward_every_set_they_belong_to() -> None:
    policy = ReviewPolicy.model_validate(
        {"approvals": 1, "required": [{"users": ["UALICE"]}, {"usergroups": ["SOPS"]}]}
    )
    assert tally(policy, [vote("U1", required=[0, 1])]).outcome == "approved"
    assert tally(policy, [vote("U1", required=[0])]).outcome is None


def test_feedback_is_combined_one_attributed_line_each() -> None:
    votes = [
        vote("U1", False, feedback="  Add a rollback step. ", name="Alice"),
        vote("U2"),
        vote("U3", False, feedback="Run it on staging first.", name=None),
        vote("U4", False, feedback="   "),
    ]
    assert combined_feedback(votes) == "Alice: Add a rollback step.\nU3: Run it on staging first."
    assert combined_feedback([vote("U1", False)]) is None


def test_plan_diff_shows_added_and_removed_lines_and_folds_the_rest() -> None:
    old = "1. Build\n2. Test\n3. Deploy to prod\n4. Announce"
    new = "1. Build\n2. Test\n3. Deploy to staging\n4. Deploy to prod\n5. Announce"
    diff = plan_diff(old, new)
    assert diff.added == 3
    assert diff.removed == 2
    assert diff.unchanged == 2
    assert diff.lines == (
        "… 2 unchanged lines",
        "- 3. Deploy to prod",
        "- 4. Announce",
        "+ 3. Deploy to staging",
        "+ 4. Deploy to prod",
        "+ 5. Announce",
    )
    assert diff.summary == "+3 −2, unchanged: 2 lines"


def test_plan_diff_of_identical_plans_changes_nothing() -> None:
    diff = plan_diff("a\nb", "a\nb")
    assert (diff.added, diff.removed, diff.unchanged) == (0, 0, 2)
    assert diff.lines == ("… 2 unchanged lines",)


# ---------------------------------------------------------------------------------------
# The view


def test_tally_line_names_who_is_still_needed() -> None:
    from adapters.slack.render.review_view import tally_line

    policy = ReviewPolicy.model_validate(
        {"approvals": 2, "required": [{"usergroups": ["SLEADS"], "count": 1}]}
    )
    assert tally_line(policy, [vote("U1")]) == (
        "*Waiting for approval* — 1 of 2 approvals so far; still needs 1 from <!subteam^SLEADS>"
    )
    assert tally_line(ReviewPolicy(approvals=3), [vote("U1")]) == (
        "*Waiting for approval* — 1 of 3 approvals so far; still needs 2 more approvals"
    )
    assert tally_line(policy, [vote("U1"), vote("U2", required=[0])]) == "*Approved 2 of 2*"
    assert tally_line(policy, [vote("U1"), vote("U2", False)]).startswith("*Declined* (1 decline")
    leads = ReviewPolicy.model_validate({"approvals": 2, "reviewers": {"usergroups": ["SLEADS"]}})
    assert (
        tally_line(leads, [vote("U1")])
        == "*Waiting for approval* — 1 of 2 approvals so far; still needs 1 from <!subteam^SLEADS>"
    )


def test_vote_lines_escape_feedback() -> None:
    from adapters.slack.render.review_view import vote_lines

    lines = vote_lines([vote("U1"), vote("U2", False, feedback="<!channel> & <https://x|y>")])
    assert lines[0].startswith(":white_check_mark: <@U1> approved")
    assert "<!channel>" not in lines[1]
    assert "“&lt;!channel&gt; &amp; &lt;https://x|y&gt;”" in lines[1]


def test_revision_shows_link_feedback_and_diff() -> None:
    from adapters.slack.model.tally import Revision
    from adapters.slack.render.review_view import revision_blocks
    from tests.slack.render.test_review_wording import diff_rows

    revision = Revision(
        previous_id="r1",
        previous_plan="a\nb\nc",
        previous_link="https://example.slack.com/x",
        feedback="Alice: drop <b>",
    )
    blocks, thread = revision_blocks(revision, "a\nB\nc")
    assert "<https://example.slack.com/x|the previous review>" in blocks[0]["elements"][0]["text"]
    assert blocks[1] == {"type": "markdown", "text": "**Feedback**\n> Alice: drop &lt;b&gt;"}
    assert "+1 −1, unchanged: 2 lines" in blocks[2]["text"]["text"]
    assert diff_rows(blocks) == ["… 1 unchanged line", "− b", "+ B", "… 1 unchanged line"]
    assert thread == []


def test_a_long_diff_continues_in_the_thread_whole() -> None:
    from adapters.slack.model.tally import Revision
    from adapters.slack.render.review_view import revision_blocks
    from tests.slack.render.test_review_wording import diff_rows

    old = "\n".join(f"step {i}" for i in range(400))
    new = "\n".join(f"step {i} (revised)" for i in range(400))
    blocks, thread = revision_blocks(Revision(previous_id="r1", previous_plan=old), new)
    assert "in the thread below" in blocks[-1]["text"]["text"]
    rows = [row for part in thread for row in diff_rows(part)]
    assert rows == [f"− step {i}" for i in range(400)] + [
        f"+ step {i} (revised)" for i in range(400)
    ]
    assert all(check_message(part) == [] for part in thread)
