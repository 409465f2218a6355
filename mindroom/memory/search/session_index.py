"""Past conversations of one scope as a searchable memory source. Derived data, rebuildable.

A copy of the user and assistant messages of the scope's sessions, which live in the agents
layer's session store: deleting the database loses nothing, the next sync fills it again. The
caller passes plain :class:`TranscriptMessage` values; this module never reads the store.

Each session reads as a synthetic file ``sessions/<name>.jsonl`` (:func:`transcript_path`), one
JSON line per kept message, read like a memory file (:meth:`SessionIndex.read`). Search ranks
*spans* of lines (:func:`spans`: a turn) by BM25 as :mod:`mindroom.memory.search.index` does, the
dates column holding the days the messages were written. A cursor per session (how many of its
messages were given, kept or not) makes :meth:`SessionIndex.append` a delta sync.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.dates import MAX_ENTRY_DATES, date_words, written_dates
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.search.index import SearchHit
from mindroom.memory.search.query import fts_query, parse_query
from mindroom.store.wal import open_database

SCHEMA_VERSION = 2  # 2: the sessions' audience
_SCHEMA = [
    # messages: the cursor (messages given, kept or not); lines: the transcript's length;
    # audience: who could read the conversation (mindroom.memory.policy.audience; '' unknown)
    "CREATE TABLE sessions (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL UNIQUE,"
    " name TEXT NOT NULL UNIQUE, messages INTEGER NOT NULL, lines INTEGER NOT NULL,"
    " audience TEXT NOT NULL DEFAULT '')",
    "CREATE TABLE lines (session INTEGER NOT NULL, line INTEGER NOT NULL, json TEXT NOT NULL,"
    " PRIMARY KEY (session, line)) WITHOUT ROWID",
    "CREATE TABLE spans (id INTEGER PRIMARY KEY, session INTEGER NOT NULL,"
    " start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, UNIQUE (session, start_line))",
    # one row per span, rowid = spans.id
    "CREATE VIRTUAL TABLE span_text USING fts5(text, dates, tokenize = 'porter unicode61')",
]
KEPT_ROLES = ("user", "assistant")
MAX_SPAN_LINES = 6  # a long run of answers (a team's) is cut into spans of this many lines
MAX_READ_LINES = 400  # as mindroom.memory.files.store.MAX_READ_LINES
TRANSCRIPT_DIR = "sessions"
MAX_NAME = 150  # longer names are a prefix and a hash
_FORGET = [
    "DELETE FROM span_text WHERE rowid IN (SELECT id FROM spans WHERE session = ?)",
    "DELETE FROM spans WHERE session = ?",
    "DELETE FROM lines WHERE session = ?",
    "DELETE FROM sessions WHERE id = ?",
]


@dataclass(frozen=True)
class TranscriptMessage:
    """One message of a conversation: ``role`` (only ``user`` and ``assistant`` are indexed),
    its text, the Matrix user who wrote it (None: unknown or not a person) and its Unix time."""

    role: str
    text: str
    user_id: str | None
    at: float


# -- pure helpers ------------------------------------------------------------------------------


def session_name(session_id: str) -> str:
    """The file name (without ``.jsonl``) of a session: letters, digits and ``-_.`` kept, every
    other UTF-8 byte as ``%XX`` (a leading ``.`` too: no hidden or ``..`` names), so it
    decodes back (:func:`decode_session_name`). A name over :data:`MAX_NAME` characters is its
    first 128, ``~`` and 16 hex of a hash (``~`` is escaped in every other name). Raises
    ValueError for an empty id."""
    if not session_id:
        raise ValueError("a session id is empty")
    name = quote(session_id, safe="", errors="surrogatepass").replace("~", "%7E")
    name = "%2E" + name[1:] if name.startswith(".") else name
    if len(name) <= MAX_NAME:
        return name
    prefix = name[:128]
    cut = prefix.rfind("%", len(prefix) - 2)  # never end inside an escape
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{prefix[:cut] if cut >= 0 else prefix}~{digest}"


def decode_session_name(name: str) -> str | None:
    """The session id of a name from :func:`session_name` (None: a hashed long name)."""
    return None if "~" in name else unquote_to_bytes(name).decode("utf-8", "surrogatepass")


def transcript_path(session_id: str) -> str:
    """The synthetic path of a session's transcript: ``sessions/<name>.jsonl``."""
    return f"{TRANSCRIPT_DIR}/{session_name(session_id)}.jsonl"


