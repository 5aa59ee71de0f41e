"""The HTTP API's caps at their exact values and one past them: open questions per process
and per token, and ``Idempotency-Key``'s 255 printable characters (issue 41)."""

from __future__ import annotations

import pytest

from tests.api.test_gateway import DEPLOY, running

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("cap", ["max_open_questions", "max_open_per_token"])
async def test_the_last_open_question_is_taken_and_one_more_refused_until_one_ends(
    cap: str,
) -> None:
    async with running(**{cap: 2}) as bed:
        first = [await bed.ask({**DEPLOY, "questions": DEPLOY["questions"]}) for _ in range(2)]
        assert [status for status, _ in first] == [201, 201]
        async with bed.http.post("/v1/questions", json=DEPLOY) as response:
            assert response.status == 429
            assert response.headers["Retry-After"] == "5"
        async with bed.http.delete(f"/v1/questions/{first[0][1]['id']}") as response:
            assert response.status < 300
        status, _ = await bed.ask()
        assert status == 201


async def test_an_idempotency_key_of_255_printable_characters_is_taken_and_256_refused() -> None:
    async with running() as bed:
        for key, expected in (
            ("k" * 255, 201),
            ("~" + " " * 254, 201),
            ("k" * 256, 400),
            ("", 400),
            ("caf\u00e9", 400),
            ("a\tb", 400),
        ):
            async with bed.http.post(
                "/v1/questions", json=DEPLOY, headers={"Idempotency-Key": key}
            ) as response:
                assert response.status == expected, (key, await response.text())
