"""The vector index of a scope: one embedding per memory entry, searched by cosine similarity.

Derived data, like the keyword index it follows. The entries come from
:class:`~mindroom.memory.search.index.MemoryIndex`
(:meth:`~mindroom.memory.search.index.MemoryIndex.changes`
hands over the entries of every file it re-indexed), so the two indexes always agree on which
entries exist: hand edits, deletions and a deleted index reach both the same way. Vectors are
keyed by (model id, SHA-256 of the entry's text): only new or changed texts are embedded, an
entry moved to another file or restored keeps its vector, and two embedders never mix. Vectors
of entries that are gone are pruned in bulk. :meth:`VectorIndex.rebuild` (``mindroom memory
reindex``) drops every stored vector and embeds everything again, with the same result.

Storage and search, chosen by measurement (``bench/vector_store.py``: 384 dimensions, query
vector given, medians, 2 cores that other work was using, load average 2.2 to 2.5):

=========  ==========================  =========================  ============================
entries    numpy (SQLite BLOB table,   + float16 copy via torch    sqlite-vec 0.1.9 ``vec0``
           float32 matrix in memory)   (candidates, see below)     (through sqlean.py)
=========  ==========================  =========================  ============================
1,000      0.05 ms, +8 MB              0.13 ms                     0.63 ms, ~0 MB
10,000     0.24 ms, +45 MB             0.60 ms                     7.8 ms
100,000    6.8-7.3 ms (p95 10), +148   5.9 ms (p95 6.5), +220 MB   70 ms (p95 84)
=========  ==========================  =========================  ============================

sqlite-vec scans its on-disk chunks on every query: ten times slower than one BLAS
matrix-vector product at 100k entries (140 ms against 28 ms in a busier minute), so it alone
would take the whole 25 ms budget that search has to share with embedding the query (11 to
17 ms here), and it needs a SQLite that loads extensions, which the standard library's here
cannot. numpy keeps each scope's vectors in memory (1.5 KB an entry: 150 MB at 100k, 1.5 MB at
1k), read from ``vectors.db`` (beside the keyword index) once per process: 1.6 s at 100k.
From :data:`HALF_FROM` entries a float16 copy scored by torch
(:mod:`mindroom.adapters.embeddings.scoring`,
+50 % memory) picks the candidates, which are then scored exactly: its time barely moves when
other processes compete for memory bandwidth (float32 went from 7 to 19 ms under load, float16
stayed at 6). Brute force keeps results exact and deterministic, so a rebuilt index ranks
exactly like an incrementally updated one. End to end (``bench/vector_search.py``, real
all-MiniLM-L6-v2): a search at 100k entries, query embedding included, took 22.7 and 26.1 ms
(median, two runs, load 1.8 to 2.7).

Deliberately not here: combining vector and keyword hits into one ranking (the caller's).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mindroom.adapters.embeddings import Embedder, embed_queries
from mindroom.adapters.embeddings.scoring import Scorer, half_precision_scorer
from mindroom.errors import EmbedderError
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.policy.filters import LIVE, MemoryFilter
from mindroom.memory.search.index import SEARCH_WAIT_SECONDS, IndexMark, MemoryIndex, SearchHit
from mindroom.store.wal import open_database

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, hash)
) WITHOUT ROWID;
"""
CHUNK = 256  # texts embedded and stored per step: progress survives an interruption
HALF_FROM = 20_000  # from this many entries, candidates come from a float16 copy (see scoring)
_LOOKUP = 500  # hashes per stored-vector lookup (below SQLite's variable limit)
_Matrix = npt.NDArray[np.float32]
Progress = Callable[[int, int], None]  # (texts embedded so far, texts to embed)


def content_hash(text: str) -> bytes:
    """The text half of a vector's key (the model id is the other half)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class _Block:
    """One file's entries and their vectors (row i belongs to entry i)."""

    entries: list[MemoryEntry]
    hashes: list[bytes]
    vectors: _Matrix


