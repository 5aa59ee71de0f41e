"""An open team review never reads "Approved", and a required group Slack cannot read says so.

1. The live tally of a review still waiting leads with "*Waiting for approval*" (no bold
   "Approved", no check mark): "Approved 1 of 1 — waiting for 1 from @reviewers" read as
   approved while the review was still open. The bold "Approved" is the approved outcome's
   alone.
2. A required group Slack says does not exist (``no_such_subteam``) or that the bot may not
   read (``missing_scope``…) is shown as its raw id with Slack's word, and the message says
   the review cannot be approved as set, instead of waiting forever for "@S0PLATFORM".
   What Slack said is read when a vote is cast (as membership is) and kept on the vote, so
   rendering needs no Web API call and any process shows it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.model.record import PendingRecord
from adapters.slack.model.tally import Vote
from adapters.slack.render.blocks.message import render_final, render_open
from adapters.slack.render.review_view import tally_line
from adapters.slack.sandbox import SlackStandIn
from bot.questions import AskOptions, ReviewPolicy
from bot.questions.errors import ASK_TIMEOUT
from bot.questions.models import AskUserQuestionItem
from tests.slack.asks.test_slack_provider import finished, plan
from tests.slack_harness import SlackHarness, all_text, until

pytestmark = pytest.mark.timeout(60)

LEADS = "S0LEADS001"
GONE = "S0PLATFORM"
ALICE, BOB, CAROL = "U0ALICE001", "U0BOB00001", "U0CAROL001"
AT = 1_700_000_000.0
WAITING = "*Waiting for approval* — "


def vote(
    user: str,
    approve: bool = True,
    *,
    required: list[int] | None = None,
    unreadable: dict[str, str] | None = None,
) -> Vote:
    fields: dict[str, Any] = {"unreadable": unreadable} if unreadable else {}
    return Vote(user=user, approve=approve, at=AT, required=required or [], **fields)


def policy(**wire: Any) -> ReviewPolicy:
    return ReviewPolicy.model_validate(wire)


def needs(group: str, count: int = 1, **wire: Any) -> ReviewPolicy:
    """A policy whose ``required`` is ``count`` approvals from ``group``."""
    wire.setdefault("approvals", count)
    return policy(required=[{"usergroups": [group], "count": count}], **wire)


# ---------------------------------------------------------------------------------------
# 1. The tally's wording, open and ended


@pytest.mark.parametrize(
    ("review", "votes", "expected"),
    [
        (
            policy(approvals=2),
            [],
            "0 of 2 approvals so far; still needs 2 more approvals",
        ),
        (
            policy(approvals=2),
            [vote(ALICE)],
            "1 of 2 approvals so far; still needs 1 more approval",
        ),
        (  # every approval counted but the group's: the screenshot's "Approved 2 of 2"
            needs(LEADS, approvals=2),
            [vote(ALICE), vote(BOB)],
            f"2 of 2 approvals so far; still needs 1 from <!subteam^{LEADS}>",
        ),
        (  # carol, not in the group, approved: the screenshot's "Approved 1 of 1"
            needs(LEADS),
            [vote(CAROL)],
            f"1 of 1 approval so far; still needs 1 from <!subteam^{LEADS}>",
        ),
        (
            policy(approvals=2, reviewers={"usergroups": [LEADS]}),
            [vote(ALICE)],
            f"1 of 2 approvals so far; still needs 1 from <!subteam^{LEADS}>",
        ),
        (
            needs(LEADS, approvals=3),
            [vote(ALICE)],
            f"1 of 3 approvals so far; still needs 2 more approvals and 1 from <!subteam^{LEADS}>",
        ),
        (
            policy(approvals=2, declines=2),
            [vote(ALICE), vote(BOB, False)],
            "1 of 2 approvals so far; still needs 1 more approval · 1 of 2 declines end the review",
        ),
    ],
)
def test_an_open_tally_leads_with_waiting_for_approval(
    review: ReviewPolicy, votes: list[Vote], expected: str
) -> None:
    line = tally_line(review, votes)
    assert line == WAITING + expected
    assert "Approved" not in line and "approved" not in line.replace("be approved as set", "")
    assert ":white_check_mark:" not in line


def test_the_approved_outcome_alone_reads_approved() -> None:
    assert tally_line(policy(approvals=2), [vote(ALICE), vote(BOB)]) == "*Approved 2 of 2*"
    # More approvals than needed (one outside the required group came first).
    counted = tally_line(needs(LEADS), [vote(CAROL), vote(ALICE, required=[0])])
    assert counted == "*Approved* (2 approvals; 1 needed)"


def test_a_declined_and_an_ended_tally_never_read_approved_or_waiting() -> None:
    declined = tally_line(policy(approvals=2), [vote(ALICE), vote(BOB, False)])
    assert declined == "*Declined* (1 decline; 1 of 2 approvals)"
    ended = tally_line(needs(LEADS, approvals=2), [vote(ALICE), vote(BOB)], ended=True)
    assert ended == "*Not approved* (2 of 2 approvals)"
    assert tally_line(policy(approvals=2), [], ended=True) == "*Not approved* (0 of 2 approvals)"


def review_record(review: ReviewPolicy, votes: list[Vote], **fields: Any) -> PendingRecord:
    question = AskUserQuestionItem.model_validate(plan()["questions"][0])
    return PendingRecord(
        id="0123456789abcdef0123",
        channel="C0QUESTION",
        owner="proc-1",
        questions=[question],
        review=review,
        votes=votes,
        **fields,
    )


def sections(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


def test_the_open_message_and_the_final_record_render_the_same_wording() -> None:
    record = review_record(needs(LEADS, approvals=2), [vote(ALICE), vote(BOB)])
    (tally,) = [s for s in sections(render_open(record).blocks) if "<@" in s]
    assert tally.startswith(WAITING + "2 of 2 approvals so far; still needs 1 from ")
    assert "*Approved" not in tally
    timed_out = record.next(
        state="failed", error_code=ASK_TIMEOUT, note="No answer.", finished_at=AT + 60
    )
    (final,) = [s for s in sections(render_final(timed_out).blocks) if "<@" in s]
    assert final.startswith("*Not approved* (2 of 2 approvals)")


# ---------------------------------------------------------------------------------------
# 2. A required group Slack cannot read


def test_a_group_slack_has_not_is_shown_by_its_id_and_the_review_as_unapprovable() -> None:
    votes = [vote(ALICE), vote(BOB, unreadable={GONE: "no_such_subteam"})]
    line = tally_line(needs(GONE, approvals=2), votes)
    assert line == WAITING + (
        f"2 of 2 approvals so far; still needs 1 from `{GONE}` (Slack has no such user group),"
        " so this review cannot be approved as set"
    )
    assert f"<!subteam^{GONE}>" not in line


def test_a_group_the_bot_may_not_read_names_the_missing_scope() -> None:
    votes = [vote(ALICE, unreadable={GONE: "missing_scope"})]
    line = tally_line(needs(GONE), votes)
    assert f"`{GONE}` (the bot lacks the usergroups:read scope)" in line
    assert line.endswith("so this review cannot be approved as set")


def test_an_unreadable_group_beside_people_named_only_says_so_for_the_group() -> None:
    review = policy(approvals=1, required=[{"users": [CAROL], "usergroups": [GONE]}])
    line = tally_line(review, [vote(ALICE, unreadable={GONE: "no_such_subteam"})])
    assert f"`{GONE}` (Slack has no such user group)" in line
    assert "cannot be approved" not in line  # carol can still approve


def test_word_on_a_group_outside_the_policy_or_of_an_unknown_kind_shows_nothing_made_up() -> None:
    votes = [vote(ALICE, unreadable={"S0OTHER01": "no_such_subteam", LEADS: "<!channel>"})]
    line = tally_line(needs(LEADS, approvals=2), votes)
    assert "S0OTHER01" not in line and "<!channel>" not in line
    assert f"`{LEADS}` (Slack will not let the bot read its members)" in line


def test_a_vote_without_word_on_groups_is_stored_and_listed_as_before() -> None:
    plain = vote(ALICE).model_dump(mode="json", by_alias=True)
    assert "unreadable" not in plain  # the API's votes are unchanged
    worded = vote(ALICE, unreadable={GONE: "no_such_subteam"})
    again = Vote.model_validate_json(worded.model_dump_json(by_alias=True))
    assert again.unreadable == {GONE: "no_such_subteam"}


async def test_the_gatekeeper_says_which_groups_slack_would_not_list() -> None:
    from adapters.slack.asks.authorize import Gatekeeper

    async with SlackStandIn() as slack:
        alice = slack.workspace.add_user("alice").id
        leads = slack.workspace.add_usergroup("leads", [alice]).id
        client = AsyncWebClient(token=slack.token, base_url=slack.url)
        keeper = Gatekeeper(client, ttl=0.1, logger=logging.getLogger("tests.tally"))
        member = await keeper.groups_of(alice, [leads, GONE])
        assert member == {leads}
        assert getattr(member, "unreadable", None) == {GONE: "no_such_subteam"}
        cached = keeper.groups_cached(alice, [leads, GONE])
        assert cached == {leads}
        assert getattr(cached, "unreadable", None) == {GONE: "no_such_subteam"}
        known = keeper.groups_cached(alice, [GONE], stale=True)
        assert known == set()
        assert getattr(known, "unreadable", None) == {GONE: "no_such_subteam"}
        # Created since: the next read clears Slack's earlier word.
        slack.workspace.add_usergroup("platform", [alice], id=GONE)
        await asyncio.sleep(0.15)
        member = await keeper.groups_of(alice, [GONE])
        assert member == {GONE} and getattr(member, "unreadable", None) == {}


# ---------------------------------------------------------------------------------------
# End to end: the bolt app, the Slack stand-in, signed clicks


def ask_options(**wire: Any) -> AskOptions:
    return AskOptions(review=ReviewPolicy.model_validate(wire))


async def shows(h: SlackHarness, message: Any, fragment: str) -> str:
    """Wait until the message shows ``fragment``; return its text."""
    text = await until(
        lambda: (lambda t: t if fragment in t else None)(all_text(h.current(message).blocks)),
        what=repr(fragment),
    )
    return str(text)


async def approve(h: SlackHarness, message: Any, user: str) -> None:
    status, _ = await h.click(message, user, text="Approve")
    assert status == 200


async def test_an_approval_from_outside_the_required_group_leaves_it_waiting_not_approved() -> None:
    async with SlackHarness() as h:
        reviewers = h.slack.workspace.add_usergroup("reviewers", [h.alice, h.bob])
        group = f"<!subteam^{reviewers.id}>"
        task = h.ask(
            plan(), options=ask_options(required=[{"usergroups": [reviewers.id], "count": 1}])
        )
        message = await h.posted()
        first = all_text(message.blocks)
        assert WAITING + f"0 of 1 approval so far; still needs 1 from {group}" in first
        await approve(h, message, h.carol)
        text = await shows(h, message, f"<@{h.carol}> approved")
        assert WAITING + f"1 of 1 approval so far; still needs 1 from {group}" in text
        assert "*Approved" not in text
        assert not task.done()
        await approve(h, message, h.alice)
        assert (await task).answers[0].selected == ["Approve"]
        final = all_text((await finished(h, message)).blocks)
        assert "*Approved* (2 approvals; 1 needed)" in final
        assert "Waiting for approval" not in final


async def test_a_required_group_slack_does_not_have_is_said_on_the_message() -> None:
    async with SlackHarness() as h:
        task = h.ask(
            plan(),
            options=ask_options(approvals=2, required=[{"usergroups": [GONE], "count": 1}]),
        )
        message = await h.posted()
        await approve(h, message, h.alice)
        await shows(h, message, f"<@{h.alice}> approved")
        await approve(h, message, h.bob)
        text = await shows(h, message, f"<@{h.bob}> approved")
        assert (
            WAITING + f"2 of 2 approvals so far; still needs 1 from `{GONE}` (Slack has no such"
            " user group), so this review cannot be approved as set"
        ) in text
        assert f"<!subteam^{GONE}>" not in text and "*Approved" not in text
        assert not task.done()
        record = await h.provider.store.get(_request_id(message))
        assert record is not None
        assert record.votes[-1].unreadable == {GONE: "no_such_subteam"}


async def test_the_first_vote_on_a_cold_cache_also_says_the_group_does_not_exist() -> None:
    async with SlackHarness() as h:
        h.ask(plan(), options=ask_options(required=[{"usergroups": [GONE], "count": 1}]))
        message = await h.posted()
        await approve(h, message, h.alice)
        await shows(h, message, f"<@{h.alice}> approved")
        assert "Slack has no such user group" in all_text(h.current(message).blocks)


def documented_team_review() -> dict[str, Any]:
    """The team-review example of docs/team-reviews.md, as written."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "team-reviews.md").read_text("utf-8")
    section = text[text.index("# Team plan reviews") :]
    example = section[section.index("```json") + len("```json") : section.index("\n```\n")]
    wire: dict[str, Any] = json.loads(example)
    return wire


