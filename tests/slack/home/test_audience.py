"""audience.py: who may answer each open question, each person's oldest ones, and the batches
a Home round goes through them in."""

from __future__ import annotations

from typing import Any

from adapters.slack.home.tab import MAX_HOME_ENTRIES, ListingRound
from adapters.slack.model.audience import BATCH, Audience, Audiences, batches
from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.stores import MemoryPendingStore
from bot.questions.models import AskUserQuestionItem
from tests.loop_turns import OtherTask


def record(rid: str, **fields: Any) -> PendingRecord:
    fields.setdefault("questions", [AskUserQuestionItem(id="q", question="Deploy?")])
    return PendingRecord(id=rid, channel="C0QUESTION", **fields)


def test_an_open_question_has_an_audience_a_closed_one_or_an_approval_none() -> None:
    # naming nobody: whoever sees its conversation (resolved each round)
    assert Audience.of(record("r1", created_at=5.0)) == Audience("r1", 5.0, channel="C0QUESTION")
    named = record("r2", created_at=6.0, allowed_users=["U1"], allowed_usergroups=["S1", "S2"])
    # naming people: those of them who see its conversation (issue 38: a private
    # channel's question is on no allowed non-member's Home tab)
    audience = Audience.of(named)
    assert audience == Audience("r2", 6.0, ("U1",), ("S1", "S2"), "C0QUESTION")
    assert audience.resolved("*") == Audience("r2", 6.0, ("U1",), ("S1", "S2"))
    assert audience.resolved(None) is None
    assert Audience.of(record("r3", state="answered")) is None
    approval = record("r4", questions=[], approval=ApprovalView(tool_name="bash", headline="x"))
    assert Audience.of(approval) is None


def test_empty_lists_mean_anyone_as_they_do_for_a_click() -> None:
    empty = record("r1", allowed_users=[], allowed_usergroups=[])
    audience = Audience.of(empty)
    assert audience is not None and audience.channel == "C0QUESTION"
    audience = audience.resolved("*")  # a public channel
    assert audience is not None and audience.anyone
    (ids, total) = Audiences([audience]).waiting_for("U9", (), 20)
    assert (list(ids), total) == (["r1"], 1)


def test_a_list_holds_what_its_person_may_answer_oldest_first() -> None:
    audiences = Audiences(
        [
            Audience("anyone-late", 40.0),
            Audience("alice-only", 10.0, users=("UALICE",)),
            Audience("ops", 30.0, usergroups=("SOPS",)),
            Audience("dev", 20.0, usergroups=("SDEV",)),
            Audience("anyone-early", 5.0),
            # named twice for alice (as a user and through a group): listed once
            Audience("alice-and-ops", 25.0, users=("UALICE",), usergroups=("SOPS",)),
        ]
    )
    assert audiences.usergroups == {"SOPS", "SDEV"}
    ids, total = audiences.waiting_for("UALICE", {"SOPS"}, 20)
    assert list(ids) == ["anyone-early", "alice-only", "alice-and-ops", "ops", "anyone-late"]
    assert total == 5
    # a second group adds its questions in their place
    ids, total = audiences.waiting_for("UALICE", {"SOPS", "SDEV"}, 20)
    assert list(ids) == [
        "anyone-early",
        "alice-only",
        "dev",
        "alice-and-ops",
        "ops",
        "anyone-late",
    ]
    assert total == 6
    ids, total = audiences.waiting_for("UBOB", (), 20)
    assert (list(ids), total) == (["anyone-early", "anyone-late"], 2)
    ids, total = audiences.waiting_for("UBOB", {"SDEV", "SUNKNOWN"}, 20)
    assert (list(ids), total) == (["anyone-early", "dev", "anyone-late"], 3)


