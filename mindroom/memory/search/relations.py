"""Relations: light edges between entries that are about the same thing.

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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindroom.config.memory_schema import RelationsConfig
from mindroom.errors import EmbedderError
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.filters import LIVE
from mindroom.memory.search.hybrid import CATCH_UP_LIMIT, Found, hybrid_search
from mindroom.memory.search.query import parse_query
from mindroom.store.wal import open_database

if TYPE_CHECKING:
    from mindroom.memory.search.vectors import VectorIndex

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

    @classmethod
    def of(cls, config: RelationsConfig) -> RelationSettings:
        return cls(config.enabled, config.top_k, config.link_min, config.boost)


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


@contextmanager
def relations_of(memory: FileMemory) -> Iterator[Relations]:
    """The relations of ``memory``'s scope, open for the block (not kept: a person's memory
    closed to free descriptors must not keep one open here)."""
    relations = Relations(memory)
    try:
        yield relations
    finally:
        relations.close()


def _ready_vectors(memory: FileMemory) -> VectorIndex | None:
    """The memory's vector index when it has one that is caught up (else None: keywords)."""
    try:
        vectors = memory.vectors
        return vectors if vectors is not None and vectors.sync_within(CATCH_UP_LIMIT) else None
    except EmbedderError:
        return None


RARE_TERMS = 4  # the words of an entry its neighbours are searched by (the rarest)


def rare_query(memory: FileMemory, text: str) -> str:
    """The :data:`RARE_TERMS` words of ``text`` held by the fewest entries: what makes it
    about something (as more-like-this searches do). A whole entry as an OR query scores most
    of a large memory; its rarest words find the same neighbours at a fraction of the cost."""
    terms = [t for t in parse_query(text) if not t.is_date]
    if len(terms) <= RARE_TERMS:
        return text
    counts = memory.index.term_counts(terms, [])
    rarest = sorted(terms, key=lambda t: counts.frequency.get(t.key, 0))[:RARE_TERMS]
    return " ".join(t.key for t in rarest)


def neighbours(
    memory: FileMemory, entry: MemoryEntry, settings: RelationSettings
) -> list[tuple[str, float]]:
    """The entries ``entry`` should link to: its nearest live neighbours at ``link_min`` or
    more, at most ``top_k`` (blocking: the store's search, by meaning when the memory has
    vectors, and by the entry's rarest words)."""
    memory.index.sync()
    vectors = _ready_vectors(memory)
    own = vectors.vector_of(entry.id) if vectors is not None else None
    if vectors is not None and own is not None:  # by meaning alone: the similarity decides
        hits = vectors.search(entry.text, settings.top_k + 1, synced=True, vector=own)
        found = [Found(h.entry, h.score, None, h.score) for h in hits]
    else:
        found = hybrid_search(
            memory,
            entry.text,
            settings.top_k + 1,
            only=LIVE,
            keyword_query=rare_query(memory, entry.text),
        )
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
        with relations_of(memory) as relations:
            count = relations.link(entry.id, linked)
        memory.history.append(
            actor=actor,
            op="link",
            entry_id=entry.id,
            path=entry.path,
            old=None,
            new=None,
            meta={"to": [i for i, _ in linked], "strengths": [s for _, s in linked]},
            durable=False,  # derived: a crash may lose the record with the edge
        )
        return count
    except Exception:
        logger.exception("memory %s: linking %s failed", memory.scope_id, entry.id)
        return 0


def boosted(
    memory: FileMemory, scored: list[tuple[MemoryEntry, float]], boost: float
) -> list[tuple[MemoryEntry, float]]:
    """``scored`` (entry, score) with each score raised by ``boost`` times the entry's strongest
    edge to another of them, best first (ties keep their order)."""
    if boost <= 0 or len(scored) < 2:
        return scored
    ids = {e.id for e, _ in scored}
    with relations_of(memory) as relations:
        edges = relations.edges(ids)
    lifted = []
    for order, (entry, score) in enumerate(scored):
        strongest = max((s for other, s in edges.get(entry.id, []) if other in ids), default=0.0)
        lifted.append((score + boost * strongest, order, entry))
    lifted.sort(key=lambda t: (-t[0], t[1]))
    return [(entry, score) for score, _, entry in lifted]


def related_entries(
    memory: FileMemory,
    shown: list[MemoryEntry],
    visible: Callable[[MemoryEntry], bool],
    limit: int = 2,
) -> list[tuple[MemoryEntry, MemoryEntry]]:
    """Up to ``limit`` entries linked to ``shown`` (the best first) that are not among them,
    live and ``visible``: ``(related entry, the shown entry it is linked to)``."""
    if not shown or limit <= 0:
        return []
    with relations_of(memory) as relations:
        edges = relations.edges(e.id for e in shown)
    taken = {e.id for e in shown}
    found: list[tuple[MemoryEntry, MemoryEntry]] = []
    for entry in shown:
        for other, _ in edges.get(entry.id, []):
            if other in taken:
                continue
            taken.add(other)
            related = memory.lookup(other)
            if related is not None and LIVE.holds(related) and visible(related):
                found.append((related, entry))
                if len(found) == limit:
                    return found
    return found
