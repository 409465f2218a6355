"""The PostgreSQL form of the map of a person's data (:mod:`mindroom.people.data`).

With ``storage.database`` the ledger, the maintenance schedule, every Agno session and
learning store (a schema each, :func:`mindroom.adapters.agno.session_stores.store_schema`) and the
memory search index (``memory.search.index: postgresql``) live in one PostgreSQL database.
These helpers do there what the SQLite helpers of the map do in a file, judged the same way:

* :func:`owned_rows` / :func:`delete_owned_rows`: a row is the person's when a column naming
  its person (``user_id``, ``requester``, ``sender``) holds their Matrix ID, or a JSON value's
  top-level ``user_id`` or ``sender`` does (an Agno run, a Matrix event), as in SQLite.
* :func:`rows_naming` / :func:`delete_rows_naming`: rows holding one of some texts (a private
  scope's key, a derived row of an erased entry).
* :func:`replace_text`: the person's words copied into someone else's row are replaced, in
  text and JSON columns alike.
* :func:`drop_schemas`: a person's own stores (their private companions' sessions and
  learning) go whole.

Erasure removes bytes, not only rows, as far as PostgreSQL lets a client: a deleted or
updated row stays in its table's file as a dead tuple until a vacuum, and a plain ``VACUUM``
frees the space without rewriting it, so every table touched is rewritten with ``VACUUM
FULL`` (new files for the table, its TOAST table and its indexes; the old files are truncated
at once and unlinked at the next checkpoint). A dropped schema's files go the same way. What
remains possible: the write-ahead log (``pg_wal``, and any WAL archive or replica) keeps the
changes that wrote the text until its segments are recycled, and base backups keep what they
copied; both belong to whoever runs the database, as logs do. Tables are rewritten under an
exclusive lock: a turn writing to one waits for the rewrite.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mindroom.store.database import SyncConnection, SyncDatabase

logger = logging.getLogger(__name__)

TEXT_TYPES = frozenset({"text", "character varying", "character"})
JSON_TYPES = frozenset({"json", "jsonb"})
OWNER_KEYS = ("user_id", "sender")  # a JSON object's top-level keys naming its person
_SYSTEM = ("pg_catalog", "information_schema", "pg_toast")
FORGET_LOCK = 0x666F7267  # "forg": the advisory lock of a forget-me's writes


@dataclass(frozen=True)
class Table:
    """A table of the database, with its columns' names and types."""

    schema: str
    name: str
    columns: tuple[tuple[str, str], ...]

    @property
    def sql(self) -> str:
        return f'"{self.schema}"."{self.name}"'

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def textual(self) -> list[tuple[str, str]]:
        """The columns that can hold text: text and JSON."""
        return [(c, t) for c, t in self.columns if t in TEXT_TYPES | JSON_TYPES]


Which = Callable[[Table], bool]


@contextlib.contextmanager
def database(url: str) -> Iterator[SyncDatabase]:
    """``storage.database``, for the length of one step."""
    db = SyncDatabase(url, FORGET_LOCK)
    try:
        yield db
    finally:
        db.close()


@contextlib.contextmanager
def reading(url: str) -> Iterator[SyncConnection]:
    with database(url) as db, db.read() as conn:
        yield conn


@contextlib.contextmanager
def writing(url: str) -> Iterator[SyncConnection]:
    """One transaction (committed at the end of the block)."""
    with database(url) as db, db.write() as conn:
        yield conn


def tables(conn: SyncConnection, which: Which) -> list[Table]:
    """The ordinary tables of every schema that ``which`` accepts (system schemas left out)."""
    rows = conn.execute(
        "SELECT c.table_schema, c.table_name, c.column_name, c.data_type"
        " FROM information_schema.columns c JOIN information_schema.tables t"
        " ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
        " WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT LIKE 'pg\\_%'"
        " AND c.table_schema <> 'information_schema'"
        " ORDER BY c.table_schema, c.table_name, c.ordinal_position"
    ).fetchall()
    columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row in rows:
        key = (str(row["table_schema"]), str(row["table_name"]))
        columns.setdefault(key, []).append((str(row["column_name"]), str(row["data_type"])))
    found = [Table(s, n, tuple(cols)) for (s, n), cols in columns.items()]
    return [t for t in found if t.schema not in _SYSTEM and which(t)]


