"""A new user's wrong guesses get plain errors: a channel given by ``#name``, a thread or an
escalation id in the wrong form is told what the API wants (not pydantic's "String should
match pattern …"), and one error is "1 error"."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_gateway import running

ONE = [{"id": "q", "question": "Deploy?"}]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "loc", "says"),
    [
        ({"destination": {"channel": "#general"}}, ["destination", "channel"], "not a #name"),
        ({"destination": {"channel": "general"}}, ["destination", "channel"], "C0SANDBOX"),
        (
            {"destination": {"channel": "C0123", "threadTs": "yesterday"}},
            ["destination", "threadTs"],
            "a message ts such as 1712345678.123456",
        ),
        ({"escalateTo": "@carol"}, ["escalateTo"], "a Slack user or user group id"),
    ],
)
async def test_a_wrongly_written_id_is_told_what_the_api_wants(
    extra: dict[str, Any], loc: list[str], says: str
) -> None:
    async with running() as bed:
        status, problem = await bed.ask({"questions": ONE, **extra})
        assert status == 422 and problem["code"] == "INVALID_REQUEST"
        assert problem["message"] == "the request body is not a valid question request (1 error)"
        [error] = problem["errors"]
        assert error["loc"] == loc and error["type"] == "string_pattern_mismatch"
        assert says in error["msg"] and "should match pattern" not in error["msg"]


async def test_two_errors_are_counted_as_two() -> None:
    async with running() as bed:
        body = {"questions": ONE, "destination": {"channel": "#x"}, "escalateTo": "x"}
        status, problem = await bed.ask(body)
        assert status == 422
        assert problem["message"].endswith("(2 errors)")
        assert len(problem["errors"]) == 2


async def test_other_pattern_errors_keep_pydantics_words() -> None:
    """A field a person does not type (``callback``) keeps the validator's own message
    (``link`` has one plain message, the MCP tool's and the API's alike)."""
    async with running() as bed:
        status, problem = await bed.ask({"questions": ONE, "callback": "ftp://x"})
        assert status == 422
        assert problem["errors"][0]["msg"].startswith("String should match pattern")
