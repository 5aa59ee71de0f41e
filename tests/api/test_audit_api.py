"""The audit trail end to end: a plan approved in Slack, its trail over the API and the CLI."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack import AuditEvent
from bot.api.audit import parse_range, parse_time
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError
from bot.questions.models import AskUserQuestionItem
from tests.api.test_gateway import Bed, running
from tests.bot_process import run_bot_command
from tests.slack_harness import until

PLAN = "1. Drain node a\n2. Upgrade to 2.3.1\n3. Undrain node a"


def plan_review(plan: str) -> dict[str, Any]:
    """A plan review as an agent posts it."""
    return {
        "questions": [
            {
                "id": "plan",
                "question": "Approve the upgrade plan?",
                "detail": plan,
                "intent": {"kind": "plan-review", "approve": "Approve"},
                "options": [{"label": "Approve"}, {"label": "Decline"}],
            }
        ],
        "label": "deploy-agent",
    }


def expected_digest(body: dict[str, Any]) -> str:
    """SHA-256 of the questions' canonical wire JSON, computed as an agent would."""
    items = [AskUserQuestionItem.model_validate(q) for q in body["questions"]]
    wire = [i.model_dump(by_alias=True, exclude_none=True, mode="json") for i in items]
    canonical = json.dumps(wire, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


async def _approve(bed: Bed, body: dict[str, Any]) -> dict[str, Any]:
    status, posted = await bed.ask(body)
    assert status == 201
    await bed.click(posted, "Approve")
    for _ in range(200):
        _, polled = await bed.get(posted["id"], wait=5)
        if polled["state"] != "pending":  # the long-poll that sees the ending sees its event
            assert [e["kind"] for e in polled["events"]] == ["asked", "answered"]
            return polled
    raise AssertionError(f"not approved: {polled}")


@pytest.mark.slow
async def test_an_approved_plan_is_bound_to_the_hash_of_the_plan_shown() -> None:
    async with running() as bed:
        approved = await _approve(bed, plan_review(PLAN))
        assert approved["state"] == "answered"
        asked, answered = approved["events"]
        assert (asked["kind"], answered["kind"]) == ("asked", "answered")
        assert asked["by"] == "api:default" and asked["detail"]["label"] == "deploy-agent"
        assert asked["detail"]["channel"] == bed.channel
        assert asked["detail"]["messageTs"] == approved["message"]["ts"]
        link = asked["detail"]["permalink"]
        assert link.startswith("https://") and "/archives/" in link
        assert link.endswith("/p" + approved["message"]["ts"].replace(".", ""))
        assert (answered["by"], answered["byName"]) == (bed.alice, "alice")
        assert answered["detail"]["answer"] == approved["answer"]
        digest = expected_digest(plan_review(PLAN))
        assert asked["shownSha256"] == answered["shownSha256"] == digest

        changed = await _approve(bed, plan_review(PLAN.replace("2.3.1", "2.3.2")))
        assert changed["events"][1]["shownSha256"] != digest
        assert changed["events"][1]["shownSha256"] == expected_digest(
            plan_review(PLAN.replace("2.3.1", "2.3.2"))
        )


@pytest.mark.slow
async def test_the_audit_route_exports_json_lines_for_a_time_range() -> None:
    async with running() as bed:
        began = time.time()
        approved = await _approve(bed, plan_review(PLAN))
        async with bed.http.get("/v1/audit", params={"since": f"{began - 1}"}) as response:
            assert response.status == 200
            assert response.content_type == "application/x-ndjson"
            lines = (await response.text()).splitlines()
        events = [json.loads(line) for line in lines]
        assert [(e["requestId"], e["kind"]) for e in events] == [
            (approved["id"], "asked"),
            (approved["id"], "answered"),
        ]
        async with bed.http.get("/v1/audit", params={"since": "1h", "until": f"{began - 1}"}) as r:
            assert (r.status, await r.text()) == (200, "")
        for bad in ({}, {"since": "yesterday"}):
            async with bed.http.get("/v1/audit", params=bad) as response:
                problem = await response.json()
                assert (response.status, problem["code"]) == (400, "BAD_TIME")


@pytest.mark.slow
async def test_python_m_bot_audit_exports_the_trail_of_the_store_file(tmp_path: Path) -> None:
    store = tmp_path / "questions.db"
    async with running(store_path=str(store)) as bed:
        approved = await _approve(bed, plan_review(PLAN))
        await until(lambda: bed.runtime.provider.pending_count == 0)
    env = {"STORE": "sqlite", "STORE_PATH": str(store)}
    code, out, err = await run_bot_command(["audit", "--since", "1h"], env, cwd=tmp_path)
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["requestId"], e["kind"]) for e in events] == [
        (approved["id"], "asked"),
        (approved["id"], "answered"),
    ]
    code, _, err = await run_bot_command(["audit", "--since", "soon"], env, cwd=tmp_path)
    assert code == 2 and "is not a time" in err
    code, _, err = await run_bot_command(["audit", "--since", "1h"], {}, cwd=tmp_path)
    assert code == 2 and "memory store keeps no trail" in err


