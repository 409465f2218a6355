"""One map of a person's data: every store that can hold what a person said or what is known
about them, and how to list, export and erase that person's part of it.

The map is this module's :data:`STORES`, kept in one place on purpose: a reader sees every
store side by side, export and forget-me (``mindroom memory export|forget --user``, the ``/me``
download and its forget button) enumerate it and nothing else, and the structural test
(``tests/unit/test_person_data.py``) checks that every module that opens a database or writes a
JSONL file is named by a store here (:attr:`PersonStore.modules`) or in :data:`NOT_PERSONAL`
with the reason. A store added without registering itself fails that test.

A person is their Matrix ID; their private folder is ``private_instances/<requester_key>``.

* ``private_folder``: everything under that folder is theirs alone: each private companion's
  memory files (live, TTL-expired, archived), their history, indexes and vectors, consent
  proposals, insights and consolidation records, deltas, relations, events, the session index
  of past conversations, mem0's op log, and the Agno session and learning databases. Export
  reads every file; erase removes the folder.
* ``mem0_private``: the person's private scopes on the mem0 backend live in the shared mem0
  store (``mindroom_data/mem0``): their memories, and mem0's change history of those ids.
* ``mem0_shared``: shared agents' and teams' mem0 memories that name the person or hold their
  words, and the lines of theirs mem0 keeps (it is shown ``<matrix id>: text``).
* ``shared_memory``: in shared agents' and teams' memories, the entries that name the person's
  Matrix ID or were written in a conversation where the person spoke (the history's ``run``),
  with their history records, consent proposals, insights and events about them, and the
  closed rooms of the scope's ``audiences.json`` that count them among their readers (export
  shows those rooms; erase takes the person's ID out of them, which only narrows where the
  entries learned there may be recalled). The person's own download (``/me``) holds only what
  their direct chat could show them (so does its ``session_index`` part); an admin's export
  and erasure cover all of it.
* ``shared_sessions``: the shared agents' and teams' Agno session stores (transcripts) and
  learning stores: the runs the person started, and their words wherever else they were copied
  in those stores (a compaction summary, another run's reply).
* ``session_index``: the shared scopes' index of past conversations (``transcripts.db``):
  derived from the session stores, so erasing drops it (the next sync rebuilds it from the
  redacted transcripts).
* ``ledger``: the ledger's rows keyed by the person (their conversations, flush state, the
  appservice inbox's copies of their events, their ``!memory forget`` requests).
* ``maintenance_runs``: a maintenance run's summary or stats naming one of the person's private
  scopes (their folder key).
* ``dashboard_sessions``: a ``/me`` session is a signed cookie held by the browser; the server
  stores nothing of it.

Erasure removes bytes, not only rows: after deleting, every SQLite file touched is scrubbed
(:func:`scrub_sqlite`: FTS5 tables optimized so no segment keeps a deleted token, ``VACUUM`` so
no free page keeps a deleted row, the WAL checkpointed and truncated); files are rewritten
atomically or removed.

With ``storage.database`` (PostgreSQL) the stores cover their rows there too, judged the same
way (:mod:`mindroom.people.postgres`): ``private_folder`` drops the schemas of the person's own Agno
stores and their private scopes' rows of the search index (``memory_search``);
``shared_sessions`` deletes their runs and learning rows in the shared agents' and teams'
schemas and redacts their words elsewhere there; ``shared_memory`` drops the search index's
rows of the entries it erased (derived: the next sync copies those files again, already
erased); ``ledger`` and ``maintenance_runs`` do in their tables what they do in their SQLite
files. Only mindroom's own tables are read or changed: the session stores' schemas and the
tables the ledger, the search index and the maintenance schedule create (read from their
schema statements); another application's table in the same database is left alone.
Every table touched is rewritten (``VACUUM FULL``), so no dead tuple, free space or
index entry keeps an erased row in the database's files. What remains possible there: the
write-ahead log (``pg_wal``, any WAL archive or replica) keeps the changes that once wrote the
text until its segments are recycled, and backups keep what they copied; like the logs (the
process's standard error), they belong to whoever runs the database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindroom.atomic import atomic_write
from mindroom.config.schema import Config
from mindroom.errors import EmbedderError
from mindroom.memory.private import PRIVATE_DIR, requester_key
from mindroom.memory.registry import MemoryRegistry

logger = logging.getLogger(__name__)

FORGOTTEN = "[forgotten]"  # what replaces a person's words copied into a shared store
DELETED = "[deleted by the person]"  # what replaces a fact a person deleted, in transcripts
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
MIN_LINE = 12  # a shorter line of a person's words is too common to be redacted by itself
OWNER_COLUMNS = frozenset({"user_id", "requester", "sender"})  # a column naming a row's person
LIVE_LIMIT = 1_000_000  # every live entry of a scope (:func:`entries_about`)
_TEXT_READ_LIMIT = 50_000_000  # a file bigger than this is named in the export, not inlined


@dataclass(frozen=True)
class Person:
    """Whose data: the Matrix ID and the key of their private folder."""

    user_id: str

    @property
    def key(self) -> str:
        """The folder name of the person's private data (:func:`requester_key`)."""
        return requester_key(self.user_id)


@dataclass
class MapContext:
    """What the stores work on: the config, the storage root and its open memories."""

    config: Config
    storage: Path
    registry: MemoryRegistry
    # what of the person's is spread over shared stores (:func:`learn`, once per run)
    learned: bool = False
    words: set[str] = field(default_factory=set)  # their messages' texts
    sessions: set[str] = field(default_factory=set)  # the conversations they spoke in
    entries: dict[str, list[Any]] = field(default_factory=dict)  # shared scope -> their entries
    common: set[str] = field(default_factory=set)  # lines other people wrote too
    # the person's own download (/me): only what they could be shown (:func:`_shared_export`);
    # False: an admin's export (the CLI), everything the map holds
    for_person: bool = False

    @property
    def data_dir(self) -> Path:
        return self.storage / "mindroom_data"

    def home(self, person: Person) -> Path:
        """The person's private folder."""
        return self.storage / PRIVATE_DIR / person.key


@dataclass(frozen=True)
class PersonStore:
    """One store of the map: where it lives and how to list, export and erase a person's part.

    ``claims`` are glob patterns under the storage root of the files the store covers;
    ``modules`` the modules whose databases or files it covers (checked by the structural
    test). ``list`` names where the person's part is, ``export`` returns it as JSON data,
    ``erase`` removes it and returns how many items went.
    """

    name: str
    what: str
    claims: tuple[str, ...]
    modules: tuple[str, ...]
    list: Callable[[MapContext, Person], list[str]]
    export: Callable[[MapContext, Person], Any]
    erase: Callable[[MapContext, Person], int]


# -- SQLite helpers ------------------------------------------------------------------------------


@contextlib.contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        db.execute("PRAGMA busy_timeout=30000")
        db.execute("PRAGMA secure_delete=ON")  # deleted rows' bytes are zeroed on their page
        yield db
    finally:
        db.close()


