"""Relations: light edges between entries that are about the same thing (spec 2).

When an entry is written (a tool's add or update, a flush), :func:`link_entry` searches the
scope for its nearest neighbours and records an edge ``entry -> neighbour`` for each whose
similarity reaches ``link_min`` (the cosine similarity with an embedder, else the keyword
score in [0, 1)), at most ``top_k``, strength = that similarity, one edge per ordered pair (a
second link updates its strength). Retrieval then lifts a hit by ``boost`` times the strength
of its strongest edge to another hit, and shows up to two entries linked to the best hits
that the search did not find itself.

The edges live in ``relations.db`` beside the index: derived data (from the entries and the
similarity that links them), rebuildable, and never trusted over the files: an edge to an entry
that is gone or that the reader may not see is skipped when read. Each linking is one ``link``
record in the history (the audit's LINK event).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from mindroom.memory.filters import LIVE
from mindroom.memory.markdown import MemoryEntry
from mindroom.memory.store import FileMemory
from mindroom.wal import open_database

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS relations (
    from_id TEXT NOT NULL, to_id TEXT NOT NULL, relation_type TEXT NOT NULL DEFAULT 'related_to',
    strength REAL NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (from_id, to_id)
);
CREATE INDEX IF NOT EXISTS relations_to ON relations(to_id);
"""


@dataclass(frozen=True)
class RelationSettings:
    """``memory.relations``."""

    enabled: bool = True
    top_k: int = 3
    link_min: float = 0.6
    boost: float = 0.1


class Relations:
    """The edges of one scope (``relations.db``). Thread-safe."""

    def __init__(self, memory: FileMemory) -> None:
        self._db = open_database(memory.scope.state_dir / "relations.db", _SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def link(self, from_id: str, neighbours: Iterable[tuple[str, float]]) -> int:
        """Record ``from_id -> id`` with each strength (one edge per pair); returns how many."""
        rows = [(from_id, to_id, s, time.time()) for to_id, s in neighbours if to_id != from_id]
        with self._lock, self._db as db:
            db.executemany(
                "INSERT INTO relations (from_id, to_id, strength, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(from_id, to_id) DO UPDATE SET strength = excluded.strength",
                rows,
            )
        return len(rows)

    def edges(self, ids: Iterable[str]) -> dict[str, list[tuple[str, float]]]:
        """Each of ``ids``' neighbours (either direction) with the edge's strength, strongest
        first."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        with self._lock:
            rows = self._db.execute(
                f"SELECT from_id, to_id, strength FROM relations WHERE from_id IN ({marks})"
                f" UNION ALL SELECT to_id, from_id, strength FROM relations"
                f" WHERE to_id IN ({marks})",
                (*wanted, *wanted),
            ).fetchall()
        found: dict[str, dict[str, float]] = {}
        for one, other, strength in rows:
            mine = found.setdefault(one, {})
            mine[other] = max(strength, mine.get(other, 0.0))
        return {k: sorted(v.items(), key=lambda kv: -kv[1]) for k, v in found.items()}

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM relations").fetchone()[0])


def neighbours(
    memory: FileMemory, entry: MemoryEntry, settings: RelationSettings
) -> list[tuple[str, float]]:
    """The entries ``entry`` should link to: its nearest live neighbours at ``link_min`` or
    more, at most ``top_k`` (blocking: the store's search)."""
    from mindroom.memory.hybrid import hybrid_search  # search builds on the store

    found = hybrid_search(memory, entry.text, settings.top_k + 1, only=LIVE)
    linked = []
    for hit in found:
        closeness = hit.similarity if hit.similarity is not None else hit.keyword
        if hit.entry.id != entry.id and closeness is not None and closeness >= settings.link_min:
            linked.append((hit.entry.id, round(float(closeness), 4)))
    return linked[: settings.top_k]


def link_entry(
    memory: FileMemory, entry: MemoryEntry, settings: RelationSettings, *, actor: str
) -> int:
    """Link a just-written ``entry`` to its neighbours (see the module docstring); returns the
    number of edges. A failure is logged, never raised: the write it follows is done."""
    if not settings.enabled or entry.hand_written:
        return 0
    try:
        linked = neighbours(memory, entry, settings)
        if not linked:
            return 0
        relations = Relations(memory)
        try:
            count = relations.link(entry.id, linked)
        finally:
            relations.close()
        memory.history.append(
            actor=actor, op="link", entry_id=entry.id, path=entry.path, old=None, new=None,
            meta={"to": [i for i, _ in linked], "strengths": [s for _, s in linked]},
        )  # fmt: skip
        return count
    except Exception:
        logger.exception("memory %s: linking %s failed", memory.scope_id, entry.id)
        return 0