# -- who asked, and who may read the trail ------------------------------------------------------

ALPHA = f"alpha-{secrets.token_hex(16)}"
BETA = f"beta-{secrets.token_hex(16)}"
TWO_TOKENS = {"bot_api_token": None, "bot_api_tokens": (("alpha", ALPHA), ("beta", BETA))}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _trail(bed: Bed, token: str, since: float) -> list[dict[str, Any]]:
    """``GET /v1/audit`` with ``token``: the events it is shown."""
    params = {"since": f"{since}"}
    async with bed.http.get("/v1/audit", params=params, headers=_auth(token)) as response:
        assert response.status == 200
        return [json.loads(line) for line in (await response.text()).splitlines()]


@pytest.mark.slow
async def test_the_trail_names_the_token_that_asked_and_aborted_never_its_secret() -> None:
    async with running(**TWO_TOKENS) as bed:
        async with bed.http.post(
            "/v1/questions", json=plan_review(PLAN), headers=_auth(ALPHA)
        ) as response:
            assert response.status == 201
            mine = await response.json()
        async with bed.http.delete(f"/v1/questions/{mine['id']}", headers=_auth(BETA)) as r:
            assert r.status == 404
        async with bed.http.delete(f"/v1/questions/{mine['id']}", headers=_auth(ALPHA)) as r:
            assert r.status == 200
        async with bed.http.get(f"/v1/questions/{mine['id']}", headers=_auth(ALPHA)) as r:
            events = (await r.json())["events"]
        assert [(e["kind"], e["by"]) for e in events] == [
            ("asked", "api:alpha"),
            ("aborted", "api:alpha"),
        ]
        assert events[0]["detail"]["label"] == "deploy-agent"
        assert ALPHA not in json.dumps(events) and BETA not in json.dumps(events)


@pytest.mark.slow
async def test_an_open_api_names_its_asker_api() -> None:
    async with running(bot_api_token=None) as bed:
        status, posted = await bed.ask(plan_review(PLAN))
        assert status == 201
        async with bed.http.delete(f"/v1/questions/{posted['id']}") as response:
            assert response.status == 200
        _, read = await bed.get(posted["id"])
        assert [(e["kind"], e["by"]) for e in read["events"]] == [
            ("asked", "api"),
            ("aborted", "api"),
        ]


