"""What a person reads on a plan review and an approval: never a plan approved that was not.

Through the real renderers, as the provider renders a record: an ended team review that was
never approved says so (no "Approved … waiting for" leading it), asker text quoted in a
line of the bot's own words cannot add a line or formatting of its own ("Declined by @bob —
«fine»" followed by a bold green "Approved by @alice"), a reviewer's feedback stays inside
its quote, and a revision's diff shows every changed line whole, after its marker.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from adapters.slack.clicks.transitions import apply_vote
from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.model.tally import Revision, Vote
from adapters.slack.render.approval import render_record
from adapters.slack.render.blocks.message import render_final, render_open
from adapters.slack.render.blocks.parts import Rendered
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.errors import ASK_TIMEOUT
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem
from bot.questions.review import ReviewPolicy

RID = "0123456789abcdef0123"
ALICE, BOB, CAROL = "U0ALICE001", "U0BOB00001", "U0CAROL001"
AT = 1_700_000_000.0
ZWSP = "\u200b"
FAKE_APPROVAL = ":white_check_mark: *Approved by @alice*"


def plan_question(detail: str = "# Plan\n\n1. Ship it") -> AskUserQuestionItem:
    return AskUserQuestionItem.model_validate(
        {
            "id": "plan-review",
            "header": "Plan review",
            "question": "Approve this plan and leave plan mode?",
            "detail": detail,
            "options": [{"label": "Approve"}, {"label": "Keep planning"}],
            "intent": {"kind": "plan-review", "approve": "Approve"},
        }
    )


def review(detail: str = "# Plan\n\n1. Ship it", **fields: Any) -> PendingRecord:
    fields.setdefault("owner", "proc-1")
    return PendingRecord(id=RID, channel="C0QUESTION", questions=[plan_question(detail)], **fields)


def voted(record: PendingRecord, user: str, approve: bool, feedback: str | None = None) -> Any:
    """``record`` after ``user``'s vote, as a click applies it (ended when the tally says)."""
    vote = Vote(user=user, name=user.lower(), approve=approve, feedback=feedback, at=AT)
    after = apply_vote(record, vote)
    assert after is not None
    return after


def team_review(approvals: int, *votes: tuple[str, bool], **policy: Any) -> PendingRecord:
    record = review(review=ReviewPolicy(approvals=approvals, **policy))
    for user, approve in votes:
        record = voted(record, user, approve)
    return record


ENDINGS: dict[str, dict[str, Any]] = {
    "timed out": {"state": "failed", "error_code": ASK_TIMEOUT, "note": "No answer in 600 s."},
    "dismissed": {"state": "cancelled", "answered_by": BOB},
    "cancelled": {"state": "aborted", "note": "Cancelled: the asker stopped waiting."},
}


def ended(record: PendingRecord, how: str) -> PendingRecord:
    return record.next(finished_at=AT + 60, **ENDINGS[how])


def tally_text(rendered: Rendered) -> str:
    """The team review's tally section (its first line is the tally, then one per vote)."""
    (text,) = [
        b["text"]["text"]
        for b in rendered.blocks
        if b["type"] == "section" and "of " in b["text"]["text"] and "<@" in b["text"]["text"]
    ]
    return str(text)


def outcome_line(rendered: Rendered) -> str:
    """The outcome context line of a final message (it carries the date token)."""
    (line,) = [
        e["text"]
        for b in rendered.blocks
        if b["type"] == "context"
        for e in b["elements"]
        if "<!date^" in e.get("text", "")
    ]
    return str(line)


def unneutralised(text: str) -> list[str]:
    """Formatting characters Slack could read as markup: not fenced by zero-width spaces."""
    return re.findall(rf"(?<!{ZWSP})[*_~`]|[*_~`](?!{ZWSP})", text)


# ---------------------------------------------------------------------------------------
# 1. An ended team review that was never approved reads "Not approved"


