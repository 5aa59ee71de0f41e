"""The audit trail of a durable store, kept by a part of its own (its table or streams)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from adapters.slack.model.audit_chain import ChainCheck
from adapters.slack.model.audit_trail import AuditEvent

__all__ = ["KeepsTrail", "Trail", "TrailReader"]


class TrailReader(Protocol):
    """The reading half of a store's audit part."""

    async def events(self, request_id: str) -> list[AuditEvent]: ...

    def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]: ...

    async def check_chain(self, kept_since: float) -> ChainCheck | None:
        """What ``audit_chain.verify`` finds; ``None`` when this store keeps no chain."""
        ...


class Trail(TrailReader, Protocol):
    """What a store's audit part does (``SqliteAudit``, ``RedisAudit``)."""

    async def append_event(self, event: AuditEvent) -> None: ...


class KeepsTrail:
    """The audit methods of ``PendingStore``, passed to ``self._trail``."""

    _trail: Trail

    async def append_event(self, event: AuditEvent) -> None:
        """Append ``event`` to its question's trail (kept for the retention period)."""
        await self._trail.append_event(event)

    async def events(self, request_id: str) -> list[AuditEvent]:
        """The trail of one question, in the order it was appended."""
        return await self._trail.events(request_id)

    def audit(self, since: float, until: float | None = None) -> AsyncIterator[AuditEvent]:
        """Every event with ``since <= at < until``, in the order appended (read in pages)."""
        return self._trail.audit(since, until)

    async def check_chain(self, kept_since: float) -> ChainCheck | None:
        """The breaks of the trail's hash chain, each naming its position (``None``: none kept)."""
        return await self._trail.check_chain(kept_since)
