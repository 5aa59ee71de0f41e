"""Where pending requests live: one protocol, three stores.

- ``MemoryPendingStore``: this process only; tests and the sandbox.
- ``SqlitePendingStore``: one file (aiosqlite, WAL); the default of ``python -m bot``;
  survives restarts and crashes; several processes on one host may share the file.
- ``RedisPendingStore``: several bot processes on any number of hosts.

The Redis store is imported from ``adapters.slack.stores.redis`` (it needs redis-py).
"""

from adapters.slack.stores.contract import (
    RETENTION,
    EventFor,
    OpenCount,
    OrphanHandler,
    PendingStore,
    ReportsOrphans,
    StoreConflict,
    StoreUnavailable,
    Watch,
    append_quietly,
    mutate,
)
from adapters.slack.stores.memory import MemoryPendingStore
from adapters.slack.stores.sqlite import SqlitePendingStore

__all__ = [
    "RETENTION",
    "EventFor",
    "MemoryPendingStore",
    "OpenCount",
    "OrphanHandler",
    "PendingStore",
    "ReportsOrphans",
    "SqlitePendingStore",
    "StoreConflict",
    "StoreUnavailable",
    "Watch",
    "append_quietly",
    "mutate",
]
