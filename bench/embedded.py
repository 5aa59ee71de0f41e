"""A callback asked in process: click -> webhook received, for a provider embedded in a bolt
app (``embed_webhooks``), over ``--n`` questions asked and answered one after another.

``python -m bench.embedded [--n 100]`` (the Slack stand-in and a receiver on loopback);
``--pending 100``: what a callback costs a question left pending (tasks, traced KiB)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc

from adapters.slack import key_request_id
from bench.common import fmt_ms, machine_line, print_table, summarize
from bot.app.embedded import embed_webhooks
from bot.questions import AskOptions
from tests.api.test_webhooks import receiving
from tests.slack_harness import SlackHarness, until

QUESTION = {"questions": [{"id": "q", "question": "Deploy?", "options": [{"label": "Deploy"}]}]}


async def run(n: int) -> list[float]:
    """Seconds from each click to its delivery's arrival."""
    clicked: dict[str, float] = {}
    async with receiving() as hook, SlackHarness() as h:
        url, arrived = hook.url, hook.arrived
        secret = "bench-secret-0123456789"
        webhooks = embed_webhooks(
            h.provider, secret=secret, hosts=["127.0.0.1"], allow_private=True
        )
        try:
            for i in range(n):
                asking = h.ask(QUESTION, options=AskOptions(callback=url, key=f"bench-{i}"))
                message = await h.posted(i + 1)
                clicked[key_request_id(f"bench-{i}")] = time.perf_counter()
                await h.click(message, h.alice, text="Deploy")
                await asking
            await until(lambda: len(arrived) >= n, within=30, what="every delivery")
        finally:
            await webhooks.stop()
    return [arrived[k] - clicked[k] for k in clicked]


async def pending(n: int) -> tuple[float, float]:
    """Tasks and traced KiB per question, ``n`` left pending with a ``callback``: what is
    held once every one is posted, allocated with ``bot/webhooks.py`` on the stack."""
    webhooks_only = [tracemalloc.Filter(True, "*/bot/webhooks.py", all_frames=True)]
    async with receiving() as hook, SlackHarness() as h:
        webhooks = embed_webhooks(
            h.provider, secret="bench-secret-0123456789", hosts=["127.0.0.1"], allow_private=True
        )
        try:
            await asyncio.sleep(0.5)
            gc.collect()
            tasks, before = len(asyncio.all_tasks()), tracemalloc.take_snapshot()
            asks = [
                h.ask(QUESTION, options=AskOptions(callback=hook.url, key=f"p-{i}"))
                for i in range(n)
            ]
            await until(lambda: len(h.top_messages()) >= n, within=600, what="every post")
            await asyncio.sleep(1.5)
            gc.collect()
            tasks = len(asyncio.all_tasks()) - tasks - n  # (each ask() waits in a task)
            after = tracemalloc.take_snapshot().filter_traces(webhooks_only)
            grown = after.compare_to(before.filter_traces(webhooks_only), "filename")
            for ask in asks:
                ask.cancel()
            await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await webhooks.stop()
    return tasks / n, sum(stat.size_diff for stat in grown) / 1024 / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--pending", type=int, default=0)
    args = parser.parse_args()
    if args.pending:
        tracemalloc.start(12)
        tasks, kib = asyncio.run(pending(args.pending))
        print_table(
            f"what a callback costs a pending question ({args.pending} pending, in process)",
            ["tasks per question", "traced KiB per question (the webhooks' path)"],
            [[f"{tasks:.2f}", f"{kib:.2f}"]],
        )
        return
    stats = summarize(asyncio.run(run(args.n)))
    print_table(
        "click -> webhook received, provider embedded in a bolt app",
        ["n", "p50 ms", "p99 ms", "max ms"],
        [[str(stats.n), fmt_ms(stats.p50), fmt_ms(stats.p99), fmt_ms(stats.max)]],
    )
    print(machine_line("memory"))


if __name__ == "__main__":
    main()
