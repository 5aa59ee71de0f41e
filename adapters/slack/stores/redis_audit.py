"""The Redis store's audit trail: streams, ``p:audit`` (every event) and ``p:events:{id}``."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, cast

from adapters.slack.model.audit_chain import ChainCheck, ChainRow, chain_hash, verify
from adapters.slack.model.audit_trail import AuditEvent
from adapters.slack.stores.redis_link import RedisLink, px
from adapters.slack.stores.redis_lua import APPEND
from bot.questions.errors import STORE_UNAVAILABLE, UserQuestionError

PAGE: Final = 500
"""Entries read per XRANGE."""
Entries = list[tuple[str, dict[str, str]]]
"""What XRANGE returns: each entry's id and fields."""

CHAIN_TRIES: Final = 16
"""Tries of a chained append, the head moved before each, before ``STORE_UNAVAILABLE``."""


async def chained(
    link: RedisLink, event: AuditEvent | None, run: Callable[[list[str | int]], Awaitable[object]]
) -> object:
    """Run a script with ``event`` and its chain as its last ARGV, again while it answers
    ``[-1, head, question's last chained hash]`` (another writer appended), ``CHAIN_TRIES``
    times at most."""
    if event is None:
        return await run(["", "", "", "", "", ""])
    keys = link.keys
    line, trail = event.dump(), keys.events(event.request_id)

    async def read() -> list[object]:
        async with link.client.pipeline(transaction=False) as pipe:
            pipe.get(keys.audit_head)
            pipe.xrevrange(trail, count=1)  # a guess: the script reads past unchained ones
            head, newest = await pipe.execute()
        hashes = (fields["h"] for _, fields in cast(Entries, newest) if "h" in fields)
        return [-1, head or "", next(hashes, "")]

    async with link.chain_lock:
        found = await link.op("read the audit chain", read)
        for _ in range(CHAIN_TRIES):
            want, qprev = cast(str, found[1]), cast(str, found[2])
            seq, _, prev = want.partition(" ")
            digest = chain_hash(prev, qprev, line)
            answer = await run([line, int(seq or 0) + 1, prev, qprev, digest, want])
            if not isinstance(answer, list):
                return answer
            found = answer
    raise UserQuestionError(
        "the pending store (Redis) could not append an audit event: other processes moved"
        f" the chain's head before each of {CHAIN_TRIES} tries (nothing was written)",
        STORE_UNAVAILABLE,
    )


def _row(entry_id: str, fields: dict[str, str]) -> ChainRow:
    """The chain fields of one audit stream entry (none: appended before the chain)."""
    event = AuditEvent.load(fields["e"])
    seq, prev, qprev = int(fields.get("n", 0)), fields.get("p") or None, fields.get("q") or None
    return ChainRow(seq, event.request_id, event.at, fields["e"], prev, qprev, fields.get("h"))


class RedisAudit:
    """Appends and reads the audit streams of one store."""

    def __init__(self, link: RedisLink, *, retention: float) -> None:
        self._link = link
        self._keys = link.keys
        self._retention = retention
        client = link.client
        self._append_script = client.register_script(APPEND)

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to the audit stream and to its question's own stream (one
        script: the question's stream keeps living as long as its record)."""
        request_id = event.request_id
        keys = [
            self._keys.audit,
            self._keys.events(request_id),
            self._keys.record(request_id),
            self._keys.audit_head,
        ]

        async def run(chain: list[str | int]) -> object:
            args = [px(self._retention), *chain]
            return await self._link.op(
                "append an audit event", lambda: self._append_script(keys=keys, args=args)
            )

        await chained(self._link, event, run)

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        trail = self._keys.events(request_id)
        entries = await self._link.op("read a trail", lambda: self._link.client.xrange(trail))
        return [AuditEvent.load(fields["e"]) for _, fields in cast(Entries, entries)]

    async def _pages(self, low: str, high: str) -> AsyncIterator[Entries]:
        """The audit stream's entries from ``low`` to ``high``, a page at a time."""
        while True:
            read = functools.partial(self._link.client.xrange, self._keys.audit, low, high, PAGE)
            entries = cast(Entries, await self._link.op("read the audit stream", read))
            yield entries
            if len(entries) < PAGE:
                return
            low = f"({entries[-1][0]}"

    async def check_chain(self, kept_since: float) -> ChainCheck | None:
        """The breaks of the hash chain, the audit stream read in pages."""
        rows = [_row(*entry) async for page in self._pages("-", "+") for entry in page]
        client = self._link.client
        head_raw = await self._link.op("read the chain", lambda: client.get(self._keys.audit_head))
        purged = await self._link.op(
            "read the chain", lambda: client.hgetall(self._keys.audit_purged)
        )
        head = None
        if head_raw is not None:
            seq, _, digest = cast(str, head_raw).partition(" ")
            head = (int(seq), digest)
        gone: dict[int, tuple[float, str]] = {}
        for seq_raw, value in cast(dict[str, str], purged).items():
            at, _, digest = value.partition(" ")
            gone[int(seq_raw)] = (float(at), digest)
        return verify(rows, head, gone, kept_since)

    async def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages)."""
        low = f"{max(0, int((since - 60) * 1000))}"
        high = "+" if until is None else f"{int((until + 60) * 1000)}"
        async for page in self._pages(low, high):
            for _, fields in page:
                event = AuditEvent.load(fields["e"])
                if event.at >= since and (until is None or event.at < until):
                    yield event
