"""A raw connection to a store's SQLite file that writes as the bot does.

The trail's trigger chains each appended event with ``chain_hash`` (``audit_chain``), a
function every writing connection of the bot registers; a test that writes records itself
registers it too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from adapters.slack.model.audit_chain import chain_hash

__all__ = ["store_connect"]


def store_connect(path: str | Path, **options: Any) -> sqlite3.Connection:
    """``sqlite3.connect(path, **options)`` with the bot's ``chain_hash`` registered."""
    db = sqlite3.connect(path, **options)
    db.create_function("chain_hash", 3, chain_hash, deterministic=True)
    return db
