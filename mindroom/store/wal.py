"""Opening a SQLite file in WAL mode when other processes may be opening it too.

Switching a database to WAL takes an exclusive lock for a moment, and SQLite reports a
concurrent switch as "database is locked" at once, without waiting out the busy timeout. Two
processes that create one database together (the bot and ``mindroom maintenance daemon``, the
bot and a CLI command) would then fail at start; :func:`use_wal` retries for a bounded time.

:func:`open_database` applies an unversioned ``IF NOT EXISTS`` script: only the derived indexes
(:data:`mindroom.store.schemas.DERIVED`) use it. A store that nothing can rebuild opens through
:func:`mindroom.store.migrations.open_store`, with versioned migrations.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

WAL_SECONDS = 30.0


def use_wal(
    db: sqlite3.Connection,
    seconds: float = WAL_SECONDS,
    gave_up: threading.Event | None = None,
) -> None:
    """Put ``db`` in WAL mode, retrying while another connection holds the lock it needs
    (until ``seconds`` passed, or ``gave_up`` is set: its caller was cancelled)."""
    deadline = time.monotonic() + seconds
    pause = 0.005
    stop = gave_up or threading.Event()
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline or stop.is_set():
                raise
        stop.wait(pause)  # a back-off between tries of a lock, cut short by a give-up
        pause = min(pause * 2, 0.2)


def open_database(path: Path, schema: str) -> sqlite3.Connection:
    """A connection to ``path`` (created, with its folder, when missing) usable from any thread
    under the caller's lock: WAL, a 30 s busy timeout, ``synchronous=NORMAL``, and ``schema`` (a
    script of ``IF NOT EXISTS`` statements) applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    try:
        use_wal(db)
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(schema)
    except BaseException:
        db.close()
        raise
    return db