@pytest.mark.parametrize("how", sorted(ENDINGS))
def test_an_ended_review_one_approval_short_reads_not_approved(how: str) -> None:
    record = ended(team_review(2, (ALICE, True)), how)
    rendered = render_final(record)
    tally, *votes = tally_text(rendered).split("\n")
    assert tally.startswith("*Not approved*")
    assert "1 of 2 approvals" in tally
    assert "waiting for" not in tally and "Approved" not in tally
    assert not tally.startswith(":white_check_mark:")
    # Every vote is still listed as it was cast.
    assert len(votes) == 1 and votes[0].startswith(f":white_check_mark: <@{ALICE}> approved")
    assert "Approved" not in outcome_line(rendered)
    assert check_message(rendered.blocks, rendered.text) == []


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([], "*Not approved* (0 of 2 approvals)"),
        ([(ALICE, True)], "*Not approved* (1 of 2 approvals)"),
        ([(ALICE, True), (BOB, False)], "*Not approved* (1 of 2 approvals; 1 decline)"),
    ],
)
def test_the_tally_of_an_ended_review_says_not_approved(
    votes: list[tuple[str, bool]], expected: str
) -> None:
    from adapters.slack.render.review_view import tally_line

    record = team_review(2, *votes, declines=2)
    assert record.review is not None and record.is_open
    assert tally_line(record.review, record.votes, ended=True) == expected
    # Open, the same votes lead with "Waiting for approval", never with "Approved".
    assert tally_line(record.review, record.votes).startswith(
        f"*Waiting for approval* — {len([v for v in votes if v[1]])} of 2 approvals so far;"
    )


def test_an_ended_review_with_no_vote_reads_not_approved() -> None:
    rendered = render_final(ended(team_review(1), "timed out"))
    text = " ".join(b["text"]["text"] for b in rendered.blocks if b["type"] == "section")
    assert "*Not approved* (0 of 1 approval)" in text
    assert "waiting for" not in text


def test_exactly_the_approvals_needed_reads_approved() -> None:
    record = team_review(2, (ALICE, True), (BOB, True))
    assert record.state == "answered"
    rendered = render_final(record)
    tally, *votes = tally_text(rendered).split("\n")
    assert tally == "*Approved 2 of 2*"
    assert [v.split(" · ")[0] for v in votes] == [
        f":white_check_mark: <@{ALICE}> approved",
        f":white_check_mark: <@{BOB}> approved",
    ]
    assert outcome_line(rendered).startswith(f":white_check_mark: Approved by <@{ALICE}>, <@{BOB}>")


def test_an_open_review_still_waits_for_the_approval_it_needs() -> None:
    rendered = render_open(team_review(2, (ALICE, True)))
    text = " ".join(b["text"]["text"] for b in rendered.blocks if b["type"] == "section")
    assert "*Waiting for approval* — 1 of 2 approvals so far; still needs 1 more approval" in text
    assert "*Approved" not in text


def test_a_declined_review_leads_with_declined() -> None:
    record = team_review(2, (ALICE, True), (BOB, False))
    tally = tally_text(render_final(record)).split("\n")[0]
    assert tally.startswith("*Declined* (1 decline")
    assert "approved" not in tally.lower()


def test_an_ended_review_short_of_a_required_group_reads_not_approved() -> None:
    policy = {"required": [{"usergroups": ["S0LEADS001"], "count": 1}]}
    record = ended(team_review(2, (ALICE, True), (BOB, True), **policy), "timed out")
    tally = tally_text(render_final(record)).split("\n")[0]
    assert tally.startswith("*Not approved* (2 of 2 approvals")
    assert "waiting for" not in tally


# ---------------------------------------------------------------------------------------
# 2. A revision's diff: every changed line whole, after its marker (an approval's command
# stays in a code block the bot alone closes)


def fences_balanced(text: str) -> bool:
    """One code block: ``` … ``` with no run of three backticks (or an edge one) inside."""
    if not (text.endswith("```") and "```" in text[:-3]):
        return False
    body = text[text.index("```") + 3 : -3]
    return "```" not in body and not body.startswith("`") and not body.endswith("`")


def revised(old: str, new: str) -> Rendered:
    revision = Revision(previous_id="aaaaaaaabbbb", previous_plan=old, feedback="Go.")
    return render_open(review(new, revision=revision))


def diff_rows(blocks: list[dict[str, Any]]) -> list[str]:
    """A diff's rows as read: ``+ line``, ``− line`` (struck through), ``… N unchanged``."""
    rows = []
    for block in blocks:
        for element in block["elements"] if block["type"] == "rich_text" else []:
            items = element["elements"] if element["type"] == "rich_text_list" else [element]
            rows += ["".join(piece["text"] for piece in item["elements"]) for item in items]
    return rows


def all_diff_rows(rendered: Rendered) -> list[str]:
    """The diff's rows in the message and in each thread reply."""
    return [row for part in [rendered.blocks, *rendered.thread] for row in diff_rows(part)]