def _tables(db: sqlite3.Connection) -> list[tuple[str, bool]]:
    """``(name, is_fts5)`` of every table that holds rows (FTS5 shadow tables left out: they
    are the FTS5 table's own, reached through it)."""
    rows = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    fts = [name for name, sql in rows if sql and "using fts5" in sql.lower()]
    shadows = {
        f"{name}_{part}" for name in fts for part in ("data", "idx", "content", "docsize", "config")
    }
    return [
        (name, name in fts)
        for name, _ in rows
        if name not in shadows and not name.startswith("sqlite_")
    ]


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]


def _condition(columns: list[str], needles: list[str]) -> tuple[str, list[str]]:
    """A WHERE clause true for a row with a value containing one of ``needles``."""
    condition = " OR ".join(f'instr(CAST("{c}" AS TEXT), ?) > 0' for c in columns for _ in needles)
    return condition, [n for _ in columns for n in needles]


def _matching_rows(db: sqlite3.Connection, table: str, needles: list[str]) -> list[dict[str, Any]]:
    """The rows of ``table`` with a text value containing one of ``needles``."""
    columns = _columns(db, table)
    if not columns or not needles:
        return []
    condition, args = _condition(columns, needles)
    cursor = db.execute(f'SELECT * FROM "{table}" WHERE {condition}', args)
    return [_plain(dict(zip(columns, row, strict=False))) for row in cursor]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON data (blobs: vectors and the like, named by size)."""
    return {
        k: (f"<{len(v)} bytes>" if isinstance(v, bytes | memoryview) else v) for k, v in row.items()
    }


def rows_naming(path: Path, needles: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every row of the SQLite file ``path`` holding one of ``needles``, by table."""
    if not path.is_file():
        return {}
    with _connect(path) as db:
        found = {t: _matching_rows(db, t, needles) for t, _ in _tables(db)}
    return {t: rows for t, rows in found.items() if rows}


def delete_rows_naming(path: Path, needles: list[str]) -> int:
    """Delete every row of ``path`` holding one of ``needles``; scrubs the file."""
    if not path.is_file() or not needles:
        return 0
    removed = 0
    with _connect(path) as db:
        for table, _ in _tables(db):
            columns = _columns(db, table)
            if columns:
                condition, args = _condition(columns, needles)
                cursor = db.execute(f'DELETE FROM "{table}" WHERE {condition}', args)
                removed += max(cursor.rowcount, 0)
    if removed:
        scrub_sqlite(path)
    return removed


def replace_text(path: Path, words: set[str], replacement: str) -> int:
    """Replace each of ``words`` (and its JSON-escaped form) by ``replacement`` in every text
    value of ``path``; returns how many rows changed. Scrubs the file when one did."""
    needles = _with_json_forms(words, replacement)
    if not path.is_file() or not needles:
        return 0
    changed = 0
    with _connect(path) as db:
        for table, _ in _tables(db):
            columns = _columns(db, table)
            for column in columns:
                for needle, instead in needles:
                    cursor = db.execute(
                        f'UPDATE "{table}" SET "{column}" = replace("{column}", ?, ?) '
                        f'WHERE typeof("{column}") = \'text\' AND instr("{column}", ?) > 0',
                        (needle, instead, needle),
                    )
                    changed += max(cursor.rowcount, 0)
    if changed:
        scrub_sqlite(path)
    return changed


def _with_json_forms(words: set[str], replacement: str) -> list[tuple[str, str]]:
    """``(needle, replacement)`` pairs: each word as is and as it appears inside JSON text."""
    pairs: dict[str, str] = {}
    for word in sorted(words, key=len, reverse=True):  # longest first: no partial leftovers
        if len(word.strip()) < 4:
            continue  # a word this short would rewrite unrelated text
        pairs[word] = replacement
        for escaped in (json.dumps(word)[1:-1], json.dumps(word, ensure_ascii=False)[1:-1]):
            pairs[escaped] = json.dumps(replacement)[1:-1]
    return list(pairs.items())


