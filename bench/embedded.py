"""A callback asked in process: click -> webhook received, for a provider embedded in a bolt
app (``embed_webhooks``), over ``--n`` questions asked and answered one after another.

``python -m bench.embedded [--n 100]`` (the Slack stand-in and a receiver on loopback)."""

from __future__ import annotations

import argparse
import asyncio
import time

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    stats = summarize(asyncio.run(run(parser.parse_args().n)))
    print_table(
        "click -> webhook received, provider embedded in a bolt app",
        ["n", "p50 ms", "p99 ms", "max ms"],
        [[str(stats.n), fmt_ms(stats.p50), fmt_ms(stats.p99), fmt_ms(stats.max)]],
    )
    print(machine_line("memory"))


if __name__ == "__main__":
    main()
