"""A callback asked in process: click -> webhook received, for a provider embedded in a bolt
app (``embed_webhooks``), over ``--n`` questions asked and answered one after another.

``python -m bench.embedded [--n 100]`` (the Slack stand-in and a receiver on loopback);
``--pending 1000``: what a callback costs a question left pending (tasks, traced KiB), as the
difference between that many pending with a callback and as many without."""

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


async def pending(n: int, callback: bool) -> tuple[int, float]:
    """Tasks and traced KiB (the bot's: not the Slack stand-in's) added by ``n`` questions left
    pending (with a ``callback``)."""
    async with receiving() as hook, SlackHarness() as h:
        webhooks = embed_webhooks(
            h.provider, secret="bench-secret-0123456789", hosts=["127.0.0.1"], allow_private=True
        )
        try:
            await asyncio.sleep(0.5)
            gc.collect()
            tasks, before = len(asyncio.all_tasks()), tracemalloc.take_snapshot()
            asks = []
            for i in range(n):
                options = AskOptions(callback=hook.url if callback else None, key=f"p-{i}")
                asks.append(h.ask(QUESTION, options=options))
            await until(lambda: len(h.top_messages()) >= n, within=900, what="every post")
            await asyncio.sleep(1.0)
            gc.collect()
            tasks, after = len(asyncio.all_tasks()) - tasks, tracemalloc.take_snapshot()
            bot = [tracemalloc.Filter(False, "*/sandbox/*", all_frames=True)]  # not Slack's
            grown = after.filter_traces(bot).compare_to(before.filter_traces(bot), "filename")
            for ask in asks:
                ask.cancel()
            await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await webhooks.stop()
    return tasks, sum(stat.size_diff for stat in grown) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--pending", type=int, default=0)
    args = parser.parse_args()
    if args.pending:
        tracemalloc.start(30)
        (tasks, kib), (bare_tasks, bare_kib) = (
            asyncio.run(pending(args.pending, callback)) for callback in (True, False)
        )
        n = args.pending
        print_table(
            f"what a callback costs a pending question ({n} pending, in process)",
            ["tasks per question", "traced KiB per question"],
            [[f"{(tasks - bare_tasks) / n:.2f}", f"{(kib - bare_kib) / n:.2f}"]],
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
