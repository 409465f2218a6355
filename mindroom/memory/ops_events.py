"""Operational events: what memory did, where, and how it went (spec 14).

One row per operation, in the scope's ``events.db`` (control state: deleting it loses only
these counts): the person and thread when known, the *node* that acted (``hotpath``: an
agent's tools in a turn; ``context``: recall; ``episodic``: the flush; ``worker``: background
jobs), the *op* (``search``, ``create``, ``update``, ``delete``, ``merge``, ``link``, ``ttl``),
its *status* (``ok``, ``error``, ``skipped``), and where it applies the memory id, the category
and the best similarity. ``mindroom memory stats`` counts them by node and op, which answers
"what changed and when" without reading logs.

Emitting never fails the operation it describes: an error here is logged and dropped.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass

from mindroom.memory.backend import MemoryBackend, keeps_files
from mindroom.memory.files.store import FileMemory
from mindroom.store.wal import open_database

logger = logging.getLogger(__name__)

NODES = ("hotpath", "context", "episodic", "worker")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, user_id TEXT, thread_id TEXT, node TEXT NOT NULL, op TEXT NOT NULL,
    status TEXT NOT NULL, memory_id TEXT, category TEXT, sim REAL, ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_user ON events(user_id, ts DESC);
CREATE INDEX IF NOT EXISTS events_node ON events(node, ts DESC);
"""


@dataclass(frozen=True)
class OpEvent:
    """One operation, as :func:`emit` records it."""

    node: str
    op: str
    status: str = "ok"
    memory_id: str | None = None
    category: str | None = None
    sim: float | None = None
    user_id: str | None = None
    thread_id: str | None = None


class EventLog:
    """The ``events.db`` of one scope."""

    def __init__(self, memory: FileMemory) -> None:
        self._db: sqlite3.Connection = open_database(memory.scope.state_dir / "events.db", _SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, events: list[OpEvent]) -> None:
        now = time.time()
        with self._lock, self._db as db:
            db.executemany(
                "INSERT INTO events (user_id, thread_id, node, op, status, memory_id, category,"
                " sim, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.user_id,
                        e.thread_id,
                        e.node,
                        e.op,
                        e.status,
                        e.memory_id,
                        e.category,
                        e.sim,
                        now,
                    )
                    for e in events
                ],
            )

    def counts(self, since: float = 0.0) -> list[tuple[str, str, str, int]]:
        """``(node, op, status, count)`` of the events since ``since`` (epoch seconds)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT node, op, status, count(*) FROM events WHERE ts >= ?"
                " GROUP BY node, op, status ORDER BY node, op, status",
                (since,),
            ).fetchall()
        return [(str(n), str(o), str(s), int(c)) for n, o, s, c in rows]


def emit(memory: MemoryBackend, *events: OpEvent) -> None:
    """Record ``events`` for ``memory`` (file memory only; never raises). The database is
    opened for the call and closed: a person's memory closed to free descriptors must not
    keep one open here."""
    if not events or not keeps_files(memory):
        return
    try:
        log = EventLog(memory)
        try:
            log.add(list(events))
        finally:
            log.close()
    except Exception:
        logger.exception("memory %s: operational events not recorded", memory.scope_id)
