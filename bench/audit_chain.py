"""The Redis audit trail's hash chain: what chaining costs an append, alone and with writers
racing, and how long ``--verify`` takes; against an unchained append (two ``XADD`` in one
script, as before the chain) measured in the same run.

``python -m bench.audit_chain [--n 1000] [--redis URL]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from typing import Any

import redis.asyncio as aioredis

from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.stores.redis import RedisPendingStore
from bench.common import fmt_ms, machine_line, print_table, summarize

_UNCHAINED = """
redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
redis.call('XADD', KEYS[2], '*', 'e', ARGV[1])
return 1
"""


def _event(n: int) -> AuditEvent:
    return AuditEvent(
        request_id=f"q{n % 50:09d}",
        at=time.time(),
        kind="changed",
        version=n,
        by="U0ALICE",
        shown_sha256="0" * 64,
        detail={"answer": ["Deploy"]},
    )


async def _timed(n: int, append: Any) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        await append(_event(i))
        samples.append(time.perf_counter() - start)
    return samples


async def main(n: int, url: str) -> None:
    prefix = f"bench-{uuid.uuid4().hex}"
    client = aioredis.from_url(url, decode_responses=True)
    unchained = client.register_script(_UNCHAINED)
    stores = [RedisPendingStore(url, prefix=prefix, process_id=f"p{i}") for i in range(2)]
    for store in stores:
        await store.start()
    calls = 0
    for store in stores:  # count the script's runs: one per event, one more per lost race
        script = store._trail._append_script  # type: ignore[attr-defined]

        async def counted(*args: Any, _script: Any = script, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            return await _script(*args, **kwargs)

        store._trail._append_script = counted  # type: ignore[attr-defined]
    try:

        async def plain(event: AuditEvent) -> None:
            keys = [f"{prefix}:plain", f"{prefix}:plain:{event.request_id}"]
            await unchained(keys=keys, args=[event.dump()])

        base = summarize(await _timed(n, plain))
        alone = summarize(await _timed(n, stores[0].append_event))
        calls = 0
        start = time.perf_counter()
        racing = await asyncio.gather(*(_timed(n, stores[i % 2].append_event) for i in range(4)))
        wall = time.perf_counter() - start
        raced = summarize([s for samples in racing for s in samples])
        start = time.perf_counter()
        problems = await stores[0].check_chain(0)
        verify = time.perf_counter() - start
    finally:
        for store in stores:
            await store.close()
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    rows = [
        [name, str(s.n), fmt_ms(s.p50), fmt_ms(s.p99), fmt_ms(s.mean), fmt_ms(s.max)]
        for name, s in [
            ("unchained append (baseline)", base),
            ("chained append, one writer", alone),
            ("chained append, 4 writers on 2 stores", raced),
        ]
    ]
    print_table("audit append (ms)", ["", "n", "p50", "p99", "mean", "max"], rows)
    events = 5 * n
    print(
        f"\n4 writers: {4 * n / wall:.0f} events/s, {calls - 4 * n} lost races"
        f" ({(calls - 4 * n) / (4 * n):.1%} of appends computed again)"
    )
    breaks = len(problems.breaks) if problems else 0
    print(f"verify of {events} events: {verify * 1000:.0f} ms, {breaks} breaks")
    print(machine_line("redis"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    options = parser.parse_args()
    asyncio.run(main(options.n, options.redis))
