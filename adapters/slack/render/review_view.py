"""Pure rendering of team plan reviews: the live tally, the votes, what a revision changed."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from adapters.slack.blockkit import MAX_SECTION_TEXT
from adapters.slack.model.record import PendingRecord
from adapters.slack.model.tally import Revision, Vote, tally
from adapters.slack.render.blocks.parts import context, markdown, section
from adapters.slack.render.mrkdwn import escape, markdown_text, shorten, shorten_escaped
from adapters.slack.render.outcomes import date, literal, one_line, opened_words
from adapters.slack.render.rich import Block, Piece, bold, italic, rich_line, rich_list, words
from bot.questions.review import ReviewerSet, ReviewPolicy

DIFF_IN_MESSAGE: Final = 2500
"""Characters of diff shown in the message; a longer diff goes to the thread."""
_FEEDBACK_SHOWN: Final = 500


_WHY_UNREADABLE: Final = {
    "no_such_subteam": "Slack has no such user group",
    "subteam_not_found": "Slack has no such user group",
    "missing_scope": "the bot lacks the usergroups:read scope",
    "plan_upgrade_required": "this Slack plan has no user groups",
}
_UNREADABLE: Final = "Slack will not let the bot read its members"
"""Slack's other lasting errors (a token refused): its code is not shown."""


def _who(people: ReviewerSet, unreadable: Mapping[str, str]) -> str:
    """The people of a set as mentions; a group Slack would not list by its raw id (a
    mention of a group Slack has not reads as a real one) with Slack's word on it."""
    names = [f"<@{u}>" for u in people.users] + [
        f"`{g}` ({_WHY_UNREADABLE.get(unreadable[g], _UNREADABLE)})"
        if g in unreadable
        else f"<!subteam^{g}>"
        for g in people.usergroups
    ]
    return names[0] if len(names) == 1 else "one of " + ", ".join(names)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def tally_line(policy: ReviewPolicy, votes: Sequence[Vote], *, ended: bool = False) -> str:
    """ "Waiting for approval — 1 of 2 approvals so far; still needs 1 from @platform-leads"
    (escaped mrkdwn) while the review is open; "Approved 2 of 2" once approved."""
    result = tally(policy, votes)
    approvals = f"{result.approvals} of {_plural(result.needed, 'approval')}"
    if result.outcome == "declined":
        return f"*Declined* ({_plural(result.declines, 'decline')}; {approvals})"
    if result.outcome == "approved":
        if result.approvals > result.needed:  # not "Approved 2 of 1"
            return f"*Approved* ({_plural(result.approvals, 'approval')}; {result.needed} needed)"
        return f"*Approved {result.approvals} of {result.needed}*"
    if ended:
        declines = f"; {_plural(result.declines, 'decline')}" if result.declines else ""
        return f"*Not approved* ({approvals}{declines})"
    # Slack's word on the policy's groups it would not list, as the latest vote (which read
    # them all) kept it; only groups of the policy, so only ids it validated are shown.
    said = votes[-1].unreadable if votes else {}
    unreadable = {g: error for g, error in said.items() if g in policy.usergroups}
    waits = [f"{n} from {_who(group, unreadable)}" for group, n in result.waiting]
    general = result.needed - result.approvals
    if general > max((n for _, n in result.waiting), default=0):
        if policy.reviewers is not None:
            waits.insert(0, f"{general} from {_who(policy.reviewers, unreadable)}")
        else:
            waits.insert(0, _plural(general, "more approval"))
    so_far = (  # the count met, a required group's approval still missing: not "2 of 1"
        f"{_plural(result.approvals, 'approval')} so far ({result.needed} needed)"
        if result.approvals > result.needed
        else f"{approvals} so far"
    )
    line = f"*Waiting for approval* — {so_far}; still needs " + " and ".join(waits)
    if any(
        not group.users and set(group.usergroups) <= unreadable.keys()
        for group, _ in result.waiting
    ):
        line += ", so this review cannot be approved as set"
    if policy.declines > 1:
        line += f" · {result.declines} of {policy.declines} declines end the review"
    return line


def tally_blocks(record: PendingRecord, limit: int = MAX_SECTION_TEXT) -> list[Block]:
    """A team review's live tally and every vote within ``limit`` (nothing without a policy)."""
    if record.review is None:
        return []
    ended = not record.is_open  # an ended review short of approval reads not approved
    lines = [tally_line(record.review, record.votes, ended=ended), *vote_lines(record.votes)]
    return [section("\n".join(lines), limit)]


