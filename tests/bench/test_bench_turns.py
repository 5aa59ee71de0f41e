"""``bench.interaction`` measures the apps in turns: every app's clicks spread over the same
seconds, so the machine's drift over a run falls on the floor and the bot alike.

Each app still gets every click of its sequence once and in order (the bot's clicks answer
its questions one by one), its warm-up first.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from bench.interaction import turns

APPS = ("floor", "handler", "bot")


def test_each_app_gets_its_clicks_once_and_in_order() -> None:
    schedule = turns(APPS, 5, 47, 10, first=1)
    assert len(schedule) == len(APPS) * (5 + 47)
    for app in APPS:
        assert [i for a, i in schedule if a == app] == list(range(5 + 47))


def test_the_warm_ups_come_first_app_after_app() -> None:
    schedule = turns(APPS, 3, 20, 10)
    assert schedule[:9] == [(app, i) for app in APPS for i in range(3)]


def test_the_counted_clicks_take_turns_in_blocks_the_order_rotating() -> None:
    counted = turns(APPS, 2, 20, 10, first=0)[6:]
    blocks = [counted[k : k + 10] for k in range(0, len(counted), 10)]
    assert [block[0][0] for block in blocks] == [
        "floor", "handler", "bot",  # round 0 starts at apps[0]
        "handler", "bot", "floor",  # round 1 one further on
    ]  # fmt: skip
    assert all(len({app for app, _ in block}) == 1 for block in blocks)
    assert [i for _, i in blocks[3]] == list(range(12, 22))


def test_a_run_starts_its_rotation_where_first_says() -> None:
    assert turns(APPS, 0, 4, 2, first=2)[0][0] == "bot"
    assert turns(APPS, 0, 4, 2, first=4)[0][0] == "handler"


def test_every_app_is_measured_in_every_round() -> None:
    """Each round (a block of every app) holds every app once, and no app waits more than two
    rounds for its next block: no app's samples come from a stretch of the run the others
    missed."""
    block = 20
    counted = turns(APPS, 0, 500, block)
    round_ = len(APPS) * block
    for start in range(0, len(counted), round_):
        assert Counter(app for app, _ in counted[start : start + round_]) == dict.fromkeys(
            APPS, block
        )
    for app in APPS:
        where = [k for k, (a, _) in enumerate(counted) if a == app]
        assert max(b - a for a, b in pairwise(where)) < 2 * round_


def test_a_short_last_turn_holds_what_is_left() -> None:
    counted = turns(("a", "b"), 0, 25, 10)  # rounds: a b, b a, a b
    assert counted[-10:] == [("a", i) for i in range(20, 25)] + [("b", i) for i in range(20, 25)]


def test_block_zero_measures_each_app_in_one_go() -> None:
    """The earlier method, kept for comparison: app after app, each its whole sequence."""
    assert turns(("a", "b"), 2, 3, 0) == [
        ("a", 0), ("a", 1), ("b", 0), ("b", 1),
        ("a", 2), ("a", 3), ("a", 4), ("b", 2), ("b", 3), ("b", 4),
    ]  # fmt: skip
