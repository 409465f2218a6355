"""Read-only queries of the ledger (``mindroom_data/ledger.db``, or ``storage.database``) for
the dashboard and ops.

The bot writes the ledger; these only read it, over their own read-only connection (WAL mode:
a reader never blocks the writer). A ledger not made yet, or a query that fails (a table of a
later version), reads as no rows: a page shows less, never an error. Blocking: call it from a
worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mindroom.store.database import Database
from mindroom.store.ledger import LEDGER_FILE

logger = logging.getLogger(__name__)


def ledger_rows(
    data_dir: Path, *queries: tuple[str, Sequence[Any]], database: str | None = None
) -> list[list[tuple[Any, ...]]]:
    """The rows of each ``(sql, args)`` query, in one connection (empty lists when the ledger
    or the table is missing): from ``storage.database`` when it is set, else the file."""
    if database:
        return asyncio.run(_database_rows(database, queries))  # this worker thread's own loop
    path = data_dir / LEDGER_FILE
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


async def _database_rows(
    url: str, queries: Sequence[tuple[str, Sequence[Any]]]
) -> list[list[tuple[Any, ...]]]:
    try:
        db = await Database.open(url, ())  # no migration: a reader changes nothing
    except Exception:  # unreachable now: the page shows less, as with no ledger file
        logger.warning("the ledger database cannot be read", exc_info=True)
        return [[] for _ in queries]
    try:
        found = []
        for sql, args in queries:
            try:
                found.append([tuple(r) for r in await (await db.query(sql, args)).fetchall()])
            except Exception:  # a table of a later version: no rows, and a usable connection
                await db.rollback()
                found.append([])
        return found
    finally:
        await db.close()
