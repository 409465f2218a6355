"""Versioned schemas for the small SQLite stores beside the memory files (consent, consolidation,
the maintenance schedule, operational events, mem0's op log, thread revisions, key backup).

A store declares its schema once, as a :class:`StoreSchema` (see :mod:`mindroom.store.schemas`):
an ordered list of :class:`Migration` versions, the type the ledger's runner
(:mod:`mindroom.store.database`) uses too. :func:`open_store` connects (WAL, a busy timeout,
rows read by column name) and applies the versions the file lacks, each with its record in
``schema_migrations``, all in one ``BEGIN IMMEDIATE`` transaction, so two processes opening
one file together migrate it once.

- **Version 1 is the schema as it was created before versions existed**, written with
  ``IF NOT EXISTS``: a file made by older code (its tables, no ``schema_migrations``) is
  *adopted* as version 1 (missing tables are created, nothing is re-created or dropped), and
  later versions run on it as on any other.
- A later version never edits an earlier one. An ``ALTER TABLE ... ADD COLUMN`` whose column is
  already there (older code added some columns ad hoc) counts as done.
- **A file newer than the code** (a version this code does not know) is refused with
  :class:`SchemaTooNewError`, naming the file and both versions: an older mindroom never writes
  into a schema it does not understand.

Why the ledger's migration list made general rather than Alembic: these stores are plain
stdlib ``sqlite3`` files, one per scope, opened from worker threads and short-lived CLI calls;
each has a handful of tables and no ORM models. Alembic needs SQLAlchemy metadata, an
environment script and a revision directory per store, and runs its own connection: much more
machinery than "run these statements once, in order, and write down that you did", which is
what :mod:`mindroom.store.database` already does for the ledger on SQLite and PostgreSQL. One
``Migration`` type and one ``schema_migrations`` table now serve both runners.

What this module does not do: PostgreSQL (the ledger's runner in :mod:`mindroom.store.database`
handles both engines; the maintenance schedule keeps its PostgreSQL form there), and the
derived indexes (:data:`mindroom.store.schemas.DERIVED`), which rebuild themselves from the
files instead of migrating.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mindroom.errors import MindroomError
from mindroom.store.wal import use_wal

logger = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_S = 30

MIGRATIONS_TABLE = "schema_migrations"
_CREATE_MIGRATIONS = (
    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
    " version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)


class SchemaTooNewError(MindroomError):
    """A store's file was written by a newer mindroom: its schema version is unknown here."""


@dataclass(frozen=True)
class Migration:
    """One version of a schema: statements run together, once."""

    version: int
    statements: tuple[str, ...]


def statements(script: str) -> tuple[str, ...]:
    """The statements of a ``;``-separated script (no ``;`` inside a statement)."""
    return tuple(s.strip() for s in script.split(";") if s.strip())


@dataclass(frozen=True)
class StoreSchema:
    """One SQLite store: its name, the module that owns it, and its versions in order."""

    name: str
    owner: str  # the module that reads and writes it
    migrations: tuple[Migration, ...]

    def __post_init__(self) -> None:
        versions = [m.version for m in self.migrations]
        if versions != list(range(1, len(versions) + 1)):
            raise ValueError(f"store {self.name}: versions must be 1, 2, ... in order: {versions}")

    @property
    def version(self) -> int:
        """The newest version this code knows."""
        return self.migrations[-1].version


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (``BEGIN IMMEDIATE``: the file's write lock is taken at once, so
    a read inside it is never outdated by another writer): committed when the block ends,
    rolled back when it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.rollback()
        raise
    db.commit()


def _applied(db: sqlite3.Connection) -> set[int] | None:
    """The versions recorded in the file (None: it has no ``schema_migrations``)."""
    known = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if known is None:
        return None
    return {int(version) for (version,) in db.execute(f"SELECT version FROM {MIGRATIONS_TABLE}")}


def _check_not_newer(applied: set[int], schema: StoreSchema, where: Path | str) -> None:
    if applied and max(applied) > schema.version:
        raise SchemaTooNewError(
            f"{where}: the {schema.name} store is at schema version {max(applied)}, but this "
            f"mindroom knows versions up to {schema.version}; a newer mindroom wrote it "
            "(upgrade mindroom, or move the file away: it is control state)"
        )


def _has_tables(db: sqlite3.Connection) -> bool:
    row = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' LIMIT 1"
    ).fetchone()
    return row is not None


def _run(db: sqlite3.Connection, statement: str) -> None:
    try:
        db.execute(statement)
    except sqlite3.OperationalError as exc:  # SQLite has no ADD COLUMN IF NOT EXISTS
        if "duplicate column name" not in str(exc):
            raise


def migrate(db: sqlite3.Connection, schema: StoreSchema, where: Path | str) -> None:
    """Bring ``db`` to ``schema``'s newest version (see the module docstring)."""
    applied = _applied(db)
    if applied is not None:
        _check_not_newer(applied, schema, where)
        if applied >= {m.version for m in schema.migrations}:
            return  # the common case: nothing to do, and no write lock taken
    with transaction(db):
        unversioned = _applied(db) is None
        adopted = unversioned and _has_tables(db)
        db.execute(_CREATE_MIGRATIONS)
        applied = _applied(db) or set()  # again: another process may have migrated meanwhile
        _check_not_newer(applied, schema, where)
        for migration in schema.migrations:
            if migration.version in applied:
                continue
            for statement in migration.statements:
                _run(db, statement)
            db.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, applied_at) VALUES (?, ?)",
                (migration.version, time.time()),
            )
            if adopted and migration.version == 1:
                logger.info("%s: adopted the %s store's file as version 1", where, schema.name)


def open_store(
    path: Path,
    schema: StoreSchema,
    *,
    wal: bool = True,
    timeout: float = SQLITE_BUSY_TIMEOUT_S,
    autocommit: bool = False,
) -> sqlite3.Connection:
    """A connection to the store at ``path`` (created, with its folder, when missing), at
    ``schema``'s newest version; rows are :class:`sqlite3.Row` (read them by column name).

    Usable from any thread under the caller's lock. ``wal``: WAL mode and
    ``synchronous=NORMAL`` (the default; several processes use these files at once).
    ``autocommit``: every statement outside :func:`transaction` commits at once (sqlite3's
    ``isolation_level=None``) instead of sqlite3's implicit transactions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=timeout, check_same_thread=False)
    try:
        if wal:
            use_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
        db.row_factory = sqlite3.Row
        migrate(db, schema, path)
        if autocommit:
            db.isolation_level = None
    except BaseException:
        db.close()
        raise
    return db