def is_transcript_path(path: str) -> bool:
    """Whether ``path`` names a transcript (not a memory file)."""
    return path.startswith(f"{TRANSCRIPT_DIR}/") and path.endswith(".jsonl")


def transcript_line(message: TranscriptMessage) -> str | None:
    """The JSON line of a message (None: not kept, a tool or system message or no text)."""
    text = message.text.strip()
    if message.role not in KEPT_ROLES or not text:
        return None
    at = dt.datetime.fromtimestamp(message.at, dt.UTC).isoformat(timespec="seconds")
    record = {"role": message.role, "user_id": message.user_id, "at": at, "text": text}
    return json.dumps(record, ensure_ascii=False)


def render_line(line: str) -> str:
    """A transcript line as a hit shows it: ``@user: text``, ``user: text``, ``assistant: ...``."""
    record = json.loads(line)
    who, user = record["role"], record.get("user_id")
    if who == "user" and user:
        who = user if user.startswith("@") else f"@{user}"
    return f"{who}: {record['text']}"


def spans(roles: Sequence[str]) -> list[tuple[int, int]]:
    """The spans (first, last; 0-based) of lines with ``roles``: a turn, that is user lines
    and the lines after them up to the next user line, at most :data:`MAX_SPAN_LINES` (lines
    before the first user line are a span too). They cover every line once, and the spans from
    a span's start on ignore the lines before it: a sync recomputes only the last span."""
    found: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(roles) + 1):
        turn = index < len(roles) and roles[index] == "user" and roles[index - 1] != "user"
        if index == len(roles) or turn or index - start >= MAX_SPAN_LINES:
            found.append((start, index - 1))
            start = index
    return found


def span_id(session_id: str, start_line: int) -> str:
    """The entry id of a span: ``s-`` and 8 hex, stable for a session and start line."""
    data = f"{session_id}\0{start_line}".encode("utf-8", "surrogatepass")
    return "s-" + hashlib.sha256(data).hexdigest()[:8]


def _among(audiences: frozenset[str] | None) -> tuple[str, list[str]]:
    """The SQL condition (`` AND s.audience IN (...)``) keeping the sessions of ``audiences``."""
    if audiences is None:
        return "", []
    if not audiences:
        return " AND 1 = 0", []
    return f" AND s.audience IN ({', '.join('?' * len(audiences))})", sorted(audiences)


def _span_row(lines: Sequence[str]) -> tuple[str, str]:
    """The text and dates columns of a span of transcript lines (dates: the local days the
    messages were written, then the dates written in them)."""
    text = "\n".join(render_line(line) for line in lines)
    days = [dt.datetime.fromisoformat(json.loads(line)["at"]).astimezone().date() for line in lines]
    dates = list(dict.fromkeys([*days, *written_dates(text)]))[:MAX_ENTRY_DATES]
    return text, date_words(dates)


# -- the index ---------------------------------------------------------------------------------


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")  # writers in other processes wait (busy timeout)
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _open(path: Path) -> sqlite3.Connection:
    """The database; one of another schema version is dropped and made again (it is derived)."""
    db = open_database(path, "")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            with _transaction(db):  # one process migrates, the others wait and see it done
                if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    for table in ("span_text", "spans", "lines", "sessions"):
                        db.execute(f"DROP TABLE IF EXISTS {table}")
                    for statement in [*_SCHEMA, f"PRAGMA user_version = {SCHEMA_VERSION}"]:
                        db.execute(statement)
    except BaseException:
        db.close()
        raise
    return db