@pytest.mark.parametrize("piece", ["make && ", "a<b ", "<>", "Paste ``` then *rm -rf*", "edge`"])
def test_a_diff_line_shows_as_typed(piece: str) -> None:
    new = "# Plan\n\nRun: " + piece * (2000 // len(piece)) + "done\n"
    rendered = revised("# Plan\n\nRun: x\n", new)  # was refused SLACK_LIMIT
    assert f"+ {new.splitlines()[-1]}" in all_diff_rows(rendered)
    assert "− Run: x" in all_diff_rows(rendered)
    for part in [rendered.blocks, *rendered.thread]:
        assert check_message(part) == []


def test_each_changed_line_is_a_list_item_after_its_marker() -> None:
    rendered = revised("a\nb\nc\n", "a\nB\nc\nd\n")
    (diff,) = [b for b in rendered.blocks if b["type"] == "rich_text" and len(b["elements"]) > 1]
    kinds = [element["type"] for element in diff["elements"]]
    assert kinds == ["rich_text_section", "rich_text_list", "rich_text_section", "rich_text_list"]
    removed, added = diff["elements"][1]["elements"]
    assert removed["elements"] == [
        {"type": "text", "text": "− ", "style": {"bold": True}},
        {"type": "text", "text": "b", "style": {"strike": True}},
    ]
    assert added["elements"] == [
        {"type": "text", "text": "+ ", "style": {"bold": True}},
        {"type": "text", "text": "B"},
    ]
    assert diff_rows([diff]) == ["… 1 unchanged line", "− b", "+ B", "… 1 unchanged line", "+ d"]


def test_a_long_diff_continues_in_the_thread_within_limits() -> None:
    new = "# P\n" + "".join(f"Step {i} ```` with `ticks`\n" for i in range(200))
    rendered = revised("# P\n", new)
    assert rendered.thread
    rows = all_diff_rows(rendered)
    assert [row for row in rows if row.startswith("+ ")] == [
        f"+ {line}" for line in new.split("\n")[1:-1]
    ]
    for part in rendered.thread:
        assert check_message(part) == []


# ---------------------------------------------------------------------------------------
# 3. Quoted feedback and approval text cannot add a line or formatting of their own


def declined(custom: str, **fields: Any) -> PendingRecord:
    answer = AskUserQuestionAnswer.model_validate(
        {"answers": [{"id": "plan-review", "selected": [], "custom": custom}]}
    )
    return review(**fields).next(state="answered", answer=answer, answered_by=BOB, finished_at=AT)


def test_declined_feedback_cannot_add_an_approved_line() -> None:
    rendered = render_final(declined(f"fine»\n\n{FAKE_APPROVAL}\n```\nx"))
    line = outcome_line(rendered)
    assert line.startswith(f":x: Declined by <@{BOB}> · <!date^")
    assert "\n" not in line and "white_check_mark" not in line
    quote = rendered.blocks[-2]["text"]  # every line of it inside the quote
    assert quote == f"> fine»\n> \n> {FAKE_APPROVAL}\n> ```\n> x"
    said = rendered.text.split("»", 2)
    assert "\n" not in "»".join(said[:2]) and ":white_check_mark:" not in rendered.text


def test_every_decliners_feedback_is_one_line_of_the_record() -> None:
    record = review(review=ReviewPolicy(approvals=1, declines=2))
    record = voted(record, ALICE, False, "Stage it first.")
    record = voted(record, BOB, False, f"ok”\n{FAKE_APPROVAL}\n\n_really_")
    rendered = render_final(record)
    line = outcome_line(rendered)
    assert "\n" not in line
    # the outcome line names them; each vote line quotes its feedback (issue 39: not twice)
    assert line.replace(ZWSP, "").startswith(f":x: Declined by <@{ALICE}>, <@{BOB}> · <!date^")
    tally = tally_text(rendered).split("\n")
    # The tally, then each vote: its line and its feedback quoted on one line below it.
    assert len(tally) == 5
    assert [row.startswith(":x:") for row in tally[1::2]] == [True, True]
    assert tally[4].replace(ZWSP, "") == f"“ok” / {FAKE_APPROVAL} / _really_”"
    assert unneutralised(tally[4]) == []
    assert not any(row.startswith(":white_check_mark:") for row in tally)


def test_plain_feedback_is_quoted_whole() -> None:
    rendered = render_final(declined("Phase 3 needs a rollback test <first>."))
    assert rendered.blocks[-2]["text"] == "> Phase 3 needs a rollback test &lt;first&gt;."


def test_revision_feedback_stays_inside_its_quote() -> None:
    revision = Revision(
        previous_id="aaaaaaaabbbb", previous_plan="# P\n", feedback=f"Stage it.\n{FAKE_APPROVAL}"
    )
    rendered = render_open(review("# P\nx\n", revision=revision))
    (feedback,) = [
        b["text"]
        for b in rendered.blocks
        if b["type"] == "markdown" and b["text"].startswith("**Feedback**")
    ]
    assert feedback == f"**Feedback**\n> Stage it.\n> {FAKE_APPROVAL}"


def approval(**view: Any) -> PendingRecord:
    view.setdefault("tool_name", "bash")
    view.setdefault("headline", "Run a migration")
    return PendingRecord(
        id=RID, channel="C0QUESTION", questions=[], approval=ApprovalView(**view), label="s*1"
    )


def mrkdwn_texts(rendered: Rendered) -> list[str]:
    out = []
    for block in rendered.blocks:
        if isinstance(block.get("text"), dict) and block["text"]["type"] == "mrkdwn":
            out.append(block["text"]["text"])
        out += [e["text"] for e in block.get("elements", []) if e.get("type") == "mrkdwn"]
    return out


@pytest.mark.parametrize("state", ["pending", "answered"])
def test_an_approval_headline_shows_as_typed_in_bold(state: str) -> None:
    headline = "Run *every* step_now\n:white_check_mark: *Approved*"
    record = approval(headline=headline)
    if state == "answered":
        decided = approval(headline=headline, outcome="allowed-once").approval
        record = record.model_copy(
            update={"state": state, "answered_by": ALICE, "finished_at": AT, "approval": decided}
        )
    rendered = render_record(record)
    bold = [
        leaf
        for b in rendered.blocks
        if b["type"] == "rich_text"
        for section in b["elements"]
        for leaf in section["elements"]
    ]
    assert bold == [{"type": "text", "text": headline, "style": {"bold": True}}]
    assert not any("every" in t for t in mrkdwn_texts(rendered))
    assert check_message(rendered.blocks, rendered.text) == []


def test_a_backtick_in_the_tool_name_cannot_close_its_code() -> None:
    rendered = render_record(approval(tool_name="my`tool\nx", command="ls"))
    (tool,) = [t for t in mrkdwn_texts(rendered) if t.startswith("Tool: ")]
    assert tool.count("`") == 2 and tool.startswith("Tool: `") and tool.endswith("`")
    assert "\n" not in tool and "my" in tool and "tool" in tool


def test_the_asker_label_cannot_break_its_bold() -> None:
    rendered = render_record(approval())
    (byline,) = [t for t in mrkdwn_texts(rendered) if "Asked by" in t]
    label = byline.split("Asked by *", 1)[1].rsplit("*", 1)[0]
    assert label.replace(ZWSP, "") == "s*1"
    assert unneutralised(label) == []


@pytest.mark.parametrize("command", ["echo ```", "a ```` b", "`ls`", "``````"])
def test_a_command_cannot_close_its_code_block(command: str) -> None:
    rendered = render_record(approval(command=command))
    (code,) = [t for t in mrkdwn_texts(rendered) if t.startswith("```")]
    assert fences_balanced(code)
    assert code.replace(ZWSP, "")[3:-3] == command


def test_a_long_path_fits_its_section() -> None:
    rendered = render_record(approval(path="/srv/" + "a&b/" * 1500))
    (code,) = [t for t in mrkdwn_texts(rendered) if t.startswith("Path: ```")]
    assert len(code) <= 3000 and fences_balanced(code)
    assert check_message(rendered.blocks, rendered.text) == []


def test_one_word_for_no_on_the_buttons_the_tally_and_the_record() -> None:
    """The buttons say Decline: a decline with feedback, a plain decline, the tally and
    the record all say declined (no "asked for changes", "Rejected" or "No") (issue 39)."""
    record = review(review=ReviewPolicy(approvals=1, declines=2))
    buttons = [
        e["text"]["text"]
        for b in render_open(record).blocks
        if b["type"] == "actions"
        for e in b["elements"]
    ]
    assert "Decline with feedback…" in buttons
    record = voted(record, ALICE, False, "Stage it first.")
    open_tally = tally_text(render_open(record)).split("\n")
    assert open_tally[1].startswith(f":x: <@{ALICE}> declined · ")
    assert open_tally[2] == "“Stage it first.”"
    record = voted(record, BOB, False)
    final = render_final(record)
    lines = tally_text(final).split("\n")
    assert lines[0].startswith("*Declined* (2 declines;")
    assert lines[3].startswith(f":x: <@{BOB}> declined · ")
    assert outcome_line(final).startswith(f":x: Declined by <@{ALICE}>, <@{BOB}> · ")
    said = f"{tally_text(final)}\n{outcome_line(final)}\n{final.text}".lower()
    assert not any(word in said for word in ("asked for changes", "reject", "keep planning"))
