"""A scope's search index in PostgreSQL: full-text search and pgvector, derived from the files.

With ``memory.search.index: postgresql`` (and ``storage.database``), the two halves of hybrid
search (:mod:`mindroom.memory.search.hybrid`) run in the shared database instead of beside the
files: the keyword half on a ``tsvector`` of each entry's text and dates, the vector half on
its embedding (pgvector, cosine distance, exact). One table, ``memory_search``, holds every
scope's entries, keyed by scope id: a search names its scope, so one person's entries never
answer another's query.

It is derived data, like the indexes it follows. The scope's keyword index
(:class:`~mindroom.memory.search.index.MemoryIndex`) follows the files and hands over, file by file,
what changed (:meth:`~mindroom.memory.search.index.MemoryIndex.changes`); this index replaces those
files' rows, with the vectors the scope's :class:`~mindroom.memory.search.vectors.VectorIndex` holds
for them (nothing is embedded twice). A digest per file (``memory_search_files``) records what
its rows were copied from, so a process starting, which follows the index from scratch, copies
only the files that changed. :meth:`PgSearch.rebuild` drops the scope's rows and copies
everything again, with the same result. Markdown stays the source of truth.

Ranking differs from the SQLite halves: ``ts_rank_cd`` over an OR of the query's terms (English
stemming) against BM25, and the same exact cosine. ``bench/locomo_retrieval.py --index
postgresql`` measures both on the same data.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindroom.memory.files.dates import date_words, entry_dates, find_dates
from mindroom.memory.files.fields import render_fields
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.policy.filters import LIVE, Where
from mindroom.memory.search.index import IndexMark, MemoryIndex, SearchHit, entry_of
from mindroom.memory.search.query import MAX_TERMS, words

if TYPE_CHECKING:  # numpy comes with the vectors: a keyword-only install has none
    from mindroom.memory.search.vectors import VectorIndex

    # SQLAlchemy (1.5 s to import) loads only where a PostgreSQL index is configured
    from mindroom.store.database import SyncConnection, SyncDatabase

SEARCH_LOCK_KEY = 0x6D656D73  # "mems": the advisory lock of this table's writes
SCHEMA = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    """CREATE TABLE IF NOT EXISTS memory_search (
        scope TEXT NOT NULL, path TEXT NOT NULL, start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL, entry_id TEXT NOT NULL, text TEXT NOT NULL,
        dates TEXT NOT NULL, fields TEXT NOT NULL, category TEXT NOT NULL,
        importance INTEGER NOT NULL, pinned INTEGER NOT NULL, type TEXT NOT NULL,
        state TEXT NOT NULL, updated TEXT NOT NULL, model TEXT, embedding vector,
        terms tsvector GENERATED ALWAYS AS
            (to_tsvector('english', text || ' ' || dates)) STORED,
        PRIMARY KEY (scope, path, start_line)
    )""",
    "CREATE INDEX IF NOT EXISTS memory_search_terms ON memory_search USING gin (terms)",
    # the entry's audience word ('' when none is written), added after the table's first form
    "ALTER TABLE memory_search ADD COLUMN IF NOT EXISTS audience TEXT NOT NULL DEFAULT ''",
    # what each file's rows were copied from: a process (re)starting copies only what changed
    """CREATE TABLE IF NOT EXISTS memory_search_files (
        scope TEXT NOT NULL, path TEXT NOT NULL, digest TEXT NOT NULL,
        PRIMARY KEY (scope, path)
    )""",
)
_COLUMNS = (
    "scope, path, start_line, end_line, entry_id, text, dates, fields, category, importance,"
    " pinned, type, state, updated, model, embedding, audience"
)
_ENTRY = "text, path, entry_id, start_line, end_line, fields"


class PgSearch:
    """The PostgreSQL search halves of one scope (thread-safe)."""

    def __init__(
        self, db: SyncDatabase, scope_id: str, index: MemoryIndex, vectors: VectorIndex | None
    ) -> None:
        self.db, self.scope_id, self.index, self.vectors = db, scope_id, index, vectors
        self._mark: IndexMark | None = None
        self._lock = threading.Lock()

    @classmethod
    def prepare(cls, db: SyncDatabase) -> None:
        """Make the table (and the extension) if missing; raises when pgvector is absent."""
        db.script(SCHEMA)

    def sync(self) -> int:
        """Follow the keyword index (and the vectors): replace the rows of the files whose
        entries differ from what was copied (a digest per file, so a process starting copies
        only what changed); returns how many files were copied or dropped."""
        self.index.sync()
        with self._lock:
            changes = self.index.changes(self._mark)
            if not changes.files and not changes.full:
                self._mark = changes.mark
                return 0
            model = self.vectors.model_id if self.vectors is not None else ""
            with self.db.read() as db:
                rows = db.execute(
                    "SELECT path, digest FROM memory_search_files WHERE scope = ?",
                    (self.scope_id,),
                ).fetchall()
            stored = {row["path"]: row["digest"] for row in rows}
            wanted = {path: _digest(entries, model) for path, entries in changes.files.items()}
            changed = {p: e for p, e in changes.files.items() if e and stored.get(p) != wanted[p]}
            gone = {p for p, e in changes.files.items() if not e and p in stored}
            if changes.full:  # every file is named: one not named left the scope
                gone |= set(stored) - set(changes.files)
            vectors = self._vectors_of(changed)
            with self.db.write() as db:
                for path in sorted(gone | set(changed)):
                    for table in ("memory_search", "memory_search_files"):
                        db.execute(
                            f"DELETE FROM {table} WHERE scope = ? AND path = ?",
                            (self.scope_id, path),
                        )
                for path, entries in changed.items():
                    for entry in entries:
                        self._insert(db, path, entry, vectors.get(entry.id))
                    whole = self.vectors is None or all(e.id in vectors for e in entries)
                    db.execute(  # a file copied without some vectors is copied again later
                        "INSERT INTO memory_search_files (scope, path, digest) VALUES (?, ?, ?)",
                        (self.scope_id, path, wanted[path] if whole else "incomplete"),
                    )
            self._mark = changes.mark
            return len(changed) + len(gone)

    def recheck(self) -> None:
        """Compare every file with its digest at the next sync (a file's rows or digest were
        dropped from outside, e.g. by forget-me: that sync copies such a file again)."""
        with self._lock:
            self._mark = None

    def rebuild(self) -> int:
        """Drop this scope's rows and copy every entry again; returns how many files."""
        with self._lock:
            with self.db.write() as db:
                for table in ("memory_search", "memory_search_files"):
                    db.execute(f"DELETE FROM {table} WHERE scope = ?", (self.scope_id,))
            self._mark = None
        return self.sync()

    def count(self) -> int:
        with self.db.read() as db:
            row = db.execute(
                "SELECT count(*) AS n FROM memory_search WHERE scope = ?", (self.scope_id,)
            ).fetchone()
        return int(row["n"])

    def _vectors_of(self, files: dict[str, list[MemoryEntry]]) -> dict[str, list[float]]:
        if self.vectors is None:
            return {}
        self.vectors.sync()  # the same files, embedded (only what has no vector yet)
        found = {}
        for entries in files.values():
            for entry in entries:
                vector = self.vectors.vector_of(entry.id)
                if vector is not None:
                    found[entry.id] = [float(x) for x in vector]
        return found

    def _insert(
        self, db: SyncConnection, path: str, entry: MemoryEntry, vector: list[float] | None
    ) -> None:
        fields = entry.fields
        day = fields.updated or fields.created or entry.date
        model = self.vectors.model_id if self.vectors is not None and vector else None
        db.execute(
            f"INSERT INTO memory_search ({_COLUMNS}) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS vector), ?)"
            " ON CONFLICT (scope, path, start_line) DO NOTHING",
            (
                self.scope_id,
                path,
                entry.start_line,
                entry.end_line,
                entry.id,
                entry.text,
                date_words(entry_dates(path, entry.text)),
                render_fields(fields),
                fields.category or "",
                fields.importance_or_default,
                int(fields.pinned),
                fields.type_in(path),
                fields.state or "active",
                day.isoformat() if day else "",
                model,
                json.dumps(vector) if vector else None,
                fields.audience or "",
            ),
        )

    def keyword(
        self,
        query: str,
        limit: int,
        *,
        exclude_paths: frozenset[str] = frozenset(),
        now: dt.datetime | None = None,
        where: Where | None = None,
    ) -> list[SearchHit]:
        """The best ``limit`` entries for ``query`` by full-text rank (an OR of its terms),
        scored ``r / (1 + r)`` as the SQLite half maps BM25."""
        parts = query_parts(query, now)
        if not parts or limit <= 0:
            return []
        tsquery = " || ".join(f"{function}('english', ?)" for function, _ in parts)
        found = self._select(
            _Part("ts_rank_cd(terms, q.query)", ()),
            _Part(f", (SELECT {tsquery}) AS q(query)", tuple(text for _, text in parts)),
            _Part(" AND terms @@ q.query", ()),
            _Part("score DESC", ()),
            limit,
            exclude_paths,
            where,
        )
        return [SearchHit(entry, rank / (1 + rank)) for entry, rank in found]

    def vector(
        self,
        vector: Iterable[float],
        limit: int,
        *,
        exclude_paths: frozenset[str] = frozenset(),
        where: Where | None = None,
    ) -> list[SearchHit]:
        """The ``limit`` entries nearest ``vector`` by cosine similarity (exact)."""
        if self.vectors is None or limit <= 0:
            return []
        literal = json.dumps([float(x) for x in vector])
        found = self._select(
            _Part("1 - (embedding <=> CAST(? AS vector))", (literal,)),
            _Part("", ()),
            _Part(" AND embedding IS NOT NULL AND model = ?", (self.vectors.model_id,)),
            _Part("embedding <=> CAST(? AS vector)", (literal,)),
            limit,
            exclude_paths,
            where,
        )
        return [SearchHit(entry, similarity) for entry, similarity in found]

    def _select(
        self,
        score: _Part,
        joined: _Part,
        condition: _Part,
        order: _Part,
        limit: int,
        exclude_paths: frozenset[str],
        where: Where | None,
    ) -> list[tuple[MemoryEntry, float]]:
        where = where or LIVE.where()
        excluded = sorted(exclude_paths)
        not_in = f" AND path NOT IN ({', '.join('?' * len(excluded))})" if excluded else ""
        sql = (
            f"SELECT {_ENTRY}, {score.sql} AS score FROM memory_search{joined.sql}"
            f" WHERE scope = ?{condition.sql}{not_in}{where.sql}"
            f" ORDER BY {order.sql}, path, start_line LIMIT ?"
        )
        params = [
            *score.args,
            *joined.args,
            self.scope_id,
            *condition.args,
            *excluded,
            *where.args,
            *order.args,
            limit,
        ]
        with self.db.read() as db:
            rows = db.execute(sql, params).fetchall()
        columns = ("text", "path", "entry_id", "start_line", "end_line", "fields")
        return [(entry_of(tuple(row[c] for c in columns)), float(row["score"])) for row in rows]


@dataclass(frozen=True)
class _Part:
    """A piece of SQL with its ``?`` arguments."""

    sql: str
    args: tuple[object, ...]


def query_parts(query: str, now: dt.datetime | None = None) -> list[tuple[str, str]]:
    """The tsquery functions and texts whose OR finds ``query``'s entries: each date's
    phrases against the indexed date words, then the words (as the SQLite half's terms)."""
    today = (now or dt.datetime.now()).date()
    dates, rest = find_dates(query, today)
    parts = [("phraseto_tsquery", phrase) for found in dates for phrase in found.phrases]
    parts += [("plainto_tsquery", word) for word in words(rest)]
    return parts[:MAX_TERMS]


def _digest(entries: list[MemoryEntry], model: str) -> str:
    """What a file's rows are copied from: its entries (with their places and fields) and
    the embedding model."""
    parts = [
        model,
        *(
            f"{e.id}\x01{e.start_line}\x01{e.end_line}\x01{e.text}\x01{render_fields(e.fields)}"
            for e in entries
        ),
    ]
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