@pytest.mark.slow
async def test_with_several_tokens_each_sees_only_the_trail_of_its_own_questions() -> None:
    async with running(**TWO_TOKENS) as bed:
        began = time.time() - 1
        asked: dict[str, list[str]] = {ALPHA: [], BETA: []}
        for token in (ALPHA, BETA, ALPHA):
            async with bed.http.post(
                "/v1/questions", json=plan_review(PLAN), headers=_auth(token)
            ) as response:
                assert response.status == 201
                asked[token].append((await response.json())["id"])
        for token, name in ((ALPHA, "api:alpha"), (BETA, "api:beta")):
            seen = await _trail(bed, token, began)
            assert [(e["requestId"], e["kind"], e["by"]) for e in seen] == [
                (request_id, "asked", name) for request_id in asked[token]
            ]
            other = asked[BETA if token == ALPHA else ALPHA][0]
            async with bed.http.get(f"/v1/questions/{other}", headers=_auth(token)) as r:
                assert r.status == 404
        # The operator's export (python -m bot audit) reads the store: every question.
        everything = [e async for e in bed.runtime.provider.audit(began)]
        assert {e.request_id for e in everything} == {*asked[ALPHA], *asked[BETA]}


# -- what an export refuses, and how one that fails midway ends ----------------------------------


@pytest.mark.parametrize(
    "since, until",
    [
        ("nan", None),
        ("inf", None),
        ("-inf", None),
        ("1e999", None),
        ("-5", None),
        ("99999999999999999999d", None),
        ("1h", "nan"),
        ("1h", "inf"),
        ("2026-12-02", "2026-12-01"),  # until before since
        ("1h", "2h"),
    ],
)
def test_a_range_that_is_no_time_or_runs_backwards_is_refused(
    since: str, until: str | None
) -> None:
    with pytest.raises(ValueError, match=r"is out of range|is before since"):
        parse_range(since, until)


def test_iso_8601_comes_before_a_number_and_an_empty_range_is_allowed() -> None:
    assert parse_time("20261201") == datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    assert parse_time("1764806400") == 1764806400.0
    assert parse_time("9999-12-31T23:59:58Z") > 0
    midnight = datetime(2024, 6, 1, tzinfo=UTC).timestamp()  # a date with Z: midnight UTC
    assert parse_time("2024-06-01Z") == parse_time("20240601Z") == midnight
    assert parse_range("2026-12-01", "2026-12-01") == (parse_time("2026-12-01"),) * 2
    now = 1_800_000_000.0
    assert parse_range("2h", "1h", now) == (now - 7200, now - 3600)


@pytest.mark.slow
async def test_the_route_and_the_command_refuse_what_is_no_time(tmp_path: Path) -> None:
    async with running() as bed:
        for bad in (
            {"since": "nan"},
            {"since": "1h", "until": "inf"},
            {"since": "1h", "until": "2h"},
        ):
            async with bed.http.get("/v1/audit", params=bad) as response:
                problem = await response.json()
                assert (response.status, problem["code"]) == (400, "BAD_TIME"), bad
    env = {"STORE": "sqlite", "STORE_PATH": str(tmp_path / "q.db")}
    for argv in (["--since", "nan"], ["--since", "1h", "--until", "2h"]):
        code, _, err = await run_bot_command(["audit", *argv], env, cwd=tmp_path)
        assert code == 2 and ("out of range" in err or "is before since" in err), err


@pytest.mark.slow
async def test_an_export_the_store_fails_midway_is_cut_off_not_ended_cleanly() -> None:
    async with running() as bed:
        first = await _approve(bed, plan_review(PLAN))
        store = bed.runtime.provider.store
        real = store.audit

        async def failing(since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
            async for event in real(since, until):
                yield event
            raise UserQuestionError(STORE_UNAVAILABLE, "the store went away")

        store.audit = failing  # type: ignore[method-assign]
        try:
            lines: list[bytes] = []
            async with bed.http.get("/v1/audit", params={"since": "1h"}) as response:
                assert response.status == 200  # sent with the first line
                with pytest.raises(aiohttp.ClientPayloadError):
                    while line := await response.content.readline():
                        lines.append(line)
            # every line that arrived is a whole event; no status line was spliced in
            events = [json.loads(line) for line in lines]
            assert [(e["requestId"], e["kind"]) for e in events] == [
                (first["id"], "asked"),
                (first["id"], "answered"),
            ]
        finally:
            del store.audit
        async with bed.http.get("/v1/audit", params={"since": "1h"}) as response:
            assert response.status == 200 and len((await response.text()).splitlines()) == 2
