"""Where pending requests live: one contract (``PendingStore``), three stores (memory, SQLite,
Redis). Imports ``render`` (its sentences), ``model`` and the seam."""

from adapters.slack.stores.contract import (
    RETENTION,
    DurableStore,
    EventFor,
    OpenCount,
    PendingStore,
    StoreConflict,
    StoreUnavailable,
    append_quietly,
    mutate,
    settle,
    until_back,
)
from adapters.slack.stores.memory import MemoryPendingStore
from adapters.slack.stores.sqlite import SqlitePendingStore
from adapters.slack.stores.watches import Watch

__all__ = [
    "RETENTION",
    "DurableStore",
    "EventFor",
    "MemoryPendingStore",
    "OpenCount",
    "PendingStore",
    "SqlitePendingStore",
    "StoreConflict",
    "StoreUnavailable",
    "Watch",
    "append_quietly",
    "mutate",
    "settle",
    "until_back",
]
