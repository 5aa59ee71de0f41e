"""A raw connection to a store's SQLite file, for tests that write it themselves.

The bot chains the audit trail in its own writes; rows a test writes through the ``event``
column (as an earlier release did) land in the trail unchained.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["store_connect"]


def store_connect(path: str | Path, **options: Any) -> sqlite3.Connection:
    """``sqlite3.connect(path, **options)``."""
    return sqlite3.connect(path, **options)