def _respan(db: sqlite3.Connection, key: int, total: int) -> None:
    """Recompute the spans of session ``key`` from its last span on (new lines may extend it)."""
    (last,) = db.execute("SELECT max(start_line) FROM spans WHERE session = ?", (key,)).fetchone()
    first = last or 1
    stale = "SELECT id FROM spans WHERE session = ? AND start_line >= ?"
    db.execute(f"DELETE FROM span_text WHERE rowid IN ({stale})", (key, first))
    db.execute("DELETE FROM spans WHERE session = ? AND start_line >= ?", (key, first))
    select = "SELECT json FROM lines WHERE session = ? AND line BETWEEN ? AND ? ORDER BY line"
    lines = [line for (line,) in db.execute(select, (key, first, total))]
    for a, b in spans([json.loads(line)["role"] for line in lines]):
        (span,) = db.execute(
            "INSERT INTO spans (session, start_line, end_line) VALUES (?, ?, ?) RETURNING id",
            (key, first + a, first + b),
        ).fetchone()
        row = (span, *_span_row(lines[a : b + 1]))
        db.execute("INSERT INTO span_text (rowid, text, dates) VALUES (?, ?, ?)", row)


class SessionIndex:
    """The transcripts of one scope's conversations. Thread-safe (a lock around one
    connection), safe across processes (WAL; writes re-read the cursor in a transaction).
    The database opens on first use, and again on the first use after :meth:`close`."""

    transcript_path = staticmethod(transcript_path)

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        """The open connection (the lock is held)."""
        if self._connection is None:
            self._connection = _open(self.db_path)
        return self._connection

    def _all(self, sql: str, *args: object) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._db
            with _transaction(db):
                yield db

    def close(self) -> None:
        """Close the database (the next use opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def indexed(self, session_id: str) -> int:
        """How many messages of the session were given so far (kept or not): the cursor."""
        rows = self._all("SELECT messages FROM sessions WHERE session_id = ?", session_id)
        return int(rows[0][0]) if rows else 0

    def audience(self, session_id: str) -> str | None:
        """The audience word the session's indexed lines have; None when none is recorded (not
        indexed yet, or indexed before audiences were)."""
        rows = self._all("SELECT audience FROM sessions WHERE session_id = ?", session_id)
        return str(rows[0][0]) or None if rows else None

    def append(
        self,
        session_id: str,
        messages: Sequence[TranscriptMessage],
        *,
        start: int,
        audience: str | None = None,
    ) -> int:
        """Index those of the session's messages ``start``.. (``messages``) that follow the
        cursor; returns how many transcript lines were added (user and assistant messages with
        text). The same range twice adds nothing. Raises ValueError when ``start`` is past the
        cursor: a transcript with a silent gap would misread the conversation. ``audience``:
        the conversation's audience word, when given."""
        name = session_name(session_id)
        with self._writing() as db:
            if audience is not None:
                db.execute(
                    "UPDATE sessions SET audience = ? WHERE session_id = ?", (audience, session_id)
                )
            row = db.execute(
                "SELECT id, messages, lines FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            key, cursor, count = row if row else (None, 0, 0)
            if start < 0 or start > cursor:
                raise ValueError(
                    f"session {session_id!r} is indexed up to message {cursor}:"
                    f" append from there, not from {start}"
                )
            fresh = messages[cursor - start :]
            if not fresh:
                return 0
            if key is None:
                (key,) = db.execute(
                    "INSERT INTO sessions (session_id, name, messages, lines, audience)"
                    " VALUES (?, ?, 0, 0, ?) RETURNING id",
                    (session_id, name, audience or ""),
                ).fetchone()
            kept = [line for line in map(transcript_line, fresh) if line is not None]
            db.executemany(
                "INSERT INTO lines (session, line, json) VALUES (?, ?, ?)",
                [(key, count + n, line) for n, line in enumerate(kept, 1)],
            )
            if kept:
                _respan(db, key, count + len(kept))
            db.execute(
                "UPDATE sessions SET messages = ?, lines = ? WHERE id = ?",
                (cursor + len(fresh), count + len(kept), key),
            )
        return len(kept)

    def search(
        self,
        query: str,
        limit: int = 5,
        *,
        now: dt.datetime | None = None,
        audiences: frozenset[str] | None = None,
    ) -> list[SearchHit]:
        """The best ``limit`` spans for ``query`` (its words ORed, its dates against the days
        the messages were written; ``now`` resolves "yesterday"), scores in [0, 1), of the
        conversations whose audience word is among ``audiences`` (None: every one)."""
        terms = parse_query(query, now)
        if not terms or limit <= 0:
            return []
        among, words = _among(audiences)
        scoped = (  # the sessions' audience, when the read has one
            " JOIN spans AS q ON q.id = span_text.rowid JOIN sessions AS s ON s.id = q.session"
            if audiences is not None
            else ""
        )
        rows = self._all(
            "SELECT s.session_id, s.name, p.start_line, p.end_line, hit.text, hit.rank"
            " FROM (SELECT span_text.rowid AS rowid, text, bm25(span_text) AS rank"
            f"  FROM span_text{scoped} WHERE span_text MATCH ?{among} ORDER BY rank LIMIT ?)"
            " AS hit JOIN spans AS p ON p.id = hit.rowid JOIN sessions AS s ON s.id = p.session"
            " ORDER BY hit.rank",
            fts_query(terms),
            *words,
            limit,
        )
        hits = []
        for session_id, name, start, end, text, rank in rows:
            path = f"{TRANSCRIPT_DIR}/{name}.jsonl"
            entry = MemoryEntry(span_id(session_id, start), text, path, start, end)
            strength = max(0.0, -float(rank))
            hits.append(SearchHit(entry, strength / (1 + strength)))
        return hits

    def read(
        self,
        path: str,
        from_line: int = 1,
        lines: int = 100,
        audiences: frozenset[str] | None = None,
    ) -> str:
        """Numbered lines ``from_line``.. of a transcript, as ``FileMemory.read_file_sync``
        reads a memory file. Raises MemoryStoreError for a path of no indexed session, or of
        one whose audience word is not among ``audiences`` (None: every one), alike."""
        name = path[len(TRANSCRIPT_DIR) + 1 : -len(".jsonl")] if is_transcript_path(path) else ""
        start = max(1, from_line)
        count = max(1, min(lines, MAX_READ_LINES))
        among, words = _among(audiences)
        rows = self._all(  # one query: the lines and their count agree
            "SELECT s.lines, l.json FROM sessions AS s LEFT JOIN lines AS l"
            " ON l.session = s.id AND l.line BETWEEN ? AND ?"
            f" WHERE s.name = ?{among} ORDER BY l.line",
            start,
            start + count - 1,
            name,
            *words,
        )
        if not rows:
            raise MemoryStoreError(f"no session transcript {path!r}")
        total = int(rows[0][0])
        chosen = [line for _, line in rows if line is not None]
        body = "\n".join(f"{n:>5}  {line}" for n, line in enumerate(chosen, start))
        rest = total - (start - 1 + len(chosen))
        more = f"\n({rest} more lines after this)" if rest > 0 else ""
        span = f"lines {start}-{start + len(chosen) - 1} of {total}"
        return f"{TRANSCRIPT_DIR}/{name}.jsonl ({span}):\n{body}{more}"

    def forget(self, session_id: str) -> bool:
        """Drop a session's transcript and cursor; False when it was not indexed."""
        with self._writing() as db:
            row = db.execute("SELECT id FROM sessions WHERE session_id = ?", (session_id,))
            key = row.fetchone()
            for statement in _FORGET if key else []:
                db.execute(statement, key)
        return key is not None

    def sessions(self) -> list[tuple[str, int]]:
        """Every indexed session and its cursor (messages given), by session id."""
        rows = self._all("SELECT session_id, messages FROM sessions ORDER BY session_id")
        return [(str(session_id), int(messages)) for session_id, messages in rows]

    def count(self) -> int:
        """How many spans are searchable."""
        return int(self._all("SELECT count(*) FROM spans")[0][0])
