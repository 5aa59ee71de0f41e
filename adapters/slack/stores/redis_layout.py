"""The Redis store's layout: its keys, and records and audiences as stored (scripts: redis_lua)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapters.slack.model.audience import Audience
from adapters.slack.model.record import PendingRecord
from bot.questions.errors import UserQuestionError

__all__ = [
    "RedisKeys",
    "dump_audience",
    "load_audience",
    "load_record",
    "px",
]


def px(seconds: float) -> int:
    """``seconds`` in whole milliseconds (at least one), as ``PX`` takes them."""
    return max(1, round(seconds * 1000))


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """The names of every key and channel of one store (``prefix``) and process."""

    prefix: str
    process_id: str

    def key(self, kind: str, name: str) -> str:
        """``prefix:kind:name``."""
        return f"{self.prefix}:{kind}:{name}"

    def record(self, request_id: str) -> str:
        """The record's key."""
        return self.key("req", request_id)

    @property
    def record_prefix(self) -> str:
        """What a record's key is its id prefixed with."""
        return f"{self.prefix}:req:"

    def owner(self, process_id: str) -> str:
        """The set of the pending records ``process_id`` owns."""
        return self.key("owner", process_id)

    @property
    def owner_prefix(self) -> str:
        """What an owner set's key is the owner prefixed with."""
        return f"{self.prefix}:owner:"

    def alive(self, process_id: str) -> str:
        """A process's heartbeat."""
        return self.key("alive", process_id)

    def events(self, request_id: str) -> str:
        """The stream of one question's audit events."""
        return self.key("events", request_id)

    @property
    def events_prefix(self) -> str:
        """What a question's stream's key is its id prefixed with."""
        return f"{self.prefix}:events:"

    @property
    def open(self) -> str:
        """The set of the ids of every pending record."""
        return f"{self.prefix}:open"

    @property
    def audiences(self) -> str:
        """The hash of who may answer each open question."""
        return f"{self.prefix}:audiences"

    @property
    def owners(self) -> str:
        """The set of the processes that own (or owned) pending records."""
        return f"{self.prefix}:owners"

    @property
    def sweep(self) -> str:
        """The lock held while one process sweeps."""
        return f"{self.prefix}:sweep"

    @property
    def done(self) -> str:
        """The channel of the ids of records that just ended."""
        return f"{self.prefix}:done"

    @property
    def audit(self) -> str:
        """The stream of every audit event."""
        return f"{self.prefix}:audit"

    @property
    def audit_head(self) -> str:
        """The audit chain's head: the newest event's position and hash (``"seq hash"``)."""
        return f"{self.prefix}:audit:head"

    @property
    def audit_purged(self) -> str:
        """Each purged audit event's position: its time and hash (``"at hash"``)."""
        return f"{self.prefix}:audit:purged"

    @property
    def my_alive(self) -> str:
        """This process's heartbeat."""
        return self.alive(self.process_id)

    def of_record(self, record: PendingRecord) -> list[str]:
        """The keys a record's scripts touch (record, token, indexes, audit, audiences)."""
        return [
            self.record(record.id),
            self.key("tok", record.id),
            self.open,
            self.owner(record.owner or "-"),
            self.owners,
            self.audit,
            self.events(record.id),
            self.audiences,
            self.audit_head,
        ]


def load_record(
    raw: str | bytes | None, request_id: str, log: logging.Logger
) -> PendingRecord | None:
    """A stored record, or ``None`` when it is missing or this version cannot read it at
    all (logged; fields it does not know are only ignored: ``PendingRecord.load``)."""
    if raw is None:
        return None
    try:
        return PendingRecord.load(raw, of=request_id)
    except UserQuestionError as exc:
        log.error("%s", exc.message)
        return None


def dump_audience(record: PendingRecord) -> str:
    """What ``p:audiences`` keeps for ``record``: time asked, users and groups named
    (space-joined) and, when nobody is, the conversation, tab-separated; ``''``: none."""
    audience = Audience.of(record)
    if audience is None:
        return ""
    users, groups = " ".join(audience.users), " ".join(audience.usergroups)
    line = f"{audience.created_at!r}\t{users}\t{groups}"
    return line if audience.channel is None else f"{line}\t{audience.channel}"


def load_audience(line: str) -> Audience:
    """The ``Audience`` of a line (the id, a tab, what ``dump_audience`` kept); one of an
    earlier version naming nobody and no conversation is on no Home tab (``""``)."""
    request_id, created_at, users, groups, *rest = line.split("\t")
    named, usergroups = tuple(users.split()), tuple(groups.split())
    channel = rest[0] if rest else (None if named or usergroups else "")
    return Audience(request_id, float(created_at), named, usergroups, channel)
