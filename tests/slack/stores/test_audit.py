"""The audit trail: events derived from writes, kept by every store, hashed to what was shown."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable

import pytest

from adapters.slack.asks.destination import AskDefaults, Destination
from adapters.slack.model.audit_trail import (
    AuditEvent,
    approval_digest,
    asked_event,
    digest_of,
    event_for,
    permalink,
    shown_digest,
)
from adapters.slack.model.record import ApprovalView, Draft, PendingRecord
from adapters.slack.stores import PendingStore, mutate
from bot.questions import AskOptions
from bot.questions.models import (
    AskUserQuestionAnswer,
    AskUserQuestionItem,
    AskUserQuestionRequest,
)
from tests.slack.stores.test_store_contract import make_record

PLAN = "1. Drain node a\n2. Upgrade\n3. Undrain"


def plan_review(plan: str = PLAN) -> list[AskUserQuestionItem]:
    """A plan review as the seam sends it."""
    return [
        AskUserQuestionItem.model_validate(
            {
                "id": "plan",
                "question": "Approve the upgrade plan?",
                "detail": plan,
                "intent": {"kind": "plan-review", "approve": "Approve"},
                "options": [{"label": "Approve"}, {"label": "Decline"}],
            }
        )
    ]


def test_the_digest_is_sha256_of_the_canonical_wire_json() -> None:
    questions = plan_review()
    wire = [q.model_dump(by_alias=True, exclude_none=True, mode="json") for q in questions]
    canonical = json.dumps(wire, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert shown_digest(questions) == hashlib.sha256(canonical.encode()).hexdigest()
    assert shown_digest(plan_review(PLAN + " ")) != shown_digest(questions)
    assert shown_digest(plan_review("1. Drain node b\n2. Upgrade\n3. Undrain")) != shown_digest(
        questions
    )


def test_events_follow_the_writes() -> None:
    record = make_record("proc").model_copy(update={"questions": plan_review()})
    draft = record.next(drafts=[Draft(selected=[0])])
    changed = event_for(record, draft, by="U1", by_name="alice")
    assert changed is not None and changed.kind == "changed"
    assert (changed.by, changed.by_name, changed.version) == ("U1", "alice", 1)
    assert changed.detail == {"drafts": [{"selected": [0]}]}
    assert event_for(draft, draft.next(message_ts="1.2")) is None  # bookkeeping only
    answer = AskUserQuestionAnswer.model_validate(
        {"answers": [{"id": "plan", "selected": ["Approve"]}]}
    )
    done = draft.next(
        state="answered",
        answer=answer,
        answered_by="U2",
        answered_by_name="bob",
        finished_at=time.time(),
    )
    answered = event_for(draft, done)
    assert answered is not None and answered.kind == "answered"
    assert (answered.by, answered.by_name) == ("U2", "bob")
    assert answered.detail == {"answer": answer.to_wire()}
    assert answered.shown_sha256 == shown_digest(plan_review())
    failed = draft.next(state="failed", error_code="ASK_TIMEOUT", note="No answer in 5 s.")
    event = event_for(draft, failed, by="proc-1")
    assert event is not None and event.kind == "failed" and event.by == "proc-1"
    assert event.detail == {"code": "ASK_TIMEOUT", "reason": "No answer in 5 s."}
    reopened = event_for(failed, failed.next(state="pending", note="asked again"))
    assert reopened is not None and reopened.kind == "reopened"
    assert reopened.detail == {"reason": "asked again"}


def test_a_record_keeps_the_digest_it_was_made_with_and_older_records_get_it_computed() -> None:
    request = AskUserQuestionRequest.model_validate(
        {"questions": [q.model_dump(by_alias=True, exclude_none=True) for q in plan_review()]}
    )
    made = AskDefaults(Destination("C1")).question_record(request, AskOptions(), now=1.0)
    assert made.shown_sha256 == shown_digest(plan_review())
    assert PendingRecord.load(made.dump()).shown_sha256 == made.shown_sha256  # stored
    answered = made.next(state="answered", answered_by="U1", finished_at=2.0)
    event = event_for(made, answered)
    assert event is not None and event.shown_sha256 == shown_digest(plan_review())
    # A record stored before the digest was kept: computed from its questions.
    older = PendingRecord.load(made.model_copy(update={"shown_sha256": None}).dump())
    assert older.shown_sha256 is None
    assert asked_event(older, by="api", link=None).shown_sha256 == shown_digest(plan_review())
    # Questions replaced: the digest kept was of the old ones, so it is dropped.
    changed = made.next(questions=plan_review(PLAN + " (revised)"))
    assert changed.shown_sha256 is None
    assert asked_event(changed, by="api", link=None).shown_sha256 == shown_digest(
        plan_review(PLAN + " (revised)")
    )


def approval(command: str) -> ApprovalView:
    return ApprovalView(tool_name="bash", headline="Run a migration", command=command)


def test_an_approval_is_bound_to_the_command_shown() -> None:
    view = approval("psql -f migrate.sql")
    defaults = AskDefaults(Destination("C1"))
    made = defaults.approval_record(view, AskOptions(), None, None)
    shown = {"tool_name": "bash", "headline": "Run a migration", "command": "psql -f migrate.sql"}
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"))
    assert made.shown_sha256 == hashlib.sha256(canonical.encode()).hexdigest()
    assert made.shown_sha256 == approval_digest(view) != shown_digest([])
    assert approval_digest(approval("psql -f rollback.sql")) != made.shown_sha256
    assert approval_digest(view.model_copy(update={"path": "/srv/x"})) != made.shown_sha256
    allowed = made.next(
        state="answered",
        approval=view.model_copy(update={"outcome": "allowed-once"}),
        answered_by="U1",
        finished_at=2.0,
    )
    event = event_for(made, allowed)
    assert event is not None and event.shown_sha256 == made.shown_sha256  # not the decision
    # A record stored before approvals were hashed (the digest of no questions) gets it too.
    older = made.model_copy(update={"shown_sha256": shown_digest([])})
    assert digest_of(older) == made.shown_sha256
    assert asked_event(older, by="api", link=None).shown_sha256 == made.shown_sha256


def test_asked_event_names_where_and_links_the_message() -> None:
    record = make_record("proc").model_copy(
        update={"label": "deploy-bot", "message_channel": "C1", "message_ts": "1700000000.000100"}
    )
    link = permalink("https://acme.slack.com/", "C1", "1700000000.000100")
    assert link == "https://acme.slack.com/archives/C1/p1700000000000100"
    event = asked_event(record, by="api", link=link)
    assert event.kind == "asked" and event.by == "api"
    assert event.detail == {
        "channel": "C1",
        "messageTs": "1700000000.000100",
        "permalink": link,
        "label": "deploy-bot",
        "owner": "proc",
    }
    wire = json.loads(event.dump())
    assert wire["requestId"] == record.id and wire["shownSha256"] == shown_digest(record.questions)
    assert AuditEvent.load(event.dump()) == event


async def test_every_store_keeps_the_trail_in_order_and_exports_by_time(
    store: PendingStore,
) -> None:
    async with asyncio.timeout(10):
        start = time.time()
        record = make_record(store.process_id)
        other = make_record(store.process_id)
        for one in (record, other):
            await store.create(one)
            await store.append_event(asked_event(one, by="api", link=None))
        await mutate(store, record.id, lambda r: r.next(drafts=[Draft(custom="hm")]), by="U1")
        await mutate(
            store,
            record.id,
            lambda r: r.next(state="cancelled", answered_by="U1", finished_at=time.time()),
            by="U1",
            by_name="alice",
        )
        trail = await store.events(record.id)
        assert [e.kind for e in trail] == ["asked", "changed", "cancelled"]
        assert [e.version for e in trail] == [0, 1, 2]
        assert trail[2].by == "U1" and trail[2].by_name == "alice"
        assert [e.kind for e in await store.events(other.id)] == ["asked"]
        assert await store.events("r-nothing") == []
        exported = [e async for e in store.audit(start - 1)]
        assert [(e.request_id, e.kind) for e in exported] == [
            (record.id, "asked"),
            (other.id, "asked"),
            (record.id, "changed"),
            (record.id, "cancelled"),
        ]
        assert [e async for e in store.audit(time.time() + 60)] == []
        assert [e async for e in store.audit(start - 1, start - 0.5)] == []


@pytest.fixture(params=["sqlite", "redis"])
def durable_factory(request: pytest.FixtureRequest) -> Callable[..., Awaitable[PendingStore]]:
    """Makes stores on one SQLite file or one Redis prefix (a new one: a restart)."""
    factory: Callable[..., Awaitable[PendingStore]] = request.getfixturevalue(
        f"{request.param}_store_factory"
    )
    return factory


async def test_the_trail_survives_a_new_store_on_the_same_data(
    durable_factory: Callable[..., Awaitable[PendingStore]],
) -> None:
    async with asyncio.timeout(10):
        factory = durable_factory
        first = await factory()
        record = make_record(first.process_id)
        await first.create(record)
        await first.append_event(asked_event(record, by="api", link=None))
        await mutate(first, record.id, lambda r: r.next(drafts=[Draft(selected=[1])]), by="U9")
        await first.close()
        second = await factory()
        assert [e.kind for e in await second.events(record.id)] == ["asked", "changed"]
        got = await second.get(record.id)
        assert got is not None and got.version == 1 and got.is_open


def test_a_click_that_saves_a_persons_draft_is_a_changed_event() -> None:
    """A real tick in a form (parsed from Slack's payload, decided by ``transitions``) saves
    that person's own drafts (``user_drafts``); the trail records it as ``changed``."""
    from adapters.slack.clicks.transitions import Save, decide
    from adapters.slack.render.blocks.message import render_open
    from tests.slack.clicks.test_slack_transitions import FORM, interaction_of
    from tests.slack_payloads import ALICE, choose

    payload = choose(render_open(FORM).blocks, question=1, labels=["Egg", "Cheese"])
    decision = decide(FORM, interaction_of(payload), time.time())
    assert isinstance(decision, Save)
    event = event_for(FORM, decision.record, by=ALICE, by_name="alice")
    assert event is not None and event.kind == "changed"
    assert event.by == ALICE and event.version == decision.record.version
    assert event.detail == {"drafts": [{"selected": []}, {"selected": [2, 0]}, {"selected": []}]}
    # a second person's tick names only what that person changed
    later = decision.record.next(
        user_drafts={**decision.record.user_drafts, "U0BOB": [Draft(selected=[1])]}
    )
    second = event_for(decision.record, later, by="U0BOB")
    assert second is not None and second.detail == {"drafts": [{"selected": [1]}]}
    assert event_for(later, later.next(message_ts="1.2")) is None  # still bookkeeping only
