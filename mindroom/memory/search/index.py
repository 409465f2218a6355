"""The search index of a scope: SQLite FTS5 with BM25 over every memory file. Derived data.

One row per memory entry (a mindroom entry, a hand-written line or block), with its file and
line range. The index follows the files, not the other way round: :meth:`MemoryIndex.sync`
compares each file's inode, size and modification time with what was indexed and re-reads the ones
that changed, and searches sync first, so a search never returns text that is no longer in
the files (a search that did not wait for a big file may miss entries, see below). Deleting
the index file loses nothing; :meth:`MemoryIndex.rebuild` gives the same result as any
sequence of incremental syncs.

Each row also holds the entry's dates (its daily file's day and the dates in its text, see
:mod:`mindroom.memory.files.dates`) in a column of their own. Queries are an OR of the query's terms
(:mod:`mindroom.memory.search.query`: words without stop words or fragments, dates against the date
column), ranked by BM25; the raw BM25 value ``b`` (lower is better, ``b <= 0``) is mapped to a
score ``s / (1 + s)`` with ``s = -b``, so scores are in [0, 1) and comparable across queries in
the same index. The schema has a version (``PRAGMA user_version``): an index of another version
is dropped and rebuilt from the files when it is opened.

A big file (a 24 MB daily file holds about 160,000 entries) takes seconds to parse and index,
so a turn never waits for it: :meth:`MemoryIndex.sync_within` has one background thread per
index follow the files; a search waits for it, but once a big file (:data:`BIG_FILE_BYTES`) is
being indexed only for a moment (:data:`SEARCH_WAIT_SECONDS`), then searches what is indexed
so far (:attr:`MemoryIndex.catching_up` says so). A file is parsed
outside the index's lock and written in chunks of :data:`CHUNK_ROWS` rows, one transaction each,
so searches run between chunks. A changed file's rows are dropped before it is read: while it
is (re)indexed a search may miss its entries, never return text it no longer holds. Its
signature is taken before it is read and stored only after its last chunk, so an edit made
while it is indexed is seen by the next pass (the background thread passes again until nothing
changed), and a crash half-way leaves it stale, to be indexed again.

Followers of the index (the vector index, :mod:`mindroom.memory.search.vectors`) ask
:meth:`MemoryIndex.changes` which files' entries changed since they last looked, so they see
exactly the entries this index holds, file by file, without re-reading files themselves.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindroom.memory.files.dates import date_words, entry_dates
from mindroom.memory.files.fields import parse_fields, render_fields
from mindroom.memory.files.markdown import MemoryEntry, parse_entries
from mindroom.memory.policy.filters import LIVE, Where
from mindroom.memory.search.query import Term, fts_query, parse_query
from mindroom.store.wal import use_wal

logger = logging.getLogger(__name__)

# the version of _SCHEMA: an index written with another one is rebuilt (2: the dates column,
# 3: the entry's fields, 4: its audience)
SCHEMA_VERSION = 4
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, signature TEXT NOT NULL)",
    # fields: the marker's words; category ('' when none is written), importance, pinned,
    # type and updated (the day it last changed, else was written, else its date; '' unknown)
    # as the entry reads with the defaults, for filtering in SQL (see
    # mindroom.memory.policy.filters)
    """CREATE VIRTUAL TABLE IF NOT EXISTS entries USING fts5(
        text, dates, path UNINDEXED, entry_id UNINDEXED, start_line UNINDEXED,
        end_line UNINDEXED, fields UNINDEXED, category UNINDEXED, importance UNINDEXED,
        pinned UNINDEXED, type UNINDEXED, state UNINDEXED, updated UNINDEXED,
        audience UNINDEXED, tokenize = 'porter unicode61'
    )""",
]
# a search waits this long for the index to follow the files, then searches what is indexed
SEARCH_WAIT_SECONDS = 2.0
# rows written in one transaction: searches run between two chunks of a big file
CHUNK_ROWS = 2_000
# a file this big is worth not waiting for (about 6,500 entries); a search always waits for
# smaller ones, so what was just written is found
BIG_FILE_BYTES = 1_000_000
# the columns an entry is rebuilt from, in this order (see _entry)
ENTRY_COLUMNS = "text, path, entry_id, start_line, end_line, fields"


@dataclass(frozen=True)
class SearchHit:
    """One search result: the entry and its score.

    Keyword hits (:meth:`MemoryIndex.search`) score in [0, 1) (normalized BM25); vector hits
    (:meth:`mindroom.memory.search.vectors.VectorIndex.search`) score the cosine similarity in [-1,
    1].
    """

    entry: MemoryEntry
    score: float


@dataclass(frozen=True)
class IndexMark:
    """Where a follower of the index stands: pass it back to :meth:`MemoryIndex.changes`."""

    epoch: int
    versions: dict[str, int]


@dataclass(frozen=True)
class IndexChanges:
    """The entries of every file that changed since a mark (``[]``: the file is gone).

    ``full``: the index was (re)opened or rebuilt since, so ``files`` holds every file and a
    follower should drop what it had.
    """

    mark: IndexMark
    full: bool
    files: dict[str, list[MemoryEntry]]


def query_terms(query: str) -> list[str]:
    """The words a query searches for (its dates aside; see :mod:`mindroom.memory.search.query`)."""
    return [term.key for term in parse_query(query) if not term.is_date]


# consolidation's archive (see :mod:`mindroom.memory.files.archive`): memory that was merged or
# superseded. Kept in the files for people and for restore, never searched or listed.
ARCHIVE_DIR = "memory/archive"


def memory_files(root: Path, *, archive: bool = False) -> Iterator[tuple[str, Path]]:
    """Every markdown file under ``root`` (relative posix path, path); hidden files skipped,
    and the archive unless ``archive``."""
    for relative, full, _ in _scan(str(root), "", skip=() if archive else (ARCHIVE_DIR,)):
        yield relative, Path(full)


def _inside(path: str, root: str) -> bool:
    real_root = os.path.realpath(root)
    return os.path.realpath(path).startswith(real_root + os.sep)


def _scan(
    folder: str, prefix: str, root: str | None = None, skip: tuple[str, ...] = (ARCHIVE_DIR,)
) -> Iterator[tuple[str, str, os.DirEntry[str]]]:
    """(relative path, full path, dir entry) of the markdown files below ``folder``, sorted.

    Plain strings and ``os.scandir``: this runs before every search, so it must be cheap.
    Symlinked folders are not followed, nor the folders in ``skip`` (relative paths).
    """
    root = root or folder
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            if f"{prefix}{entry.name}" not in skip:
                yield from _scan(entry.path, f"{prefix}{entry.name}/", root, skip)
        elif entry.name.endswith(".md") and _is_file(entry):
            if entry.is_symlink() and not _inside(entry.path, root):
                continue  # a link out of the memory folder is not memory
            yield f"{prefix}{entry.name}", entry.path, entry


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a symlink loop: not a memory file
        return False


def _row(relative: str, entry: MemoryEntry) -> tuple[object, ...]:
    fields = entry.fields
    day = fields.updated or fields.created or entry.date
    return (
        entry.text,
        date_words(entry_dates(relative, entry.text)),
        relative,
        entry.id,
        entry.start_line,
        entry.end_line,
        render_fields(fields),
        fields.category or "",
        fields.importance_or_default,
        int(fields.pinned),
        fields.type_in(relative),
        fields.state or "active",
        day.isoformat() if day else "",
        fields.audience or "",
    )


def entry_of(row: tuple[Any, ...]) -> MemoryEntry:
    """The entry of a row selected as :data:`ENTRY_COLUMNS`."""
    text, path, entry_id, start, end, fields = row[:6]
    return MemoryEntry(
        str(entry_id), str(text), str(path), int(start), int(end), parse_fields(fields or "")
    )


def _signature(stat: os.stat_result) -> str:
    """What tells a changed file: an atomic replace makes a new inode even within one clock tick."""
    return f"{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}"


# a per-connection scratch table for TermCounts.held: the same tokenizer as the index
_PROBE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe USING fts5("
    "text, dates, tokenize = 'porter unicode61')"
)


def _create(db: sqlite3.Connection) -> None:
    """Create the tables; an index of another schema version is dropped first (it is derived:
    the next sync indexes every file again)."""
    if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then see it done
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            db.execute("DROP TABLE IF EXISTS entries")
            db.execute("DROP TABLE IF EXISTS files")
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class MemoryIndex:
    """The FTS5 index of one scope's files. Thread-safe; safe across processes (WAL).

    The database connection opens on first use and again on the first use after
    :meth:`close`, so a closed index (e.g. a person's, closed to free descriptors) keeps
    working for whoever still holds it.
    """

    def __init__(self, db_path: Path, root: Path) -> None:
        self.db_path = db_path
        self.root = root
        self._lock = threading.Lock()  # the connection and the in-memory state below
        self._sync_lock = threading.RLock()  # one sync at a time (searches do not take it)
        # the background sync (sync_within): callers take a ticket, the thread serves them
        self._catch_up = threading.Condition()
        self._wanted = 0
        self._served = 0
        self._syncing = False
        self._failure: tuple[int, BaseException] | None = None
        self._big_files = 0  # big files being indexed now
        self.catching_up = False  # the last search did not wait for the index to follow
        self._connection: sqlite3.Connection | None = None
        # what this process last indexed; another process's writes only cost a re-index
        self._signatures: dict[str, str] = {}
        # for followers: the epoch changes when the database is (re)opened or rebuilt, a
        # file's version each time this process (re)indexes it
        self._epoch = 0
        self._counter = 0
        self._versions: dict[str, int] = {}
        # told, before the new rows are committed, the entries of each file it knew that changed
        # (path, entries before, entries now): see mindroom.memory.files.hand_edits
        self.observer: Callable[[str, list[MemoryEntry], list[MemoryEntry]], None] | None = None
        with self._lock:
            self._open()

    @property
    def is_open(self) -> bool:
        """Whether the database connection is open now."""
        return self._connection is not None

    @property
    def _db(self) -> sqlite3.Connection:
        """The open connection (the lock is held): opened again if it was closed."""
        return self._connection or self._open()

    def _open(self) -> sqlite3.Connection:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.db_path, timeout=30, check_same_thread=False)
        try:
            use_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            _create(db)
            # the file may have been deleted or rebuilt while closed: trust only what it holds
            self._signatures = dict(db.execute("SELECT path, signature FROM files").fetchall())
            self._epoch += 1
            self._versions = dict.fromkeys(self._signatures, 0)
        except BaseException:
            db.close()
            raise
        self._connection = db
        return db

    def close(self) -> None:
        """Close the database (the next use opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _index_file(self, relative: str, path: Path, stat: os.stat_result) -> None:
        """Index one file: its old rows dropped first (a search never sees text the file may
        no longer hold), then parsed outside the lock and written in chunks."""
        if stat.st_size < BIG_FILE_BYTES:
            self._write_file(relative, path, stat)
            return
        with self._catch_up:
            self._big_files += 1
            self._catch_up.notify_all()  # a search waiting for the index need wait no more
        try:
            self._write_file(relative, path, stat)
        finally:
            with self._catch_up:
                self._big_files -= 1

    def _write_file(self, relative: str, path: Path, stat: os.stat_result) -> None:
        baseline = self._drop(relative)
        try:
            with path.open(encoding="utf-8", errors="replace", newline="") as handle:
                text = handle.read()  # as the store reads it: only "\n" ends a line
        except FileNotFoundError:
            text = ""
        entries = parse_entries(text, relative)
        if baseline is not None and self.observer is not None:
            # recorded before the new rows commit: a crash in between leaves the file unknown
            # to the index (its row went with its entries), so nothing is derived twice
            self.observer(relative, baseline, entries)
        rows = [_row(relative, e) for e in entries]
        insert = (
            "INSERT INTO entries (text, dates, path, entry_id, start_line, end_line, fields,"
            " category, importance, pinned, type, state, updated, audience)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        for start in range(0, len(rows), CHUNK_ROWS):
            with self._lock, self._db as db:
                db.executemany(insert, rows[start : start + CHUNK_ROWS])
        signature = _signature(stat)
        with self._lock, self._db as db:
            db.execute(
                "INSERT OR REPLACE INTO files (path, signature) VALUES (?, ?)",
                (relative, signature),
            )
            self._signatures[relative] = signature
            self._counter += 1
            self._versions[relative] = self._counter

    def _drop(self, relative: str) -> list[MemoryEntry] | None:
        """Drop file ``relative``'s rows and its signature in one transaction (a search never
        sees text the file may no longer hold); the entries it had, when it was indexed (the
        baseline the observer compares with), else None.

        The signature is read from the database, not this process's copy: another process
        that dropped the rows dropped the signature with them, so this one never takes an
        emptied file for a file whose entries were all removed."""
        with self._lock, self._db as db:
            known = db.execute("SELECT 1 FROM files WHERE path = ?", (relative,)).fetchone()
            baseline = None
            if known is not None and self.observer is not None:
                rows = db.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM entries WHERE path = ? ORDER BY start_line",
                    (relative,),
                ).fetchall()
                baseline = [entry_of(row) for row in rows]
            db.execute("DELETE FROM entries WHERE path = ?", (relative,))
            db.execute("DELETE FROM files WHERE path = ?", (relative,))
            self._signatures.pop(relative, None)
        return baseline

    def _stale(self) -> tuple[list[tuple[str, Path, os.stat_result]], list[str]]:
        """The files changed since they were indexed, and the indexed files now gone."""
        with self._lock:
            self._db  # noqa: B018 (first: reopening reloads what the file says is indexed)
            stale: list[tuple[str, Path, os.stat_result]] = []
            present = set()
            for relative, full, entry in _scan(str(self.root), ""):
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue
                present.add(relative)
                if self._signatures.get(relative) != _signature(stat):
                    stale.append((relative, Path(full), stat))
            return stale, [path for path in self._signatures if path not in present]

    def sync(self) -> int:
        """Bring the index up to the files, waiting for it; returns how many files were
        (re)indexed or dropped."""
        with self._sync_lock:
            stale, gone = self._stale()
            for relative, path, stat in stale:
                self._index_file(relative, path, stat)
            for relative in gone:
                baseline = self._drop(relative)
                if baseline is not None and self.observer is not None:
                    self.observer(relative, baseline, [])  # a file removed by hand
                self._versions.pop(relative, None)
            return len(stale) + len(gone)

    def sync_within(self, seconds: float) -> bool:
        """Follow the files, waiting at most ``seconds`` once a big file (:data:`BIG_FILE_BYTES`)
        is being indexed, else until done: True when the index is up to date (as of this call),
        False when a background thread is still at it (the caller then searches what is
        indexed; :attr:`catching_up` says so until a search finds it done).

        One thread per index does the work and passes again while calls keep arriving, so a
        file changed during a pass is indexed by the next. Its failure is raised here.
        """
        with self._catch_up:
            self._wanted += 1
            ticket = self._wanted
            if not self._syncing:
                self._syncing = True
                name = f"index-sync {self.root}"
                threading.Thread(target=self._catch_up_loop, name=name, daemon=True).start()
            deadline = time.monotonic() + seconds
            while self._served < ticket:
                left = deadline - time.monotonic()
                if left <= 0 and self._big_files:
                    break
                self._catch_up.wait(max(left, 0.1))
            done = self._served >= ticket
            failure = self._failure
        self.catching_up = not done
        if done and failure is not None and failure[0] >= ticket:
            raise failure[1]
        if not done:
            logger.info("index of %s is catching up; searching what is indexed", self.root)
        return done

    def _catch_up_loop(self) -> None:
        """The background sync: pass until no call arrived during the last pass."""
        while True:
            with self._catch_up:
                target = self._wanted
            failure: BaseException | None = None
            try:
                self.sync()
            except Exception as exc:  # the callers waiting get it; the next call tries again
                logger.warning("syncing the index of %s failed: %s", self.root, exc)
                failure = exc
            with self._catch_up:
                self._served = target
                self._failure = (target, failure) if failure is not None else None
                self._catch_up.notify_all()
                if self._wanted == target:
                    self._syncing = False
                    return

    def rebuild(self) -> int:
        """Forget everything and index every file again; returns the number of entries."""
        with self._sync_lock:
            with self._lock, self._db:
                self._db.execute("DELETE FROM entries")
                self._db.execute("DELETE FROM files")
                self._signatures.clear()
                self._versions.clear()
                self._epoch += 1
            self.sync()
        return self.count()

    def count(self) -> int:
        """How many entries are indexed."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])

    def search(
        self,
        query: str,
        limit: int = 5,
        *,
        exclude_paths: frozenset[str] = frozenset(),
        now: dt.datetime | None = None,
        synced: bool = False,
        where: Where | None = None,
    ) -> list[SearchHit]:
        """The best ``limit`` entries for ``query`` that ``where`` holds (after following the
        files for up to :data:`SEARCH_WAIT_SECONDS`, unless the caller just did: ``synced``);
        ``now`` resolves relative dates such as "yesterday" (default: the clock)."""
        if not synced:
            self.sync_within(SEARCH_WAIT_SECONDS)
        where = where or LIVE.where()
        terms = parse_query(query, now)
        if not terms or limit <= 0:
            return []
        excluded = sorted(exclude_paths)
        not_in = f" AND path NOT IN ({', '.join('?' * len(excluded))})" if excluded else ""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {ENTRY_COLUMNS}, bm25(entries) AS rank"
                f" FROM entries WHERE entries MATCH ?{not_in}{where.sql}"
                " ORDER BY rank LIMIT ?",
                (fts_query(terms), *excluded, *where.args, limit),
            ).fetchall()
        hits = []
        for row in rows:
            strength = max(0.0, -float(row[-1]))
            hits.append(SearchHit(entry_of(row), strength / (1 + strength)))
        return hits[:limit]

    def select(self, where: Where, limit: int, *, synced: bool = False) -> list[MemoryEntry]:
        """Entries ``where`` holds, most recently changed first (no query: a filter only)."""
        if not synced:
            self.sync()
        with self._lock:
            rows = self._db.execute(
                f"SELECT {ENTRY_COLUMNS} FROM entries WHERE 1{where.sql}"
                " ORDER BY updated DESC, path DESC, start_line LIMIT ?",
                (*where.args, limit),
            ).fetchall()
        return [entry_of(row) for row in rows]

    def changes(self, since: IndexMark | None) -> IndexChanges:
        """The entries of the files (re)indexed or dropped since ``since`` (all when None).

        Reads the index as it is (call :meth:`sync` first to follow the files). Consecutive
        calls with the returned mark see every change exactly once.
        """
        with self._lock:
            db = self._db  # first: reopening starts a new epoch
            mark = IndexMark(self._epoch, dict(self._versions))
            select = f"SELECT {ENTRY_COLUMNS} FROM entries"
            files: dict[str, list[MemoryEntry]]
            if since is None or since.epoch != mark.epoch:
                full, files = True, {path: [] for path in mark.versions}
                rows = db.execute(select).fetchall()
            else:
                changed = [p for p, v in mark.versions.items() if since.versions.get(p) != v]
                gone = [p for p in since.versions if p not in mark.versions]
                full, files = False, {path: [] for path in [*changed, *gone]}
                marks = ", ".join("?" * len(changed))
                query = f"{select} WHERE path IN ({marks})"
                rows = db.execute(query, changed).fetchall() if changed else []
        for row in rows:
            entry = entry_of(row)
            files.setdefault(entry.path, []).append(entry)
        for entries in files.values():
            entries.sort(key=lambda e: e.start_line)
        return IndexChanges(mark, full, files)

    def locate(self, entry_id: str) -> list[str]:
        """Files that hold ``entry_id`` as of the last sync."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT path FROM entries WHERE entry_id = ?", (entry_id,)
            ).fetchall()
        return [row[0] for row in rows]

    def snapshot(self) -> list[tuple[str, str, str, int, int]]:
        """Every indexed row, sorted: for comparing an incremental index with a rebuild."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path, entry_id, text, start_line, end_line FROM entries"
            ).fetchall()
        return sorted((r[0], r[1], r[2], int(r[3]), int(r[4])) for r in rows)

    def term_counts(self, terms: list[Term], entries: list[MemoryEntry]) -> TermCounts:
        """How many indexed entries hold each term, and which terms each of ``entries`` holds.

        For judging hits (see :mod:`mindroom.memory.search.relevance`). The entries are matched in a
        scratch table with the index's own tokenizer, so a term holds where search matched it
        (stems, dates) and checking a few hits costs nothing next to the search itself.
        """
        with self._lock:
            db = self._db
            # FTS5's own table of one row per entry: counting it is a b-tree count, not a scan
            total = int(db.execute("SELECT count(*) FROM entries_docsize").fetchone()[0])
            frequency = {
                term.key: int(
                    db.execute(
                        "SELECT count(*) FROM entries WHERE entries MATCH ?", (term.expression,)
                    ).fetchone()[0]
                )
                for term in terms
            }
            db.execute(_PROBE)
            try:
                db.executemany(
                    "INSERT INTO temp.probe (rowid, text, dates) VALUES (?, ?, ?)",
                    [
                        (n, e.text, date_words(entry_dates(e.path, e.text)))
                        for n, e in enumerate(entries)
                    ],
                )
                held: list[set[str]] = [set() for _ in entries]
                for term in terms:
                    for (n,) in db.execute(
                        "SELECT rowid FROM temp.probe WHERE probe MATCH ?", (term.expression,)
                    ):
                        held[n].add(term.key)
            finally:
                db.execute("DELETE FROM temp.probe")
                db.commit()
        return TermCounts(total, frequency, [frozenset(h) for h in held])


@dataclass(frozen=True)
class TermCounts:
    """``total`` entries are indexed, ``frequency[key]`` of them hold term ``key``, and
    ``held[n]`` names the terms the n-th entry asked about holds."""

    total: int
    frequency: dict[str, int]
    held: list[frozenset[str]]