def schemas(conn: SyncConnection) -> set[str]:
    return {str(row["nspname"]) for row in conn.execute("SELECT nspname FROM pg_namespace")}


def _as_text(column: str, kind: str) -> str:
    return f'"{column}"' if kind in TEXT_TYPES else f'CAST("{column}" AS text)'


def _naming(table: Table, needles: list[str]) -> tuple[str, list[str]]:
    """A WHERE clause true for a row with a text or JSON value holding one of ``needles``."""
    parts, args = [], []
    for column, kind in table.textual:
        for needle in needles:
            parts.append(f"strpos({_as_text(column, kind)}, ?) > 0")
            args.append(needle)
    return " OR ".join(parts) or "false", args


def _select(
    conn: SyncConnection, table: Table, needles: list[str], *, lock: bool = False
) -> list[dict[str, Any]]:
    """The rows holding one of ``needles``, with their place (``ctid``); ``lock``: locked
    until the transaction ends, so a concurrent update cannot move one before its delete."""
    condition, args = _naming(table, needles)
    if not table.textual or not needles:
        return []
    names = ", ".join(f'"{c}"' for c, _ in table.columns)
    sql = f"SELECT ctid::text AS _ctid, {names} FROM {table.sql} WHERE {condition}"
    rows = conn.execute(sql + (" FOR UPDATE" if lock else ""), args)
    return [dict(row) for row in rows]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON data (its place in the table left out; binary values named by size)."""
    out = {}
    for key, value in row.items():
        if key == "_ctid":
            continue
        if isinstance(value, bytes | memoryview):
            value = f"<{len(value)} bytes>"
        elif not isinstance(value, str | int | float | bool | dict | list | type(None)):
            value = str(value)
        out[key] = value
    return out


def _is_owned(row: dict[str, Any], user_id: str, owner_columns: Iterable[str]) -> bool:
    """Whether ``row`` is the person's (see the module's docstring)."""
    for column in owner_columns:
        if row.get(column) == user_id:
            return True
    for key, value in row.items():
        if key == "_ctid":
            continue
        if isinstance(value, str) and value.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if isinstance(value, dict) and any(value.get(k) == user_id for k in OWNER_KEYS):
            return True
    return False


def _needles(user_id: str) -> list[str]:
    return sorted({user_id, json.dumps(user_id)[1:-1]})


def _owned(
    conn: SyncConnection,
    table: Table,
    user_id: str,
    owner_columns: frozenset[str],
    *,
    lock: bool = False,
) -> list[dict[str, Any]]:
    rows = _select(conn, table, _needles(user_id), lock=lock)
    return [r for r in rows if _is_owned(r, user_id, owner_columns)]


def owned_rows(
    url: str, which: Which, user_id: str, owner_columns: frozenset[str]
) -> dict[str, list[dict[str, Any]]]:
    """The person's rows of the tables ``which`` accepts, by ``schema.table``."""
    with reading(url) as conn:
        found = {t.label: _owned(conn, t, user_id, owner_columns) for t in tables(conn, which)}
    return {label: [_plain(r) for r in rows] for label, rows in found.items() if rows}