async def test_the_documented_team_review_example_finishes_in_the_sandbox_as_written() -> None:
    from adapters.slack.sandbox.site import SandboxServer

    wire = documented_team_review()
    review = ReviewPolicy.model_validate(wire.pop("review"))
    sandbox = SandboxServer(signing_secret="unused").standin.workspace
    people = {u.id: u.name for u in sandbox.users.values()}
    for group in review.usergroups:  # every group it names is the sandbox's
        assert group in sandbox.usergroups, f"the documented example names {group}"
        members = {people[u] for u in sandbox.usergroups[group].users}
        assert members == {"alice", "bob"}
    async with SlackHarness() as h:
        for group in review.usergroups:
            h.slack.workspace.add_usergroup("reviewers", [h.alice, h.bob], id=group)
        task = h.ask(wire, options=AskOptions(review=review))
        message = await h.posted()
        await approve(h, message, h.carol)
        await shows(h, message, f"<@{h.carol}> approved")
        await approve(h, message, h.alice)
        assert (await task).answers[0].selected == ["Approve"]


def _request_id(message: Any) -> str:
    from adapters.slack.model import ids

    for block in message.blocks:
        ref = ids.parse_block_id(block.get("block_id"))
        if ref is not None:
            return ref.request_id
    raise AssertionError("no request id in the message")


# ---------------------------------------------------------------------------------------
# 3. What a later vote learnt replaces what an earlier one kept


def test_a_later_vote_whose_read_worked_clears_the_groups_warning() -> None:
    """The scope was added (or the group created) after the first vote: the second vote
    read the group, so the message no longer says the review cannot be approved."""
    review = needs(GONE, approvals=1)
    first = vote(ALICE, unreadable={GONE: "missing_scope"})
    line = tally_line(review, [first])
    assert "cannot be approved as set" in line and "usergroups:read" in line
    line = tally_line(review, [first, vote(BOB)])
    assert "cannot be approved" not in line and "usergroups:read" not in line
    assert line.startswith(WAITING) and f"<!subteam^{GONE}>" in line


def test_approvals_past_the_count_with_a_group_still_missing_read_plainly() -> None:
    review = needs(LEADS, approvals=1)
    line = tally_line(review, [vote(ALICE), vote(BOB)])
    assert line.startswith(WAITING + "2 approvals so far (1 needed); still needs 1 from ")
    assert "2 of 1" not in line
