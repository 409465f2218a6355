"""Read-only queries of the ledger (``mindroom_data/ledger.db``) for the dashboard and ops.

The bot writes the ledger; these only read it, over their own read-only connection (WAL mode:
a reader never blocks the writer). A ledger not made yet, or a query that fails (a table of a
later version), reads as no rows: a page shows less, never an error. Blocking: call it from a
worker thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LEDGER = "ledger.db"


def ledger_rows(data_dir: Path, *queries: tuple[str, Sequence[Any]]) -> list[list[tuple[Any, ...]]]:
    """The rows of each ``(sql, args)`` query, in one connection (empty lists when the ledger
    or the table is missing)."""
    path = data_dir / LEDGER
    if not path.exists():
        return [[] for _ in queries]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    try:
        found = []
        for sql, args in queries:
            try:
                found.append(db.execute(sql, tuple(args)).fetchall())
            except sqlite3.Error:
                found.append([])
        return found
    finally:
        db.close()