def test_the_limit_takes_the_oldest_and_the_total_counts_them_all() -> None:
    audiences = Audiences(
        [Audience(f"a{i:03}", float(i)) for i in range(0, 60, 2)]
        + [Audience(f"u{i:03}", float(i), users=("U1",)) for i in range(1, 60, 2)]
    )
    ids, total = audiences.waiting_for("U1", (), 20)
    assert list(ids) == [f"{'u' if i % 2 else 'a'}{i:03}" for i in range(20)]
    assert total == 60
    assert audiences.waiting_for("U1", (), 60)[0] == [
        f"{'u' if i % 2 else 'a'}{i:03}" for i in range(60)
    ]
    ids, total = audiences.waiting_for("U2", (), 30)  # exactly the limit
    assert (len(ids), total) == (30, 30)
    ids, total = audiences.waiting_for("U2", (), 29)
    assert (ids[-1], total) == ("a056", 30)


def test_questions_asked_at_the_same_time_keep_one_order() -> None:
    audiences = Audiences([Audience("b", 1.0), Audience("a", 1.0, users=("U1",))])
    assert list(audiences.waiting_for("U1", (), 20)[0]) == ["a", "b"]


def test_audiences_added_in_batches_list_as_those_given_at_once() -> None:
    """A round adds its audiences a batch at a time, newest and oldest mixed: each person's
    list is the same as from all of them at once, and an audience added after a list was
    asked for takes its place in the next."""
    given = [
        Audience(f"q{i:03}", float((i * 37) % 101), users=("U1",) if i % 3 == 0 else ())
        for i in range(101)
    ]
    at_once = Audiences(given)
    batched = Audiences()
    for start in range(0, len(given), 7):
        batched.extend(given[start : start + 7])
    for user in ("U1", "U2"):
        assert batched.waiting_for(user, (), 30) == at_once.waiting_for(user, (), 30)
    batched.extend([Audience("earliest", -1.0)])
    anyone = sum(1 for a in given if a.anyone)
    assert batched.waiting_for("U2", (), 1) == (["earliest"], anyone + 1)


async def test_batches_hand_out_everything_in_order_with_turns_between() -> None:
    items = list(range(1, 1 + 2 * BATCH + 1))
    seen: list[int] = []
    sizes: list[tuple[int, int]] = []  # (batch size, turns another task had before it)
    async with OtherTask() as other:
        async for batch in batches(items):
            sizes.append((len(batch), other.turns))
            seen.extend(batch)
    assert seen == items
    assert [size for size, _ in sizes] == [BATCH, BATCH, 1]
    assert sizes[0][1] < sizes[1][1] < sizes[2][1]  # another task ran between two batches
    assert [batch async for batch in batches([])] == []


async def test_a_home_round_gives_other_tasks_turns_as_it_reads_many_questions() -> None:
    """Bucketing 10,000 open questions' audiences in one go held the loop for milliseconds:
    a round does it a batch at a time (here with the memory store, whose audiences are
    kept made, so any turn comes from the round)."""
    store = MemoryPendingStore()
    for i in range(2 * BATCH + 1):  # asked in U1's DM: U1's
        asked = record(f"r{i:04}", created_at=float(i)).model_copy(update={"channel": "U1"})
        assert await store.create(asked)
    async with OtherTask() as other:
        before = other.turns
        round_ = await ListingRound.read(store)
        during = other.turns - before
    assert during >= 2
    listed, total = await round_.listed("U1", ())
    assert [r.id for r in listed] == [f"r{i:04}" for i in range(MAX_HOME_ENTRIES)]
    assert total == 2 * BATCH + 1


def test_naming_nobody_follows_who_sees_the_conversation() -> None:
    dm = Audience.of(record("r1").model_copy(update={"channel": "UALICE"}))
    assert dm == Audience("r1", dm.created_at, ("UALICE",)) if dm else False
    audiences = Audiences(
        [
            Audience("p", 1.0, channel="CPUB"),
            Audience("d", 2.0, channel="DALICE"),
            Audience("s", 3.0, channel="CSECRET"),
            Audience("u", 4.0, channel="CUNKNOWN"),
        ]
    )
    assert audiences.channels == {"CPUB", "DALICE", "CSECRET", "CUNKNOWN"}
    assert audiences.waiting_for("UBOB", (), 20) == ([], 0)  # nothing before it resolves
    audiences.resolve({"CPUB": "*", "DALICE": "UALICE", "CSECRET": None})
    assert audiences.waiting_for("UBOB", (), 20) == (["p"], 1)
    assert audiences.waiting_for("UALICE", (), 20) == (["p", "d"], 2)
