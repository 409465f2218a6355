"""Operational events: what memory did, where, and how it went.

One row per operation, in the scope's ``events.db`` (control state: deleting it loses only
these counts): the person and thread when known, the *node* that acted (``hotpath``: an
agent's tools in a turn; ``context``: recall; ``episodic``: the flush; ``worker``: background
jobs), the *op* (``search``, ``create``, ``update``, ``delete``, ``merge``, ``link``, ``ttl``),
its *status* (``ok``, ``error``, ``skipped``), and where it applies the memory id, the category
and the best similarity. ``mindroom memory stats`` counts them by node and op, which answers
"what changed and when" without reading logs.

Emitting never fails the operation it describes: an error here is logged and dropped. Each
write opens, commits and closes the scope's database (tens of milliseconds on a busy disk): a
caller on a reply's path collects the events instead (:func:`collected_events`) and writes
them beside the reply (:func:`write_collected`).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from mindroom.memory.backend import MemoryBackend, keeps_files
from mindroom.memory.files.store import FileMemory
from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import OPS_EVENTS

logger = logging.getLogger(__name__)

NODES = ("hotpath", "context", "episodic", "worker")


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
        self._db: sqlite3.Connection = open_store(memory.scope.state_dir / "events.db", OPS_EVENTS)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, events: list[OpEvent]) -> None:
        now = time.time()
        with self._lock, transaction(self._db) as db:
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
                "SELECT node, op, status, count(*) AS n FROM events WHERE ts >= ?"
                " GROUP BY node, op, status ORDER BY node, op, status",
                (since,),
            ).fetchall()
        return [(str(r["node"]), str(r["op"]), str(r["status"]), int(r["n"])) for r in rows]


Collected = list[tuple[MemoryBackend, tuple[OpEvent, ...]]]
_collected: ContextVar[Collected | None] = ContextVar("mindroom_ops_events", default=None)


@contextlib.contextmanager
def collected_events() -> Iterator[Collected]:
    """In this block :func:`emit` keeps the events in the list it yields instead of writing
    them, for :func:`write_collected` later (work the block runs with ``asyncio.to_thread``
    is collected too: the thread runs in a copy of this context)."""
    found: Collected = []
    token = _collected.set(found)
    try:
        yield found
    finally:
        _collected.reset(token)


def write_collected(found: Collected) -> None:
    """Write what :func:`collected_events` kept (never raises)."""
    for memory, events in found:
        emit(memory, *events)


def emit(memory: MemoryBackend, *events: OpEvent) -> None:
    """Record ``events`` for ``memory`` (file memory only; never raises). The database is
    opened for the call and closed: a person's memory closed to free descriptors must not
    keep one open here. Inside :func:`collected_events` they are kept for later instead."""
    if not events or not keeps_files(memory):
        return
    collecting = _collected.get()
    if collecting is not None:
        collecting.append((memory, events))
        return
    try:
        log = EventLog(memory)
        try:
            log.add(list(events))
        finally:
            log.close()
    except Exception:
        logger.exception("memory %s: operational events not recorded", memory.scope_id)