def vote_lines(votes: Sequence[Vote]) -> list[str]:
    """One escaped mrkdwn line per vote, in the order they were cast."""
    lines = []
    for vote in votes:
        said = ":white_check_mark: {} approved" if vote.approve else ":x: {} declined"
        opened = opened_words(vote.opened_whole_plan)
        lines.append(f"{said.format(f'<@{vote.user}>')}{opened} · {date(vote.at, clock=True)}")
        if not vote.approve and vote.feedback and vote.feedback.strip():
            # Quoted on one line below the vote: it cannot add a vote line of its own.
            lines[-1] += f"\n“{shorten_escaped(literal(one_line(vote.feedback)), _FEEDBACK_SHOWN)}”"
    return lines


def feedback_block(feedback: str, limit: int, title: str = "") -> Block:
    """A reviewer's feedback, formatted as they wrote it, quoted in a ``markdown`` block of
    at most ``limit`` characters (past it: its beginning and how much is left out)."""
    text = feedback.strip()
    shown = text
    while True:
        quote = [f"> {line}" for line in markdown_text(shown).split("\n")]
        if len(shown) < len(text):
            quote.append(f"> _[… {len(text) - len(shown):,} more characters left out …]_")
        body = "\n".join([title, *quote] if title else quote)
        if len(body) <= limit or not shown:
            return markdown(body)
        shown = shown[: min(len(shown) - 1, len(shown) * (limit - 60) // len(body))].rstrip()


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """The changed lines of a plan and how many stayed the same."""

    lines: tuple[str, ...]
    """``+ line`` / ``- line`` in plan order, with ``… N unchanged lines`` between runs."""
    added: int
    removed: int
    unchanged: int

    @property
    def summary(self) -> str:
        """``+A −R, unchanged: N lines``."""
        return f"+{self.added} −{self.removed}, unchanged: {self.unchanged} lines"


def plan_diff(old: str, new: str) -> PlanDiff:
    """The line diff from ``old`` to ``new``."""
    before, after = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    lines: list[str] = []
    added = removed = unchanged = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            unchanged += i2 - i1
            lines.append(f"… {i2 - i1} unchanged line{'s' if i2 - i1 != 1 else ''}")
            continue
        lines.extend(f"- {line}" for line in before[i1:i2])
        lines.extend(f"+ {line}" for line in after[j1:j2])
        removed += i2 - i1
        added += j2 - j1
    return PlanDiff(tuple(lines), added, removed, unchanged)


def revision_blocks(revision: Revision, plan: str) -> tuple[list[Block], list[list[Block]]]:
    """What a revised plan shows above itself (the link to the review it revises, that
    review's feedback, what changed), and the thread replies for a long diff."""
    earlier = (
        f"<{revision.previous_link}|the previous review>"
        if revision.previous_link
        else "the previous review"
    )
    blocks = [context(f":repeat: Revises {earlier}.")]
    if revision.feedback and revision.feedback.strip():
        blocks.append(feedback_block(revision.feedback, MAX_SECTION_TEXT, "**Feedback**"))
    diff = plan_diff(revision.previous_plan, plan)
    title = f"*What changed* ({escape(diff.summary)})"
    if not diff.lines:
        return [*blocks, section(f"{title}: nothing.")], []
    if sum(len(line) + 1 for line in diff.lines) <= DIFF_IN_MESSAGE:
        return [*blocks, section(title), _diff_block(diff.lines)], []
    parts: list[list[str]] = [[]]
    size = 0
    for line in diff.lines:
        line = shorten(line, MAX_SECTION_TEXT - 100)
        if parts[-1] and size + len(line) + 1 > MAX_SECTION_TEXT - 100:
            parts.append([])
            size = 0
        parts[-1].append(line)
        size += len(line) + 1
    continued = context("What changed in the plan, continued")
    thread = [[continued, _diff_block(part)] for part in parts]
    return [*blocks, section(f"{title}: in the thread below.")], thread


def _diff_block(lines: Sequence[str]) -> Block:
    """The changed lines as list items after ``+`` or ``−`` (a removed line struck through)."""
    elements: list[Block] = []
    items: list[list[Piece]] = []
    for line in lines:
        if line.startswith(("+ ", "- ")):
            added = line[0] == "+"
            items.append([bold("+ " if added else "− "), words(line[2:] or " ", strike=not added)])
            continue
        if items:
            elements.append(rich_list(items))
            items = []
        elements.append(rich_line([italic(line)]))
    if items:
        elements.append(rich_list(items))
    return {"type": "rich_text", "elements": elements}
