"""Rendering: ``render_open`` for requests of growing size (pure, no I/O).

``python -m bench.render [--seconds 0.3] [--min-reps 30]``

For 1, 5, 10 and 25 questions of 2, 10 and 100 options each (labels of ~20 characters, a
description on every option, a header and a one-line detail on every question), each request
is rendered repeatedly for about ``--seconds`` (at least ``--min-reps`` times) and every call
is timed. ``render_open`` includes its own Block Kit limits check. A request that Slack cannot
show raises ``SLACK_LIMIT`` and is reported as ``limit`` with the reason. Baselines from the
same run: the smallest request (1 question, 2 options) and ``json.dumps`` of each rendered
message (what the Web API client must do with it anyway).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from adapters.slack.model import ids
from adapters.slack.model.record import PendingRecord
from adapters.slack.render.blocks.message import render_open
from adapters.slack.render.layout import layout_of
from bench.common import Stats, fmt_ms, machine_line, print_table, summarize
from bot.questions.errors import UserQuestionError
from bot.questions.models import AskUserQuestionItem

QUESTIONS = (1, 5, 10, 25)
OPTIONS = (2, 10, 100)


def record_of(questions: int, options: int) -> PendingRecord:
    """A pending record of ``questions`` single-select questions of ``options`` options."""
    items = [
        AskUserQuestionItem.model_validate(
            {
                "id": f"q{q}",
                "header": f"Step {q + 1}",
                "question": f"Which target should step {q + 1} use?",
                "detail": "Pick the environment; *staging* is the safe default.",
                "options": [
                    {"label": f"Option {o}: target-{o:03d}", "description": f"Deploy to {o}"}
                    for o in range(options)
                ],
            }
        )
        for q in range(questions)
    ]
    return PendingRecord(id=ids.new_request_id(), owner="bench", questions=items, channel="C1")


def _time(fn: Any, seconds: float, min_reps: int) -> Stats:
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(samples) < min_reps or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return summarize(samples)


def bench(seconds: float, min_reps: int) -> None:
    started = time.perf_counter()
    rows: list[list[str]] = []
    base: Stats | None = None
    limits: list[str] = []
    for q in QUESTIONS:
        for o in OPTIONS:
            record = record_of(q, o)
            layout = layout_of(record.questions)
            try:
                rendered = render_open(record)
            except UserQuestionError as exc:
                if exc.code != "SLACK_LIMIT":
                    raise
                took = _time(lambda r=record: _limit(r), seconds / 3, min_reps)
                limits.append(f"{q} x {o}: {exc.message}")
                rows.append(
                    [f"{q}", f"{o}", layout, "-", "-", fmt_ms(took.p50), fmt_ms(took.p99),
                     fmt_ms(took.mean), "-", "-", "limit"]
                )  # fmt: skip
                continue
            stats = _time(lambda r=record: render_open(r), seconds, min_reps)
            if base is None:
                base = stats
            message = {"text": rendered.text, "blocks": rendered.blocks}
            dumps = _time(lambda m=message: json.dumps(m), seconds / 3, min_reps)
            size = len(json.dumps(message))
            rows.append(
                [
                    f"{q}",
                    f"{o}",
                    layout,
                    str(len(rendered.blocks)),
                    f"{size / 1024:.1f}",
                    fmt_ms(stats.p50),
                    fmt_ms(stats.p99),
                    fmt_ms(stats.mean),
                    f"{stats.p50 / base.p50:.1f}x",
                    fmt_ms(dumps.p50),
                    "ok" + (f" (+{len(rendered.thread)} thread msgs)" if rendered.thread else ""),
                ]
            )
    print_table(
        "Rendering: render_open (includes its Block Kit limits check); times in ms",
        [
            "questions",
            "options",
            "layout",
            "blocks",
            "KiB json",
            "p50",
            "p99",
            "mean",
            "p50 vs 1x2",
            "json.dumps p50",
            "result",
        ],
        rows,
    )
    print()
    for line in limits:
        print(f"limit {line}")
    print(machine_line())
    print(f"(took {time.perf_counter() - started:.0f} s)")


def _limit(record: PendingRecord) -> None:
    try:
        render_open(record)
    except UserQuestionError:
        return
    raise AssertionError("expected SLACK_LIMIT")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time spent per request")
    parser.add_argument("--min-reps", type=int, default=30)
    args = parser.parse_args(argv)
    bench(args.seconds, args.min_reps)


if __name__ == "__main__":
    main()