class VectorIndex:
    """The vectors of one scope's entries under one embedder. Thread-safe.

    Every method follows the keyword index first (which follows the files), then embeds what
    has no vector yet: a search never misses an entry because it was added a moment ago.
    ``embedded`` counts the texts this object has sent to the embedder.
    """

    def __init__(self, index: MemoryIndex, embedder: Embedder, db_path: Path) -> None:
        self.index = index
        self.embedder = embedder
        self.db_path = db_path
        self.embedded = 0
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._mark: IndexMark | None = None
        self._files: dict[str, _Block] = {}
        self._dims: int | None = None
        self._unused = 0  # stored vectors whose text left the index since the last prune
        self._catching_up = False  # a catch_up thread is embedding
        # the files' blocks joined in path order (built on the first search after a change)
        self._matrix: _Matrix | None = None
        self._masks: dict[MemoryFilter, npt.NDArray[np.intp]] = {}
        self._masks_of: list[MemoryEntry] | None = None
        self._scorer: Scorer | None = None
        self._rows: list[MemoryEntry] = []
        self._spans: dict[str, tuple[int, int]] = {}

    @property
    def model_id(self) -> str:
        """The model id the vectors are keyed by."""
        return self.embedder.model_id

    # -- storage --------------------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = open_database(self.db_path, _SCHEMA)
        return self._connection

    def close(self) -> None:
        """Close the database and forget the vectors held in memory (reloaded on next use)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._forget()

    def _forget(self) -> None:
        self._mark, self._files, self._matrix, self._dims = None, {}, None, None

    def _stored(self, hashes: list[bytes]) -> dict[bytes, _Matrix]:
        """The stored vectors of ``hashes`` (one scan of the model's rows when most are wanted,
        as on opening: 0.5 s instead of 2.3 s for 100k lookups)."""
        if len(hashes) > _LOOKUP * 4:
            wanted = set(hashes)
            rows = self._db.execute(
                "SELECT hash, vector FROM vectors WHERE model = ?", (self.model_id,)
            )
            return self._usable((key, blob) for key, blob in rows if key in wanted)
        found: dict[bytes, _Matrix] = {}
        for start in range(0, len(hashes), _LOOKUP):
            chunk = hashes[start : start + _LOOKUP]
            rows = self._db.execute(
                f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN "
                f"({', '.join('?' * len(chunk))})",
                (self.model_id, *chunk),
            )
            found.update(self._usable(rows))
        return found

    def _usable(self, rows: Iterable[tuple[bytes, bytes]]) -> dict[bytes, _Matrix]:
        """Stored vectors of the index's size (another size is stale: embedded again)."""
        found: dict[bytes, _Matrix] = {}
        for key, blob in rows:
            vector = np.frombuffer(blob, dtype=np.float32)
            if self._dims is None:
                self._dims = vector.shape[0]
            if vector.shape[0] == self._dims:
                found[key] = vector
        return found

    def _embed(
        self, wanted: dict[bytes, str], progress: Progress | None = None
    ) -> dict[bytes, _Matrix]:
        """Embed ``wanted`` (hash -> text) in chunks, storing each chunk as it is done;
        ``progress`` is told (done, total) before the first chunk and after each."""
        made: dict[bytes, _Matrix] = {}
        items = list(wanted.items())
        if progress is not None and items:
            progress(0, len(items))
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            vectors = self.embedder.embed([text for _, text in chunk])
            if vectors.ndim != 2 or vectors.shape[0] != len(chunk):
                raise EmbedderError(f"{self.model_id} returned {vectors.shape} for {len(chunk)}")
            if self._dims is None:
                self._dims = int(vectors.shape[1])
            if vectors.shape[1] != self._dims:
                raise EmbedderError(
                    f"{self.model_id} now makes {vectors.shape[1]}-dimensional vectors, the "
                    f"stored ones have {self._dims}: run `mindroom memory reindex`"
                )
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            pairs = [(key, row) for (key, _), row in zip(chunk, vectors, strict=True)]
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (model, hash, vector) VALUES (?, ?, ?)",
                    [(self.model_id, key, row.tobytes()) for key, row in pairs],
                )
            made.update(pairs)
            self.embedded += len(chunk)  # embedded and stored
            if progress is not None:
                progress(len(made), len(items))
        return made

    def _prune(self) -> None:
        """Drop this model's stored vectors whose text is in no entry any more."""
        keep = {key for block in self._files.values() for key in block.hashes}
        with self._db:
            stored = self._db.execute(
                "SELECT count(*) FROM vectors WHERE model = ?", (self.model_id,)
            ).fetchone()[0]
            if stored > len(keep):  # every kept text is stored: equal counts, nothing to drop
                self._db.execute("CREATE TEMP TABLE IF NOT EXISTS keep (hash BLOB PRIMARY KEY)")
                self._db.execute("DELETE FROM keep")
                self._db.executemany("INSERT INTO keep VALUES (?)", [(key,) for key in keep])
                self._db.execute(
                    "DELETE FROM vectors WHERE model = ? AND hash NOT IN (SELECT hash FROM keep)",
                    (self.model_id,),
                )
                self._db.execute("DELETE FROM keep")
        self._unused = 0

    # -- following the keyword index ------------------------------------------------------

    def sync(self, progress: Progress | None = None) -> int:
        """Follow the files and embed every entry text that has no vector; returns how many
        texts were embedded (``progress``: told (done, total) as they are). Raises
        :class:`EmbedderError` if the embedder fails (what was embedded before the failure is
        kept)."""
        self.index.sync()
        with self._lock:
            return self._follow(progress=progress) or 0

    def sync_within(self, limit: int) -> bool:
        """Follow the files now if that embeds at most ``limit`` texts and no other thread is
        syncing; False otherwise, changing nothing (the caller then searches without vectors
        this time and calls :meth:`catch_up`), so a turn never waits for a big embedding, nor
        for the keyword index to follow a big file."""
        if not self.index.sync_within(SEARCH_WAIT_SECONDS):
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._follow(limit) is not None
        finally:
            self._lock.release()

    def catch_up(self) -> None:
        """Embed what is missing in a background daemon thread (one at a time); a failure is
        left to the next search, which reports it."""
        with self._lock:
            if self._catching_up:
                return
            self._catching_up = True

        def run() -> None:
            try:
                self.sync()
            except Exception as exc:  # the next search says it (keyword-only), once
                logger.debug("catching up the vectors of %s failed: %s", self.db_path, exc)
            finally:
                self._catching_up = False

        threading.Thread(target=run, name="vectors-catch-up", daemon=True).start()

    def _follow(self, limit: int | None = None, progress: Progress | None = None) -> int | None:
        """Take in the keyword index's changes, embedding the texts that have no vector; None
        (nothing changed) when that would be more than ``limit`` texts."""
        changes = self.index.changes(self._mark)
        if not changes.files and not changes.full:
            self._mark = changes.mark
            return 0
        before = self._files
        known: dict[bytes, _Matrix] = {}
        for path in before if changes.full else changes.files:
            block = before.get(path)
            if block is not None:
                known.update(zip(block.hashes, block.vectors, strict=True))
        hashed = {
            path: [content_hash(e.text) for e in entries] for path, entries in changes.files.items()
        }
        texts = {
            key: entry.text
            for path, entries in changes.files.items()
            for key, entry in zip(hashed[path], entries, strict=True)
            if key not in known
        }
        known.update(self._stored(list(texts)))
        embedded = len([key for key in texts if key not in known])
        if limit is not None and embedded > limit:
            return None
        known.update(self._embed({k: t for k, t in texts.items() if k not in known}, progress))
        files = {} if changes.full else dict(before)
        width = self._dims or 0
        for path, entries in changes.files.items():
            old = files.pop(path, None)
            if old is not None:
                self._unused += len(set(old.hashes) - set(hashed[path]))
            if entries:
                rows = [known[key] for key in hashed[path]]
                vectors = np.stack(rows) if rows else np.zeros((0, width), np.float32)
                files[path] = _Block(entries, hashed[path], vectors)
        self._files, self._matrix, self._mark = files, None, changes.mark
        total = sum(len(block.hashes) for block in files.values())
        if changes.full or self._unused > max(1000, total // 4):
            self._prune()
        return embedded

    def _joined(
        self,
    ) -> tuple[_Matrix, Scorer | None, list[MemoryEntry], dict[str, tuple[int, int]]]:
        """The matrix of every vector (path order), its fast scorer (large matrices only),
        its entries and each file's row span.

        After joining, each file's block is a view into the matrix, so the vectors are held
        once; a changed file gets a new block and the next search joins again.
        """
        if self._matrix is None:
            paths = sorted(self._files)
            blocks = [self._files[path].vectors for path in paths]
            width = self._dims or 0
            matrix = np.concatenate(blocks) if blocks else np.zeros((0, width), np.float32)
            rows: list[MemoryEntry] = []
            spans: dict[str, tuple[int, int]] = {}
            for path in paths:
                block = self._files[path]
                start = len(rows)
                rows.extend(block.entries)
                spans[path] = (start, len(rows))
                self._files[path] = _Block(block.entries, block.hashes, matrix[start : len(rows)])
            self._matrix, self._rows, self._spans = matrix, rows, spans
            # the live rows' mask, which nearly every search uses, is part of the join
            live = np.array([n for n, row in enumerate(rows) if not LIVE.holds(row)], np.intp)
            self._masks, self._masks_of = {LIVE: live}, rows
            self._scorer = half_precision_scorer(matrix) if len(rows) >= HALF_FROM else None
        return self._matrix, self._scorer, self._rows, self._spans

    # -- reading --------------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = 5,
        *,
        exclude_paths: frozenset[str] = frozenset(),
        synced: bool = False,
        only: MemoryFilter | None = None,
        vector: _Matrix | None = None,
    ) -> list[SearchHit]:
        """The ``limit`` entries most similar to ``query``, best first, scored by cosine
        similarity (ties: file and line order); ``synced``: the caller has just followed the
        files (:meth:`sync_within`); ``only`` (default: live entries) picks the entries that
        may be found, before the best are chosen (its mask is kept until the rows change);
        ``vector``: the query's embedding, when the caller has it (an entry's own). Raises
        :class:`EmbedderError`."""
        if limit <= 0 or not query.strip():
            return []
        if not synced:
            self.sync()
        if vector is None:
            [vector] = embed_queries(self.embedder, [query])
        with self._lock:
            matrix, scorer, rows, spans = self._joined()
        if not rows:
            return []
        if vector.shape[0] != matrix.shape[1]:
            raise EmbedderError(
                f"{self.model_id} made a {vector.shape[0]}-dimensional query vector for "
                f"{matrix.shape[1]}-dimensional entries: run `mindroom memory reindex`"
            )
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        approximate = matrix @ vector if scorer is None else scorer(vector)
        for path in exclude_paths:
            start, end = spans.get(path, (0, 0))
            approximate[start:end] = -np.inf
        hidden = self._hidden(only or LIVE, rows)
        if hidden.size:
            approximate[hidden] = -np.inf
        count = min(limit if scorer is None else max(64, 8 * limit), len(rows))
        top = np.argpartition(-approximate, count - 1)[:count]
        top = top[np.isfinite(approximate[top])]
        # candidates from the float16 copy are scored again, exactly
        scores = approximate[top] if scorer is None else matrix[top] @ vector
        order = sorted(range(len(top)), key=lambda j: (-scores[j], top[j]))[:limit]
        return [SearchHit(rows[top[j]], float(scores[j])) for j in order]

    def rebuild(self) -> int:
        """Drop every stored vector (of every model) and embed every entry again; returns the
        number of entries embedded for."""
        self.index.sync()
        with self._lock:
            with self._db:
                self._db.execute("DELETE FROM vectors")
            self._forget()
            self._follow()
            return sum(len(block.hashes) for block in self._files.values())

    def count(self) -> int:
        """How many entries have a vector (after following the files)."""
        self.sync()
        with self._lock:
            return sum(len(block.hashes) for block in self._files.values())

    def stored(self) -> int:
        """How many vectors of this model the database holds (pruned ones excluded)."""
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM vectors WHERE model = ?", (self.model_id,)
            ).fetchone()
            return int(row[0])

    def snapshot(self) -> list[tuple[str, str, str, int, int, _Matrix]]:
        """Every entry with its vector, sorted like :meth:`MemoryIndex.snapshot` (plus the
        vector): for comparing an incremental index with a rebuild."""
        self.sync()
        with self._lock:
            rows = [
                (path, e.id, e.text, e.start_line, e.end_line, vector)
                for path, block in self._files.items()
                for e, vector in zip(block.entries, block.vectors, strict=True)
            ]
        return sorted(rows, key=lambda row: row[:5])

    def _hidden(self, only: MemoryFilter, rows: list[MemoryEntry]) -> npt.NDArray[np.intp]:
        """The rows ``only`` leaves out, computed once per filter while the rows stay."""
        with self._lock:
            if self._masks_of is not rows:
                self._masks, self._masks_of = {}, rows
            mask = self._masks.get(only)
            if mask is None:
                if len(self._masks) > 32:  # a bound: filters vary with requests
                    self._masks.clear()
                mask = np.array([n for n, row in enumerate(rows) if not only.holds(row)], np.intp)
                self._masks[only] = mask
            return mask

    def vector_of(self, entry_id: str) -> _Matrix | None:
        """The stored embedding of entry ``entry_id`` as last followed (None: it has none)."""
        with self._lock:
            matrix, _, rows, _ = self._joined()
            for row, entry in enumerate(rows):
                if entry.id == entry_id:
                    return np.array(matrix[row], dtype=np.float32)
        return None

    def neighbours(
        self, among: list[str], wanted: list[str], k: int
    ) -> dict[str, list[tuple[str, float]]]:
        """Each id of ``wanted`` with its ``k`` nearest entries of ``among`` by cosine (itself
        left out); ids without a vector are left out on both sides."""
        by_id = {row[1]: row[5] for row in self.snapshot()}
        ids = [i for i in among if i in by_id]
        asked = [i for i in wanted if i in by_id]
        if not ids or not asked:
            return {}
        matrix = np.stack([by_id[i] for i in ids])
        top_k = min(k + 1, len(ids))
        found: dict[str, list[tuple[str, float]]] = {}
        for start in range(0, len(asked), 256):
            chunk = asked[start : start + 256]
            scores = np.stack([by_id[i] for i in chunk]) @ matrix.T
            top = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
            for row, entry_id in enumerate(chunk):
                found[entry_id] = [
                    (ids[j], float(scores[row, j])) for j in top[row] if ids[j] != entry_id
                ]
        return found
