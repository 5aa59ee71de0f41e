"""The Redis store's layout: its keys, and records and audiences as stored (scripts: redis_lua)."""

from __future__ import annotations

import logging

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


class RedisKeys:
    """The names of every key and channel of one store (``prefix``) and process."""

    def __init__(self, prefix: str, process_id: str) -> None:
        self.prefix, self.process_id = prefix, process_id
        self.record_prefix = f"{prefix}:req:"  # + id: a record
        self.owner_prefix = f"{prefix}:owner:"  # + process id: the pending records it owns
        self.events_prefix = f"{prefix}:events:"  # + id: the stream of a question's events
        self.open = f"{prefix}:open"  # the ids of every pending record
        self.audiences = f"{prefix}:audiences"  # who may answer each open question
        self.owners = f"{prefix}:owners"  # the processes that own (or owned) pending records
        self.sweep = f"{prefix}:sweep"  # the lock held while one process sweeps
        self.done = f"{prefix}:done"  # the channel of the ids of records that just ended
        self.audit = f"{prefix}:audit"  # the stream of every audit event
        self.audit_head = f"{prefix}:audit:head"  # the chain's head: "seq hash"
        self.audit_purged = f"{prefix}:audit:purged"  # each purged event's "at hash" by seq
        self.my_alive = self.alive(process_id)  # this process's heartbeat

    def record(self, request_id: str) -> str:
        return self.record_prefix + request_id

    def owner(self, process_id: str) -> str:
        return self.owner_prefix + process_id

    def alive(self, process_id: str) -> str:
        return f"{self.prefix}:alive:{process_id}"

    def events(self, request_id: str) -> str:
        return self.events_prefix + request_id

    def of_record(self, record: PendingRecord) -> list[str]:
        """The keys a record's scripts touch (record, token, indexes, audit, audiences)."""
        return [
            self.record(record.id),
            f"{self.prefix}:tok:{record.id}",
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