def rows_naming(url: str, which: Which, needles: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The rows of the tables ``which`` accepts holding one of ``needles``."""
    with reading(url) as conn:
        found = {t.label: _select(conn, t, needles) for t in tables(conn, which)}
    return {label: [_plain(r) for r in rows] for label, rows in found.items() if rows}


def _delete(conn: SyncConnection, table: Table, rows: list[dict[str, Any]]) -> int:
    if not rows:
        return 0
    places = [r["_ctid"] for r in rows]
    result = conn.execute(f"DELETE FROM {table.sql} WHERE ctid = ANY(CAST(? AS tid[]))", [places])
    return max(result.rowcount, 0)


def delete_owned_rows(url: str, which: Which, user_id: str, owner_columns: frozenset[str]) -> int:
    """Delete the person's rows of the tables ``which`` accepts; vacuums what it touched."""
    touched: list[Table] = []
    removed = 0
    with writing(url) as conn:
        for table in tables(conn, which):
            owned = _owned(conn, table, user_id, owner_columns, lock=True)
            count = _delete(conn, table, owned)
            if count:
                removed += count
                touched.append(table)
    vacuum(url, touched)
    return removed


def delete_rows_naming(url: str, which: Which, needles: list[str]) -> list[dict[str, Any]]:
    """Delete the rows of the tables ``which`` accepts holding one of ``needles``; returns
    them (with their table under ``_table``); vacuums what it touched."""
    touched: list[Table] = []
    removed: list[dict[str, Any]] = []
    if not needles:
        return removed
    with writing(url) as conn:
        for table in tables(conn, which):
            rows = _select(conn, table, needles, lock=True)
            if _delete(conn, table, rows):
                touched.append(table)
                removed += [{**_plain(r), "_table": table.label} for r in rows]
    vacuum(url, touched)
    return removed


def replace_text(url: str, which: Which, pairs: list[tuple[str, str]]) -> int:
    """Replace each needle by its replacement in every text and JSON value of the tables
    ``which`` accepts; returns how many values changed; vacuums what it touched."""
    touched: list[Table] = []
    changed = 0
    if not pairs:
        return 0
    with writing(url) as conn:
        for table in tables(conn, which):
            before = changed
            for column, kind in table.textual:
                as_text = _as_text(column, kind)
                back = "{}" if kind in TEXT_TYPES else f"CAST({{}} AS {kind})"
                for needle, instead in pairs:
                    result = conn.execute(
                        f'UPDATE {table.sql} SET "{column}" = '
                        + back.format(f"replace({as_text}, ?, ?)")
                        + f" WHERE strpos({as_text}, ?) > 0",
                        (needle, instead, needle),
                    )
                    changed += max(result.rowcount, 0)
            if changed > before:
                touched.append(table)
    vacuum(url, touched)
    return changed


def drop_schemas(url: str, names: Iterable[str]) -> list[str]:
    """Drop the schemas ``names`` that exist, with everything in them; returns those dropped."""
    with writing(url) as conn:
        present = schemas(conn)
        dropped = sorted(set(names) & present)
        for name in dropped:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
    return dropped


def dump_schemas(url: str, names: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table of the schemas ``names`` (a person's own stores)."""
    wanted = set(names)
    with reading(url) as conn:
        out = {}
        for table in tables(conn, lambda t: t.schema in wanted):
            columns = ", ".join(f'"{c}"' for c, _ in table.columns)
            found = [_plain(dict(r)) for r in conn.execute(f"SELECT {columns} FROM {table.sql}")]
            if found:
                out[table.label] = found
    return out


def vacuum(url: str, touched: Iterable[Table]) -> None:
    """Rewrite each table (``VACUUM FULL``): no dead tuple, free space or index entry of a
    deleted or updated row stays in its files."""
    labels = sorted({t.sql for t in touched})
    if not labels:
        return
    with database(url) as db, db.autocommit() as conn:
        for label in labels:
            conn.execute(f"VACUUM FULL {label}")
    logger.info("vacuumed %d tables after erasing a person's rows", len(labels))


def json_values(url: str, which: Which, column: str) -> Iterator[Any]:
    """Every value of the JSON column ``column`` in the tables ``which`` accepts, decoded."""
    with reading(url) as conn:
        for table in tables(conn, which):
            if (column, "jsonb") not in table.columns and (column, "json") not in table.columns:
                continue
            for row in conn.execute(f'SELECT "{column}" AS value FROM {table.sql}'):
                value = row["value"]
                if isinstance(value, str):
                    with contextlib.suppress(ValueError):
                        value = json.loads(value)
                yield value


def delete_file_digests(url: str, which: Which, files: set[tuple[str, str]]) -> int:
    """Forget what the search index copied from these ``(scope, path)`` files, so its next
    sync copies them again (from the files as they are now)."""
    if not files:
        return 0
    removed = 0
    with writing(url) as conn:
        found = tables(conn, lambda t: which(t) and t.name == "memory_search_files")
        for table in found:
            for scope, path in sorted(files):
                result = conn.execute(
                    f"DELETE FROM {table.sql} WHERE scope = ? AND path = ?", (scope, path)
                )
                removed += max(result.rowcount, 0)
    vacuum(url, found if removed else [])
    return removed
