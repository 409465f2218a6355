"""Opening a SQLite file in WAL mode when other processes may be opening it too.

Switching a database to WAL takes an exclusive lock for a moment, and SQLite reports a
concurrent switch as "database is locked" at once, without waiting out the busy timeout. Two
processes that create one database together (the bot and ``mindroom maintenance daemon``, the
bot and a CLI command) would then fail at start; :func:`use_wal` retries for a bounded time.
"""

from __future__ import annotations

import sqlite3
import time

WAL_SECONDS = 30.0


def use_wal(db: sqlite3.Connection, seconds: float = WAL_SECONDS) -> None:
    """Put ``db`` in WAL mode, retrying while another connection holds the lock it needs."""
    deadline = time.monotonic() + seconds
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)  # a back-off between tries of a lock, not a wait for an event
        pause = min(pause * 2, 0.2)