def scrub_sqlite(path: Path) -> None:
    """Make deleted data unrecoverable from ``path``: optimize its FTS5 tables (a delete leaves
    the token in an older segment until merged), rebuild the file (``VACUUM``: no free page
    keeps a deleted row) and checkpoint and truncate its WAL."""
    if not path.is_file():
        return
    with _connect(path) as db:
        for table, fts in _tables(db):
            if fts:
                try:
                    db.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'optimize\')')
                except sqlite3.DatabaseError as exc:
                    logger.warning("%s: FTS table %s not optimized: %s", path, table, exc)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def dump_sqlite(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table of ``path`` (a person's own database, exported whole)."""
    with _connect(path) as db:
        out: dict[str, list[dict[str, Any]]] = {}
        for table, _ in _tables(db):
            columns = _columns(db, table)
            rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
            out[table] = [_plain(dict(zip(columns, row, strict=False))) for row in rows]
    return out


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def read_any(path: Path) -> Any:
    """A file of a person's own folder as JSON data: SQLite as its rows, text as text."""
    if path.name.endswith(("-wal", "-shm", "-journal")):
        return "(part of the database beside it)"
    if _is_sqlite(path):
        try:
            return dump_sqlite(path)
        except sqlite3.DatabaseError as exc:
            return f"(unreadable database: {exc})"
    if path.stat().st_size > _TEXT_READ_LIMIT:
        return f"(a file of {path.stat().st_size} bytes: ask whoever runs mindroom for it)"
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f"(binary, {len(data)} bytes: vectors or an index, derived from the text above)"


# -- private_folder -------------------------------------------------------------------------------


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def _private_list(ctx: MapContext, person: Person) -> list[str]:
    found = [str(p) for p in _files(ctx.home(person))]
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        dumped = person_pg.dump_schemas(url, _private_schemas(ctx, person))
        found += [f"postgresql {table}: {len(rows)} rows" for table, rows in dumped.items()]
    return found


def _private_export(ctx: MapContext, person: Person) -> Any:
    from mindroom.memory.jobs.consolidate.run import private_scopes
    from mindroom.memory.policy.audit import entry_data, events, every_entry

    home = ctx.home(person)
    memories = []
    for scope, agent in private_scopes(ctx.storage, ctx.config):
        if home not in scope.root.parents:
            continue
        memory = ctx.registry.open_private_scope(scope, agent)
        memories.append(
            {
                "scope": scope.scope_id,
                "agent": agent,
                "folder": str(scope.root),
                "entries": [entry_data(e) for e in every_entry(memory)],
                "history": events(memory),
            }
        )
    files = {str(p.relative_to(home)): read_any(p) for p in _files(home)}
    out = {"folder": str(home), "memories": memories, "files": files}
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        out["postgresql"] = {
            "stores": person_pg.dump_schemas(url, _private_schemas(ctx, person)),
            "search": person_pg.rows_naming(url, _is_search, [person.key]),
        }
    return out


def _private_erase(ctx: MapContext, person: Person) -> int:
    home = ctx.home(person)
    files = _files(home)
    url = _pg(ctx)
    if not files and not home.exists() and not url:
        return 0
    ctx.registry.forget_person(person.key)  # nothing of theirs stays open to write again
    removed = 0
    if url:  # their stores' schemas, and their scopes' rows of the search index
        from mindroom.people import postgres as person_pg

        removed += len(person_pg.drop_schemas(url, _private_schemas(ctx, person)))
        # every search row and file digest of their scopes (the scope id names their key)
        removed += len(person_pg.delete_rows_naming(url, _is_search, [person.key]))
    if home.exists():
        shutil.rmtree(home)
    return removed + len(files)


# -- mem0_private ---------------------------------------------------------------------------------


def _mem0_scopes(ctx: MapContext, person: Person) -> Iterator[Any]:
    from mindroom.memory.jobs.consolidate.run import private_scopes

    home = ctx.home(person)
    for scope, agent in private_scopes(ctx.storage, ctx.config, backend="mem0"):
        if home in scope.root.parents or home in scope.state_dir.parents:
            yield scope.scope_id, ctx.registry.open_private_mem0(scope, agent)


def _mem0_export(ctx: MapContext, person: Person) -> Any:
    out = []
    for scope_id, memory in _mem0_scopes(ctx, person):
        entries = memory.list_sync(1_000_000)
        out.append(
            {
                "scope": scope_id,
                "entries": [{"id": e.id, "text": e.text} for e in entries],
                "history": [memory.history_sync(e.id) for e in entries],
            }
        )
    records = _mem0_records(ctx, person)
    if records:
        out.append({"scope": "(mem0's records)", "entries": [], "history": [], "rows": records})
    return out


def _mem0_records(ctx: MapContext, person: Person) -> Any:
    """mem0's own rows about the person's scopes (the messages it was shown, its history)."""
    from mindroom.memory.mem0.engine import mem0_dir

    return rows_naming(mem0_dir(ctx.storage) / "history.db", [person.key])


def _mem0_list(ctx: MapContext, person: Person) -> list[str]:
    return [
        f"mem0 scope {s['scope']}: {len(s['entries'])} memories" for s in _mem0_export(ctx, person)
    ]


def _mem0_erase(ctx: MapContext, person: Person) -> int:
    from mindroom.memory.mem0.engine import mem0_dir

    learn(ctx, person)
    removed: list[str] = []
    for _, memory in _mem0_scopes(ctx, person):
        for entry in memory.list_sync(1_000_000):
            memory.delete_sync(entry.id, actor="forget")
            removed.append(entry.id)
    for path in _files(mem0_dir(ctx.storage)):
        if not _is_sqlite(path):
            continue
        if path.name == "history.db":  # mem0's change history and the messages it was shown
            removed_rows = delete_rows_naming(path, [person.key, *removed])
            replace_text(path, _redacted(ctx, person), FORGOTTEN)
            removed.extend("row" for _ in range(removed_rows))
        else:
            delete_rows_naming(path, removed)
        scrub_sqlite(path)
    return len(removed)


def _shared_mem0(ctx: MapContext) -> Iterator[Any]:
    """Every shared mem0 memory: shared agents on mem0, and teams when mem0 is the backend."""
    from mindroom.memory.backend import in_engine
    from mindroom.memory.jobs.consolidate.run import team_member_lists

    for name, agent in ctx.config.agents.items():
        if agent.private is None and ctx.config.agent_memory_backend(name) == "mem0":
            memory = ctx.registry.for_agent(name)
            if in_engine(memory):
                yield memory
    if ctx.config.memory.backend == "mem0":
        for members in team_member_lists(ctx.storage, ctx.config):
            memory = ctx.registry.for_team(members)
            if in_engine(memory):
                yield memory


def _shared_mem0_part(ctx: MapContext, person: Person, memory: Any) -> list[Any]:
    """A shared mem0 memory's entries that name the person or hold their words (mem0 is shown
    a person's lines as ``<matrix id>: text``, so its facts often name them)."""
    needle = person.user_id.casefold()
    words = [w.casefold() for w in ctx.words if len(w.strip()) >= MIN_LINE]
    return [
        e
        for e in memory.list_sync(1_000_000)
        if needle in e.text.casefold() or any(w in e.text.casefold() for w in words)
    ]


def _shared_mem0_messages(ctx: MapContext, person: Person) -> dict[str, list[dict[str, Any]]]:
    """The lines mem0 keeps that the person said (``<matrix id>: text``)."""
    from mindroom.memory.mem0.engine import mem0_dir

    path = mem0_dir(ctx.storage) / "history.db"
    if not path.is_file():
        return {}
    with _connect(path) as db:
        try:
            rows = db.execute(
                "SELECT * FROM messages WHERE substr(content, 1, ?) = ?",
                (len(person.user_id) + 1, f"{person.user_id}:"),
            )
            columns = [c[0] for c in rows.description]
            found = [_plain(dict(zip(columns, r, strict=False))) for r in rows]
        except sqlite3.OperationalError:  # another mem0 version's schema
            return {}
    return {"messages": found} if found else {}


def _mem0_state(memory: Any, person: Person, ids: list[str]) -> dict[str, Any]:
    """A shared mem0 scope's own state rows that are the person's: consent proposals about
    them (``consent.db``), and the op log's rows of their entries (``mem0_ops.db``)."""
    state = {}
    for path in _state_dbs(memory):
        rows = owned_rows(path, person)
        for table, found in rows_naming(path, ids).items():
            rows.setdefault(table, []).extend(found)
        if rows:
            state[path.name] = rows
    return state


def _mem0_shared_export(ctx: MapContext, person: Person) -> Any:
    out = []
    for memory in _shared_mem0(ctx):
        entries = _shared_mem0_part(ctx, person, memory)
        state = _mem0_state(memory, person, sorted({e.id for e in entries}))
        if entries or state:
            out.append(
                {
                    "scope": memory.scope_id,
                    "entries": [{"id": e.id, "text": e.text} for e in entries],
                    "records": state,
                }
            )
    messages = _shared_mem0_messages(ctx, person)
    if messages:
        out.append({"scope": "(mem0's records)", "rows": messages})
    return out


def _mem0_shared_list(ctx: MapContext, person: Person) -> list[str]:
    return [f"mem0 {s['scope']}" for s in _mem0_shared_export(ctx, person)]


def _mem0_shared_erase(ctx: MapContext, person: Person) -> int:
    from mindroom.memory.mem0.engine import mem0_dir

    learn(ctx, person)
    removed: list[str] = []  # the ids of the memories erased
    rows = 0
    for memory in _shared_mem0(ctx):
        mine = [e.id for e in _shared_mem0_part(ctx, person, memory)]
        for entry_id in mine:
            memory.delete_sync(entry_id, actor="forget")
        removed.extend(mine)
        for state in _state_dbs(memory):  # proposals about them, the op log of their entries
            rows += delete_owned_rows(state, person) + delete_rows_naming(state, mine)
            replace_text(state, _redacted(ctx, person), FORGOTTEN)
            scrub_sqlite(state)
    path = mem0_dir(ctx.storage) / "history.db"
    count = len(removed) + rows
    if path.is_file():
        with _connect(path) as db, contextlib.suppress(sqlite3.OperationalError):
            count += max(
                db.execute(
                    "DELETE FROM messages WHERE substr(content, 1, ?) = ?",
                    (len(person.user_id) + 1, f"{person.user_id}:"),
                ).rowcount,
                0,
            )
        count += delete_rows_naming(path, removed)
        replace_text(path, _redacted(ctx, person), FORGOTTEN)
    for other in _files(mem0_dir(ctx.storage)):
        if _is_sqlite(other) and other != path:
            # Chroma logs every add in its queue table (the text too) beyond the delete
            count += delete_rows_naming(other, removed)
            scrub_sqlite(other)
    return count


# -- shared memory, sessions, their index ---------------------------------------------------------


def _shared_memories(ctx: MapContext) -> Iterator[Any]:
    from mindroom.memory.jobs.consolidate.run import scope_memories

    for memory in scope_memories(ctx.registry, ctx.config, ctx.storage):
        if ctx.storage / PRIVATE_DIR not in memory.scope.root.parents:
            yield memory


def _shared_session_files(ctx: MapContext) -> list[Path]:
    found = _files(ctx.data_dir / "sessions") + _files(ctx.storage / "agents")
    return [p for p in found if p.suffix in SQLITE_SUFFIXES and _is_sqlite(p)]


def _person_needles(person: Person) -> list[str]:
    """How a person's Matrix ID appears in stored text: as is and inside JSON."""
    return sorted({person.user_id, json.dumps(person.user_id)[1:-1]})


def _owner_condition(columns: list[str], person: Person) -> tuple[str, list[str]]:
    """A WHERE clause true for a row that is the person's: a column naming its person
    (:data:`OWNER_COLUMNS`) holds their ID, or a JSON column's top-level ``user_id`` or
    ``sender`` does (an Agno run, a Matrix event). A row of someone else's that merely
    mentions them (a room's member list in a prompt) is not theirs: it is redacted instead."""
    parts, args = [], []
    for column in columns:
        if column in OWNER_COLUMNS:
            parts.append(f'"{column}" = ?')
            args.append(person.user_id)
        for key in ("user_id", "sender"):
            parts.append(
                f'(json_valid("{column}") AND json_type("{column}") = \'object\' '
                f"AND json_extract(\"{column}\", '$.{key}') = ?)"
            )
            args.append(person.user_id)
    return " OR ".join(parts) or "0", args


def owned_rows(path: Path, person: Person) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``path`` that are the person's (:func:`_owner_condition`), by table."""
    if not path.is_file():
        return {}
    out = {}
    with _connect(path) as db:
        for table, _ in _tables(db):
            columns = _columns(db, table)
            condition, args = _owner_condition(columns, person)
            rows = db.execute(f'SELECT * FROM "{table}" WHERE {condition}', args).fetchall()
            if rows:
                out[table] = [_plain(dict(zip(columns, r, strict=False))) for r in rows]
    return out


def delete_owned_rows(path: Path, person: Person) -> int:
    """Delete the person's rows of ``path`` (scrubbed after)."""
    if not path.is_file():
        return 0
    removed = 0
    with _connect(path) as db:
        for table, _ in _tables(db):
            condition, args = _owner_condition(_columns(db, table), person)
            removed += max(db.execute(f'DELETE FROM "{table}" WHERE {condition}', args).rowcount, 0)
    if removed:
        scrub_sqlite(path)
    return removed


def _said(rows: list[dict[str, Any]], person: Person) -> tuple[set[str], set[str]]:
    """The person's own words (their messages' texts) in their ``rows``, and the sessions."""
    words: set[str] = set()
    sessions: set[str] = set()
    for row in rows:
        if row.get("session_id"):
            sessions.add(str(row["session_id"]))
        for value in row.values():
            if isinstance(value, str) and value.startswith(("{", "[")):
                with contextlib.suppress(ValueError):
                    _collect_words(json.loads(value), person.user_id, words)
    return words, sessions


def _collect_words(data: Any, user_id: str, words: set[str]) -> None:
    """The texts of user messages in a run (Agno's run JSON) whose run is ``user_id``'s."""
    if isinstance(data, dict):
        if data.get("user_id") == user_id:
            message = data.get("input")
            if isinstance(message, dict):
                content = message.get("input_content")
                if isinstance(content, str):
                    words.add(content)
            for item in data.get("messages") or []:
                if _own_message(item):
                    words.add(item["content"])
        for value in data.values():
            _collect_words(value, user_id, words)
    elif isinstance(data, list):
        for value in data:
            _collect_words(value, user_id, words)


def _own_message(item: Any) -> bool:
    """A user message of the run itself (not one replayed from the session's history)."""
    return (
        isinstance(item, dict)
        and item.get("role") == "user"
        and isinstance(item.get("content"), str)
        and not item.get("from_history")
    )


def _others_lines(path: Path, person: Person) -> set[str]:
    """The lines other people's messages hold in a session store (a line of the person's
    words that someone else also wrote, e.g. an attachment's heading, is not theirs alone)."""
    lines: set[str] = set()
    with _connect(path) as db:
        for table, _ in _tables(db):
            if "run_data" not in _columns(db, table):
                continue
            for (value,) in db.execute(f'SELECT run_data FROM "{table}"'):
                with contextlib.suppress(ValueError, TypeError):
                    run = json.loads(value)
                    if isinstance(run, dict) and run.get("user_id") not in (None, person.user_id):
                        words: set[str] = set()
                        _collect_words(run, str(run["user_id"]), words)
                        lines |= {ln.strip() for w in words for ln in w.splitlines()}
    return lines


def learn(ctx: MapContext, person: Person) -> None:
    """Find, once per run, what of the person's is spread over shared stores: their words
    (the messages of their runs), the sessions they spoke in and their shared entries."""
    if ctx.learned:
        return
    _learn_said(ctx, person, common=True)
    for memory in _shared_memories(ctx):
        entries = _shared_part(ctx, person, memory)
        if entries:
            ctx.entries[memory.scope_id] = entries
    ctx.learned = True


def _learn_said(ctx: MapContext, person: Person, *, common: bool) -> None:
    """The person's words and the sessions they spoke in, from the shared session stores;
    with ``common``, the lines other people wrote too (what redaction must leave alone)."""
    for path in _shared_session_files(ctx):
        rows = [r for found in owned_rows(path, person).values() for r in found]
        words, spoke_in = _said(rows, person)
        ctx.words |= words
        ctx.sessions |= spoke_in
        if common:
            ctx.common |= _others_lines(path, person)
    url = _pg(ctx)
    if url:
        _pg_learn(ctx, person, url)


def entries_about(
    config: Config, storage: Path, registry: MemoryRegistry, user_id: str, memory: Any
) -> list[Any]:
    """The live entries of ``memory`` (either backend) that are about ``user_id``, by the
    map's own rule: in a private scope of theirs, every entry; in someone else's, none; in a
    shared scope, those the ``shared_memory`` store counts as theirs (:func:`_shared_part`).
    ``!memory list`` and ``forget`` and the agents' listing tool ask this (blocking)."""
    live = list(memory.list_sync(LIVE_LIMIT))
    key = memory.scope.person_key
    if key is not None:
        return live if key == requester_key(user_id) else []
    ctx, person = _context(config, storage, registry), Person(user_id)
    _learn_said(ctx, person, common=False)
    return _shared_part(ctx, person, memory, live)


def _redacted(ctx: MapContext, person: Person) -> set[str]:
    """What is replaced in shared stores: the person's words, their shared entries' texts
    (recalled into others' prompts), their Matrix ID."""
    texts = {e.text for entries in ctx.entries.values() for e in entries}
    # a line of their words is matched alone too: recall shows transcripts line by line
    lines = {line.strip() for text in ctx.words for line in text.splitlines()}
    distinct = {line for line in lines - ctx.common if len(line) >= MIN_LINE}
    return ctx.words | texts | distinct | {person.user_id}


def _sessions_list(ctx: MapContext, person: Person) -> list[str]:
    return list(_sessions_export(ctx, person))


def _sessions_export(ctx: MapContext, person: Person) -> Any:
    out: dict[str, Any] = {}
    for path in _shared_session_files(ctx):
        found = owned_rows(path, person)
        if found:
            out[str(path.relative_to(ctx.storage))] = found
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        which = _shared_store_tables(ctx, person)
        for table, rows in person_pg.owned_rows(url, which, person.user_id, OWNER_COLUMNS).items():
            out[f"postgresql {table}"] = rows
    return out


def _sessions_erase(ctx: MapContext, person: Person) -> int:
    learn(ctx, person)
    removed = 0
    for path in _shared_session_files(ctx):
        removed += delete_owned_rows(path, person)
        removed += replace_text(path, _redacted(ctx, person), FORGOTTEN)
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        which = _shared_store_tables(ctx, person)
        removed += person_pg.delete_owned_rows(url, which, person.user_id, OWNER_COLUMNS)
        removed += person_pg.replace_text(url, which, _pg_pairs(ctx, person))
    return removed


def _index_files(ctx: MapContext) -> list[Path]:
    return [p for p in _files(ctx.data_dir / "memory") if p.name == "transcripts.db"]


def _index_list(ctx: MapContext, person: Person) -> list[str]:
    return [str(p) for p in _index_files(ctx) if rows_naming(p, _person_needles(person))]


def _index_export(ctx: MapContext, person: Person) -> Any:
    out = {}
    for path in _index_files(ctx):
        found = rows_naming(path, _person_needles(person))
        if found and ctx.for_person:
            found = _conversations_shown(ctx, person, path, found)
        if found:
            out[str(path.relative_to(ctx.storage))] = found
    return out


def _conversations_shown(
    ctx: MapContext, person: Person, path: Path, rows: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """Of a session index's ``rows`` (by table), for the person's own download: those of the
    conversations their direct chat could show them, by the audience each one recorded (one
    never recorded is shown in no room). The full-text table's rows, copies of the lines'
    text that name no conversation, are left out: the lines carry the same words."""
    from mindroom.memory.policy.audience import AudienceBook, allowed_words
    from mindroom.memory.policy.gate import RoomAudience

    room = RoomAudience.private_to(person.user_id)
    words = allowed_words(room, ctx.config.memory.audience, AudienceBook(path.parent))
    if words is None:  # memory.audience: shared, every conversation is shown everywhere
        return rows
    with _connect(path) as db:
        sessions = db.execute("SELECT id, audience FROM sessions").fetchall()
    shown = {number for number, audience in sessions if audience and audience in words}
    kept = {
        "sessions": [r for r in rows.get("sessions", []) if r.get("id") in shown],
        "lines": [r for r in rows.get("lines", []) if r.get("session") in shown],
        "spans": [r for r in rows.get("spans", []) if r.get("session") in shown],
    }
    return {table: found for table, found in kept.items() if found}


def _index_erase(ctx: MapContext, person: Person) -> int:
    """Forget, in each shared session index, every session the person spoke in or whose lines
    hold them or their words: derived data, so the next sync of such a session indexes it
    again from the (now redacted) session store; other sessions stay as they are."""
    from mindroom.memory.search.session_index import SessionIndex

    learn(ctx, person)
    condition, args = _condition(["json"], sorted(_redacted(ctx, person)))
    removed = 0
    for path in _index_files(ctx):
        with _connect(path) as db:
            indexed = {str(row[0]) for row in db.execute("SELECT session_id FROM sessions")}
            touched = indexed & ctx.sessions
            touched |= {
                str(row[0])
                for row in db.execute(
                    "SELECT DISTINCT s.session_id FROM lines l JOIN sessions s"
                    f" ON s.id = l.session WHERE {condition}",
                    args,
                )
            }
        if not touched:
            continue
        index = SessionIndex(path)
        try:
            removed += sum(index.forget(session_id) for session_id in sorted(touched))
        finally:
            index.close()
        scrub_sqlite(path)
    return removed


def _shared_part(
    ctx: MapContext, person: Person, memory: Any, entries: Iterable[Any] | None = None
) -> list[Any]:
    """The entries of a shared memory that are the person's: naming them, holding their words,
    or written in a conversation they spoke in (the history's ``run``). Among ``entries``
    when given (e.g. the live ones), else every entry of the files and archive."""
    from mindroom.memory.policy.audit import every_entry

    runs_of: dict[str, set[str]] = {}
    history = getattr(memory, "history_of", None)  # mem0 records no conversation
    for record in history() if history is not None else []:
        run = (record.meta or {}).get("run")
        if run:
            runs_of.setdefault(record.id, set()).add(str(run))
    needle = person.user_id.casefold()
    words = [w.casefold() for w in ctx.words if len(w.strip()) >= 4]
    found = []
    for entry in every_entry(memory) if entries is None else entries:
        text = entry.text.casefold()
        if (
            needle in text
            or any(w in text for w in words)
            or runs_of.get(entry.id, set()) & ctx.sessions
        ):
            found.append(entry)
    return found


def _state_dbs(memory: Any) -> list[Path]:
    """The SQLite files of a shared scope's state (the session index is its own store)."""
    return [
        p
        for p in _files(memory.scope.state_dir)
        if p.suffix == ".db" and p.name != "transcripts.db" and _is_sqlite(p)
    ]


def _shared_export(ctx: MapContext, person: Person) -> Any:
    """Each shared scope's entries about the person, their history, the state rows that are
    theirs or name those entries, and the closed rooms they were a reader of.

    For the person's own download (:attr:`MapContext.for_person`) only what their direct chat
    could show them: the entries whose audience it may show (the read gate's audience rule,
    :func:`mindroom.memory.policy.audience.allowed_words`, on the entries as they are now),
    and no history record or state row that names or quotes an entry it may not show (a
    consolidation record of their entry and someone else's, say). An admin's export (the CLI)
    keeps everything."""
    from mindroom.memory.policy.audit import entry_data

    learn(ctx, person)
    out = []
    for memory in _shared_memories(ctx):
        entries = ctx.entries.get(memory.scope_id, [])
        hidden = _Hidden.of(ctx, person, memory) if ctx.for_person else _Hidden()
        entries = [e for e in entries if e.id not in hidden.ids]
        ids = sorted({e.id for e in entries})
        state = {}
        for path in _state_dbs(memory):
            rows = owned_rows(path, person)
            for table, found in rows_naming(path, ids).items():
                rows.setdefault(table, []).extend(found)
            rows = hidden.without(rows)
            if rows:
                state[path.name] = rows
        url = _pg(ctx)
        if url and ids:
            from mindroom.people import postgres as person_pg

            indexed = hidden.without(person_pg.rows_naming(url, _is_search, ids))
            if indexed:
                state["postgresql"] = indexed
        rooms = _audiences_naming(memory, person)
        history = [r.__dict__ for r in memory.history_of() if r.id in ids]
        if entries or state or rooms:
            out.append(
                {
                    "scope": memory.scope_id,
                    "entries": [entry_data(e) for e in entries],
                    "history": [r for r in history if not hidden.names(r)],
                    "records": state,
                    "audiences": rooms,
                }
            )
    return out


@dataclass(frozen=True)
class _Hidden:
    """What of a shared scope a person's own direct chat may not show them: the ids of its
    entries whose audience that chat may not show (an id only the history still knows, of an
    entry deleted since, counts too: its audience is gone) and their texts."""

    ids: frozenset[str] = frozenset()
    texts: tuple[str, ...] = ()  # each as written and as it appears inside JSON text

    @classmethod
    def of(cls, ctx: MapContext, person: Person, memory: Any) -> _Hidden:
        from mindroom.memory.policy.audience import AudienceBook, allowed_words
        from mindroom.memory.policy.audit import every_entry
        from mindroom.memory.policy.gate import RoomAudience

        room = RoomAudience.private_to(person.user_id)
        words = allowed_words(
            room, ctx.config.memory.audience, AudienceBook(memory.scope.state_dir)
        )
        if words is None:  # memory.audience: shared, every entry is shown everywhere
            return cls()
        every = every_entry(memory)
        shown = {e.id for e in every if (e.fields.audience or "") in words}
        history = memory.history_of()
        ids = {e.id for e in every} | {r.id for r in history if r.id}
        hidden = frozenset(ids - shown)
        texts = {e.text for e in every if e.id in hidden}
        texts |= {t for r in history if r.id in hidden for t in (r.old, r.new) if t}
        return cls(hidden, tuple(needle for needle, _ in _with_json_forms(texts, "")))

    def names(self, value: Any) -> bool:
        """Whether ``value`` (a row, a record: any JSON data) names or quotes a hidden entry."""
        if isinstance(value, dict):
            return any(self.names(v) for v in value.values())
        if isinstance(value, list | tuple):
            return any(self.names(v) for v in value)
        if not isinstance(value, str) or not (self.ids or self.texts):
            return False
        return any(i in value for i in self.ids) or any(t in value for t in self.texts)

    def without(self, rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        """``rows`` (by table) without those that name or quote a hidden entry."""
        kept = {table: [r for r in found if not self.names(r)] for table, found in rows.items()}
        return {table: found for table, found in kept.items() if found}


def _audiences_naming(memory: Any, person: Person) -> dict[str, dict[str, Any]]:
    """The closed rooms of a scope's ``audiences.json`` the person was a reader of."""
    from mindroom.memory.policy.audience import AudienceBook

    return {
        key: {
            "room": told.room_id,
            "kind": told.kind,
            "name": told.name,
            "readers": sorted(told.readers),
        }
        for key, told in AudienceBook(memory.scope.state_dir).rooms().items()
        if person.user_id in told.readers
    }


def _shared_list(ctx: MapContext, person: Person) -> list[str]:
    return [f"{s['scope']}: {len(s['entries'])} entries" for s in _shared_export(ctx, person)]


def _shared_erase(ctx: MapContext, person: Person) -> int:
    from mindroom.memory.files.forget import erase_entries
    from mindroom.memory.policy.audience import AudienceBook

    learn(ctx, person)
    removed = 0
    for memory in _shared_memories(ctx):
        entries = ctx.entries.get(memory.scope_id, [])
        removed += erase_entries(memory, entries)
        removed += AudienceBook(memory.scope.state_dir).drop_reader(person.user_id)
        for path in _state_dbs(memory):
            removed += delete_owned_rows(path, person)
            removed += delete_rows_naming(path, sorted({e.id for e in entries}))
            removed += replace_text(path, _redacted(ctx, person), FORGOTTEN)
            scrub_sqlite(path)
    url = _pg(ctx)
    if url:  # the search index's rows of what went (derived: the next sync copies the files)
        erased = {e.id for entries in ctx.entries.values() for e in entries}
        removed += _pg_search_erase(url, erased | _redacted(ctx, person))
        for memory in _shared_memories(ctx):  # a running process copies them again too
            try:
                search = memory.pg_search
            except EmbedderError as exc:  # its next start compares every file anyway
                logger.warning("forget: %s's search index not rechecked: %s", memory.scope_id, exc)
                continue
            if search is not None:
                search.recheck()
    return removed


# -- ledger, dashboard sessions -------------------------------------------------------------------


def _ledger_path(ctx: MapContext) -> Path:
    from mindroom.store.ledger import LEDGER_FILE

    return ctx.data_dir / LEDGER_FILE


def _ledger_export(ctx: MapContext, person: Person) -> Any:
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        return person_pg.owned_rows(url, _is_ledger, person.user_id, OWNER_COLUMNS)
    return owned_rows(_ledger_path(ctx), person)


def _ledger_list(ctx: MapContext, person: Person) -> list[str]:
    found = _ledger_export(ctx, person)
    return [f"ledger {t}: {len(rows)} rows" for t, rows in found.items()] if found else []


def _ledger_erase(ctx: MapContext, person: Person) -> int:
    learn(ctx, person)
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        removed = person_pg.delete_owned_rows(url, _is_ledger, person.user_id, OWNER_COLUMNS)
        return removed + person_pg.replace_text(url, _is_ledger, _pg_pairs(ctx, person))
    path = _ledger_path(ctx)
    return delete_owned_rows(path, person) + replace_text(path, _redacted(ctx, person), FORGOTTEN)


def _maintenance_path(ctx: MapContext) -> Path:
    from mindroom.memory.jobs.maintenance.loop import DB_NAME

    return ctx.data_dir / DB_NAME


def _maintenance_export(ctx: MapContext, person: Person) -> Any:
    needles = [person.key, *_person_needles(person)]
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        return person_pg.rows_naming(url, _is_maintenance, needles)
    return rows_naming(_maintenance_path(ctx), needles)


def _maintenance_list(ctx: MapContext, person: Person) -> list[str]:
    found = _maintenance_export(ctx, person)
    return [f"maintenance {t}: {len(rows)} rows" for t, rows in found.items()]


def _maintenance_erase(ctx: MapContext, person: Person) -> int:
    """A run's summary may name a private scope (the person's folder key): replaced."""
    url = _pg(ctx)
    if url:
        from mindroom.people import postgres as person_pg

        pairs = _with_json_forms({person.key, person.user_id}, FORGOTTEN)
        return person_pg.replace_text(url, _is_maintenance, pairs)
    return replace_text(_maintenance_path(ctx), {person.key, person.user_id}, FORGOTTEN)


def _nothing_list(_ctx: MapContext, _person: Person) -> list[str]:
    return []


def _nothing_export(_ctx: MapContext, _person: Person) -> Any:
    return "a /me session is a signed cookie in the person's browser; nothing is stored here"


def _nothing_erase(_ctx: MapContext, _person: Person) -> int:
    return 0


# -- the PostgreSQL form of the stores (storage.database) -------------------------------------

STORE_SCHEMA_PREFIX = "mindroom_"  # mindroom.adapters.agno.session_stores.store_schema
_CREATED = re.compile(r"CREATE TABLE IF NOT EXISTS\s+(\w+)", re.IGNORECASE)


def _created(statements: Iterable[str]) -> frozenset[str]:
    """The tables a schema's statements create."""
    return frozenset(name for s in statements for name in _CREATED.findall(s))


@functools.cache
def _our_tables() -> dict[str, frozenset[str]]:
    """The tables mindroom makes in ``storage.database`` outside the session stores' schemas,
    by store, read from their own schema statements (a table added to one is covered at
    once). A table not named here is not mindroom's and is left alone (allow-list)."""
    from mindroom.memory.search.pg_search import SCHEMA as SEARCH
    from mindroom.store.ledger_schema import MIGRATIONS
    from mindroom.store.schemas import MAINTENANCE_SCRIPT

    return {
        "ledger": _created(s for m in MIGRATIONS for s in m.statements),
        "search": _created(SEARCH),
        "maintenance": _created([MAINTENANCE_SCRIPT]),
    }


def _pg(ctx: MapContext) -> str | None:
    """``storage.database`` (PostgreSQL), or None when every store is a file."""
    return ctx.config.storage.database or None


def _private_schemas(ctx: MapContext, person: Person) -> set[str]:
    """The schemas of the person's own Agno stores (their private companions' sessions and
    learning), named as :class:`~mindroom.adapters.agno.session_stores.SessionStores` names them."""
    from mindroom.adapters.agno.session_stores import store_schema

    found = set()
    for name in ctx.config.agents:
        instance = ctx.registry.private_instance(name, person.user_id)
        if instance is not None and ctx.home(person) in instance.state_dir.parents:
            found |= {
                store_schema(ctx.storage, p) for p in (instance.sessions_db, instance.learning_db)
            }
    return found


def _is_session_store(table: Any) -> bool:
    return bool(table.schema.startswith(STORE_SCHEMA_PREFIX))


def _is_ours(kind: str) -> Callable[[Any], bool]:
    names = _our_tables()[kind]
    return lambda table: not _is_session_store(table) and table.name in names


def _is_search(table: Any) -> bool:
    return _is_ours("search")(table)


def _is_maintenance(table: Any) -> bool:
    return _is_ours("maintenance")(table)


def _is_ledger(table: Any) -> bool:
    """The ledger's tables (with the inbox's and the cluster's: one schema)."""
    return _is_ours("ledger")(table)


def _shared_store_tables(ctx: MapContext, person: Person) -> Callable[[Any], bool]:
    own = _private_schemas(ctx, person)
    return lambda t: _is_session_store(t) and t.schema not in own


def _pg_learn(ctx: MapContext, person: Person, url: str) -> None:
    """:func:`learn` for the shared session stores in PostgreSQL."""
    from mindroom.people import postgres as person_pg

    which = _shared_store_tables(ctx, person)
    owned = person_pg.owned_rows(url, which, person.user_id, OWNER_COLUMNS)
    words, spoke_in = _said([r for rows in owned.values() for r in rows], person)
    ctx.words |= words
    ctx.sessions |= spoke_in
    for run in person_pg.json_values(url, which, "run_data"):
        if isinstance(run, dict) and run.get("user_id") not in (None, person.user_id):
            said: set[str] = set()
            _collect_words(run, str(run["user_id"]), said)
            ctx.common |= {ln.strip() for w in said for ln in w.splitlines()}


def _pg_pairs(ctx: MapContext, person: Person) -> list[tuple[str, str]]:
    return _with_json_forms(_redacted(ctx, person), FORGOTTEN)


def _pg_search_erase(url: str, needles: set[str]) -> int:
    """Drop the search index's rows holding one of ``needles`` and the digests of their
    files: derived data, so the next sync copies those files again (already erased)."""
    from mindroom.people import postgres as person_pg

    wanted = sorted(n for n in needles if len(n.strip()) >= 4)
    rows = person_pg.delete_rows_naming(
        url, lambda t: _is_search(t) and t.name == "memory_search", wanted
    )
    files = {(str(r["scope"]), str(r["path"])) for r in rows}
    person_pg.delete_file_digests(url, _is_search, files)
    return len(rows)


STORES: tuple[PersonStore, ...] = (
    PersonStore(
        "shared_sessions",
        "shared agents' and teams' conversations (Agno sessions) and learning stores",
        ("mindroom_data/sessions/*", "agents/*/learning/*"),
        (
            "mindroom.adapters.agno.session_stores",
            "mindroom.adapters.agno.runner",
            "mindroom.adapters.agno.transcript_repair",
        ),
        _sessions_list,
        _sessions_export,
        _sessions_erase,
    ),
    PersonStore(
        "mem0_private",
        "the person's private memories on the mem0 backend, and mem0's history of them",
        ("mindroom_data/mem0/**",),
        ("mindroom.memory.mem0.engine", "mindroom.memory.mem0.memory"),
        _mem0_list,
        _mem0_export,
        _mem0_erase,
    ),
    PersonStore(
        "mem0_shared",
        "shared agents' and teams' mem0 memories that name the person or hold their words, "
        "and the lines of theirs mem0 keeps",
        ("mindroom_data/mem0/**",),
        ("mindroom.memory.mem0.engine", "mindroom.memory.mem0.memory"),
        _mem0_shared_list,
        _mem0_shared_export,
        _mem0_shared_erase,
    ),
    PersonStore(
        "private_folder",
        "private companions' memory (with archive and expired entries), history, indexes, "
        "vectors, consent, insights, deltas, relations, events, transcripts, sessions, learning",
        (f"{PRIVATE_DIR}/**",),
        (
            "mindroom.memory.private",
            "mindroom.memory.files.store",
            "mindroom.memory.files.history",
            "mindroom.memory.search.index",
            "mindroom.memory.search.vectors",
            "mindroom.memory.policy.consent",
            "mindroom.memory.jobs.insights",
            "mindroom.memory.jobs.consolidate.records",
            "mindroom.memory.jobs.consolidate.fingerprints",
            "mindroom.memory.search.delta",
            "mindroom.memory.search.relations",
            "mindroom.memory.search.pg_search",
            "mindroom.memory.ops_events",
            "mindroom.memory.search.session_index",
            "mindroom.memory.search.session_source",
            "mindroom.memory.mem0.ops",
        ),
        _private_list,
        _private_export,
        _private_erase,
    ),
    PersonStore(
        "shared_memory",
        "shared agents' and teams' memory entries about or from the person, with their history, "
        "indexes, vectors, consent proposals, insights, deltas, relations and events, and the "
        "recorded rooms (audiences.json) they were a reader of",
        (
            "agents/*/workspace/**",
            "mindroom_data/memory/**",
            "agents/*/memory_files/**",
            "*/*/memory_files/**",
        ),  # team mirrors (under memory.file.path when set)
        (
            "mindroom.memory.files.store",
            "mindroom.memory.team",
            "mindroom.memory.files.history",
            "mindroom.memory.search.index",
            "mindroom.memory.search.vectors",
            "mindroom.memory.policy.consent",
            "mindroom.memory.jobs.insights",
            "mindroom.memory.search.delta",
            "mindroom.memory.search.relations",
            "mindroom.memory.search.pg_search",
            "mindroom.memory.ops_events",
            "mindroom.memory.jobs.consolidate.records",
            "mindroom.memory.jobs.consolidate.fingerprints",
            "mindroom.memory.policy.audience",
        ),
        _shared_list,
        _shared_export,
        _shared_erase,
    ),
    PersonStore(
        "session_index",
        "shared scopes' index of past conversations (transcripts.db, derived)",
        ("mindroom_data/memory/*/transcripts.db*",),
        ("mindroom.memory.search.session_index", "mindroom.memory.search.session_source"),
        _index_list,
        _index_export,
        _index_erase,
    ),
    PersonStore(
        "ledger",
        "the ledger's rows keyed by the person (conversations, flush state, inbox events)",
        ("mindroom_data/ledger.db*",),
        (
            "mindroom.store.ledger",
            "mindroom.store.database",
            "mindroom.cluster.inbox",
            "mindroom.cluster.share",
            "mindroom.cluster.leases",
        ),
        _ledger_list,
        _ledger_export,
        _ledger_erase,
    ),
    PersonStore(
        "maintenance_runs",
        "maintenance runs' summaries and stats that name one of the person's private scopes",
        ("mindroom_data/maintenance.db*",),
        ("mindroom.memory.jobs.maintenance.store", "mindroom.memory.jobs.maintenance.loop"),
        _maintenance_list,
        _maintenance_export,
        _maintenance_erase,
    ),
    PersonStore(
        "dashboard_sessions",
        "/me sessions (signed cookies held by the browser: nothing stored server-side)",
        (),
        ("mindroom.dashboard.person",),
        _nothing_list,
        _nothing_export,
        _nothing_erase,
    ),
)

# Modules that open a database or write a JSONL file holding nothing a person said or that is
# known about them, and why (the structural test accepts these and nothing else unclaimed).
NOT_PERSONAL: dict[str, str] = {
    "mindroom.store.wal": "opens the databases named by the stores above (the shared helper)",
    "mindroom.store.migrations": "opens the stores above and applies their schemas (shared)",
    "mindroom.store.sqlite_loop": "the connection of the SQLite stores above (the shared driver)",
    "mindroom.people.postgres": "the PostgreSQL form of the stores above (their shared helper)",
    "mindroom.adapters.matrix.key_backup": "the agents' own encryption key backup state",
    "mindroom.adapters.matrix.crypto": "the agents' own encryption keys (Matrix's record)",
    "mindroom.dashboard.ledger_reads": "reads the ledger (the ledger store above)",
    "mindroom.adapters.agno.memory_tools": (
        "names the session index's sessions/*.jsonl paths; opens nothing itself"
    ),
}


@dataclass(frozen=True)
class StoreReport:
    """What one store held (export) or removed (erase) for a person."""

    store: str
    count: int
    data: Any = None


def _context(config: Config, storage: Path, registry: MemoryRegistry) -> MapContext:
    return MapContext(config, storage, registry)


def export_person(
    config: Config,
    storage: Path,
    registry: MemoryRegistry,
    user_id: str,
    *,
    for_person: bool = False,
) -> dict[str, Any]:
    """Everything the map holds about ``user_id``: one section per store (blocking). With
    ``for_person`` (their own ``/me`` download), the shared memories' part holds only what
    their own direct chat could show them (:func:`_shared_export`)."""
    ctx, person = _context(config, storage, registry), Person(user_id)
    ctx.for_person = for_person
    learn(ctx, person)
    stores = {}
    for store in STORES:
        stores[store.name] = {
            "what": store.what,
            "where": store.list(ctx, person),
            "data": store.export(ctx, person),
        }
    return {
        "user_id": user_id,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(),
        "stores": stores,
    }


def list_person(
    config: Config, storage: Path, registry: MemoryRegistry, user_id: str
) -> dict[str, list[str]]:
    """Where each store of the map holds something of ``user_id`` (blocking)."""
    ctx, person = _context(config, storage, registry), Person(user_id)
    learn(ctx, person)
    return {store.name: store.list(ctx, person) for store in STORES}


def forget_person(
    config: Config, storage: Path, registry: MemoryRegistry, user_id: str
) -> list[StoreReport]:
    """Erase ``user_id``'s part of every store of the map; counts per store (blocking)."""
    ctx, person = _context(config, storage, registry), Person(user_id)
    learn(ctx, person)  # before any store changes: what is theirs is judged on the data as is
    reports = []
    for store in STORES:
        count = store.erase(ctx, person)
        logger.info("forget %s: %s erased %d", user_id, store.name, count)
        reports.append(StoreReport(store.name, count))
    return reports


def redact_deleted_fact(
    config: Config, storage: Path, registry: MemoryRegistry, user_id: str, text: str
) -> int:
    """After ``user_id`` deleted the fact ``text`` (``/me``): replace it in their transcripts
    and every derived store of their private folder (sessions, learning, session index,
    insights, deltas, relations; their stores' schemas with ``storage.database``), so no
    recall path brings it back. The history keeps it (a
    delete can be undone; forget-me erases the history too). Returns the rows changed."""
    ctx, person = _context(config, storage, registry), Person(user_id)
    changed = 0
    for path in _files(ctx.home(person)):
        if path.suffix in SQLITE_SUFFIXES and _is_sqlite(path):
            changed += replace_text(path, {text}, DELETED)
    url = _pg(ctx)
    if url:  # their own stores' schemas in PostgreSQL (sessions and learning)
        from mindroom.people import postgres as person_pg

        own = _private_schemas(ctx, person)
        pairs = _with_json_forms({text}, DELETED)
        changed += person_pg.replace_text(url, lambda t: t.schema in own, pairs)
    return changed + _redact_mem0_messages(ctx, person, text)


def _redact_mem0_messages(ctx: MapContext, person: Person, text: str) -> int:
    """Replace ``text`` in the messages mem0 keeps of the person's scopes (mem0 shows them to
    its extraction again, which would bring the fact back)."""
    from mindroom.memory.mem0.engine import mem0_dir

    path = mem0_dir(ctx.storage) / "history.db"
    if not path.is_file() or len(text.strip()) < 4:
        return 0
    with _connect(path) as db:
        try:
            cursor = db.execute(
                "UPDATE messages SET content = replace(content, ?, ?)"
                " WHERE instr(session_scope, ?) > 0 AND instr(content, ?) > 0",
                (text, DELETED, person.key, text),
            )
        except sqlite3.OperationalError as exc:  # another mem0 version's schema
            logger.warning("%s: mem0's messages not redacted (%s)", path, exc)
            return 0
        changed = max(cursor.rowcount, 0)
    if changed:
        scrub_sqlite(path)
    return changed


def write_export(path: Path, data: dict[str, Any]) -> None:
    """Write an export as JSON, atomically."""
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
