"""The SQL database of mindroom's shared control state: SQLite (the default, one file) or
PostgreSQL, with one code path for both: SQLite through the ``sqlite3`` module on the event
loop's thread (a statement there costs microseconds; only a wait for another writer's lock goes
to a thread), PostgreSQL through SQLAlchemy's asyncio engine.

:class:`Database` is what the ledger (:mod:`mindroom.store.ledger`) and the session book
(:mod:`mindroom.sessions.book`) talk to: ``query(sql, params)`` for a read,
``execute(sql, params)`` for a write, then ``commit`` or ``rollback``.
The SQL is written once, in the subset both engines run (``INSERT ... ON CONFLICT``,
``UPDATE ... RETURNING``, ``CASE``; ``?`` placeholders, bound by position); where the two
differ, :attr:`Database.greatest` names the function.

- **One connection per process**, as the ledger always had: statements run one at a time (a
  lock), and a read outside a write ends its transaction at once, so nothing holds a snapshot
  or a lock while idle.
- **Every claim is one atomic statement** (an insert that conflicts, an update whose
  ``WHERE`` re-checks the row), so two processes on one PostgreSQL never both win a claim:
  PostgreSQL locks the row and re-evaluates the condition for the second updater.
- **Versioned schema.** ``schema_migrations`` records the versions applied; each runs once, in
  its own transaction, under an advisory lock on PostgreSQL (two processes starting together
  wait for each other). SQLite has no such lock, so every migration is written to be safe to
  run twice (``IF NOT EXISTS``); version 1 is, so a ledger made before the table existed takes
  it as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Generator, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from mindroom.errors import MindroomError
from mindroom.redact import without_database_detail
from mindroom.store.migrations import SQLITE_BUSY_TIMEOUT_S, Migration, statements
from mindroom.store.sqlite_loop import LoopSqlite, async_creator
from mindroom.tasks import to_the_end

__all__ = ["SQLITE_BUSY_TIMEOUT_S", "Database", "DatabaseError", "Migration", "statements"]

_PLACEHOLDER = re.compile(r"\?")
_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)
_APPLIED = "SELECT version FROM schema_migrations"
_MIGRATION_LOCK = 0x6D696E64  # "mind": the advisory lock key of a PostgreSQL migration


_POSTGRES_URL = re.compile(r"^postgres(?:ql)?(?:\+asyncpg)?://")


def database_url(target: Path | str) -> str:
    """SQLAlchemy's URL for a SQLite file path or a ``postgresql://`` URL (asyncpg). The error
    for anything else never repeats the URL (it may carry a password)."""
    if isinstance(target, Path):
        return f"sqlite+aiosqlite:///{target}"
    if not _POSTGRES_URL.match(target):
        raise DatabaseError(
            "storage.database is not a PostgreSQL URL (postgresql://user:pass@host/db)"
        )
    return _POSTGRES_URL.sub("postgresql+asyncpg://", target, count=1)


class DatabaseError(MindroomError):
    """The control-state database cannot be reached or used (said without its URL)."""


def _bind(sql: str, params: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``sql`` with its ``?`` placeholders named, and the values by name."""
    marks = sql.count("?")
    if marks != len(params):
        raise ValueError(f"{marks} placeholders for {len(params)} values in: {sql[:80]}")
    names = iter(range(marks))
    bound = _PLACEHOLDER.sub(lambda _: f":p{next(names)}", sql)
    return bound, {f"p{i}": value for i, value in enumerate(params)}


class _UnitLock:
    """One write unit (its statements and its commit) at a time, held by a task: a statement
    of another task never runs inside it, and the holder may read while it writes."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        self._depth = 0

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        task = asyncio.current_task()
        if self._owner is task and task is not None:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        async with self._lock:
            self._owner, self._depth = task, 1
            try:
                yield
            finally:
                self._owner, self._depth = None, 0


class Rows:
    """What a statement returned: its rows (fetched at once) and how many rows it changed."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    async def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    async def fetchall(self) -> list[Any]:
        return list(self._rows)


class _Call:
    """``await db.execute(...)`` or ``async with db.execute(...) as rows`` (as aiosqlite)."""

    def __init__(self, call: Awaitable[Rows]) -> None:
        self._call = call

    def __await__(self) -> Generator[Any, None, Rows]:
        return self._call.__await__()

    async def __aenter__(self) -> Rows:
        return await self._call

    async def __aexit__(self, *exc: object) -> None:
        return None


class _PostgresConnection:
    """PostgreSQL through SQLAlchemy's asyncio engine (asyncpg)."""

    def __init__(self, engine: AsyncEngine, connection: AsyncConnection) -> None:
        self._engine, self._connection = engine, connection

    async def execute(self, sql: str, params: Sequence[Any]) -> Rows:
        bound, values = _bind(sql, params)
        result = await self._connection.execute(text(bound), values)
        rows = list(result.fetchall()) if result.returns_rows else []
        return Rows(rows, result.rowcount)

    def in_transaction(self) -> bool:
        return self._connection.in_transaction()

    async def commit(self) -> None:
        await self._connection.commit()

    async def rollback(self) -> None:
        try:
            await self._connection.rollback()
        except Exception:  # the connection is gone: a new one
            with contextlib.suppress(Exception):
                await self._connection.close()
            self._connection = await self._engine.connect()

    async def close(self) -> None:
        await self._connection.close()
        await self._engine.dispose()


class _SqliteConnection:
    """SQLite on the event loop's thread (:class:`~mindroom.store.sqlite_loop.LoopSqlite`)."""

    def __init__(self, sqlite: LoopSqlite) -> None:
        self._sqlite = sqlite
        sqlite.db.row_factory = _sqlite_row

    async def execute(self, sql: str, params: Sequence[Any]) -> Rows:
        return await self._sqlite.run(partial(self._execute, sql, tuple(params)))

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Rows:
        cursor = self._sqlite.db.execute(sql, params)
        try:
            rows = cursor.fetchall() if cursor.description is not None else []
            return Rows(rows, cursor.rowcount)
        finally:
            cursor.close()

    def in_transaction(self) -> bool:
        return self._sqlite.db.in_transaction

    async def commit(self) -> None:
        await self._sqlite.commit()

    async def rollback(self) -> None:
        await self._sqlite.run(self._sqlite.db.rollback)

    async def close(self) -> None:
        await self._sqlite.close()


@functools.lru_cache(maxsize=256)
def _row_class(columns: tuple[str, ...]) -> type[tuple[Any, ...]]:
    """The class of a row with these columns: a tuple that is also read by column name
    (``row.name``, ``row._mapping``), as SQLAlchemy's rows are."""
    index = {name: i for i, name in enumerate(columns)}

    def by_name(row: tuple[Any, ...], name: str) -> Any:
        try:
            return row[index[name]]
        except KeyError:
            raise AttributeError(name) from None

    def mapping(row: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(columns, row, strict=True))

    return type(
        "Row", (tuple,), {"__slots__": (), "__getattr__": by_name, "_mapping": property(mapping)}
    )


def _sqlite_row(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> tuple[Any, ...]:
    return _row_class(tuple(column[0] for column in cursor.description))(values)


class Database:
    """One connection to the control-state database. Open with :meth:`open`."""

    def __init__(self, connection: _SqliteConnection | _PostgresConnection) -> None:
        self._connection = connection
        self.dialect = "sqlite" if isinstance(connection, _SqliteConnection) else "postgresql"
        self._lock = asyncio.Lock()  # one statement at a time on the connection
        self.unit = _UnitLock()  # one write unit at a time (see mindroom.store.whole_writes)
        self._writing = False  # a write statement ran since the last commit or rollback

    @classmethod
    async def open(cls, target: Path | str, migrations: Sequence[Migration]) -> Database:
        """Connect to ``target`` (a SQLite file, created with its folder, or a PostgreSQL URL)
        and bring its schema up to the last of ``migrations``."""
        if isinstance(target, Path):
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                connection: _SqliteConnection | _PostgresConnection = _SqliteConnection(
                    await LoopSqlite.open(target)
                )
            except sqlite3.Error as exc:
                raise DatabaseError(
                    f"the database {target} cannot be opened ({exc.__class__.__name__}: {exc})"
                ) from None
        else:
            try:
                engine = create_async_engine(
                    database_url(target), poolclass=NullPool, hide_parameters=True
                )
                connection = _PostgresConnection(engine, await engine.connect())
            except DatabaseError:
                raise
            except Exception as exc:  # its text may quote the URL: the kind of failure only
                raise DatabaseError(
                    f"storage.database cannot be opened ({type(exc).__name__}): check its host, "
                    "port, user, password and database name"
                ) from None
        database = cls(connection)
        if not migrations:  # a reader: the schema is the writer's
            return database
        try:
            await database._migrate(migrations)
        except BaseException:
            await database.close()
            raise
        return database

    @property
    def greatest(self) -> str:
        """The two-argument maximum: ``MAX`` in SQLite, ``GREATEST`` in PostgreSQL."""
        return "GREATEST" if self.dialect == "postgresql" else "MAX"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Call:
        """Run one statement that writes (``INSERT``, ``UPDATE ... RETURNING``, ``DELETE``, DDL),
        with ``?`` placeholders bound to ``params`` in order. Its transaction stays open until
        :meth:`commit` (or :meth:`rollback`)."""
        return _Call(self._execute(sql, params, write=True))

    def query(self, sql: str, params: Sequence[Any] = ()) -> _Call:
        """Run one statement that only reads. Outside a write (no :meth:`execute` since the last
        commit) its transaction ends at once, so an idle connection holds no snapshot or lock;
        inside one it sees that write's rows. Rows are read by column name (``row.name``)."""
        return _Call(self._execute(sql, params, write=False))

    async def _execute(self, sql: str, params: Sequence[Any], *, write: bool) -> Rows:
        marks = sql.count("?")
        if marks != len(params):
            raise ValueError(f"{marks} placeholders for {len(params)} values in: {sql[:80]}")
        async with self.unit.held(), self._lock:
            try:
                rows = await self._connection.execute(sql, params)
                if write:
                    self._writing = True
                elif not self._writing:  # a read alone: end its transaction now
                    await self._connection.commit()
                return rows
            except BaseException as exc:
                # a failed or cancelled statement leaves the transaction aborted (and, after a
                # lost server, the connection unusable): start clean, then let it propagate.
                # Inside a write unit that unit's statements go too: its caller rolls back.
                await to_the_end(self._recover())
                if isinstance(exc, sqlite3.Error):
                    raise _sqlite_error(exc, sql) from None
                if isinstance(exc, SQLAlchemyError):  # said without the row it quotes
                    raise DatabaseError(without_database_detail(str(exc))) from None
                raise

    async def _recover(self) -> None:
        self._writing = False
        await self._connection.rollback()

    async def commit(self) -> None:
        async with self._lock:
            await self._connection.commit()
            self._writing = False

    async def rollback(self) -> None:
        async with self._lock:
            await self._recover()

    async def close(self) -> None:
        """Close the connection; a cancel (a shutdown) does not cut the close short."""
        await to_the_end(self._close())

    async def _close(self) -> None:
        async with self._lock:
            await self._connection.close()

    async def _migrate(self, migrations: Sequence[Migration]) -> None:
        """Apply the migrations not applied yet, all in one transaction with their records:
        a failure leaves none of them (and none recorded), to be run whole at the next open.
        One process migrates at a time; another waits and then finds them applied."""
        async with self._lock:
            conn = self._connection
            statement = ""
            try:
                if self.dialect == "postgresql":  # held to the commit
                    statement = f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"
                else:  # the write lock, taken now: the sqlite3 module would run DDL outside
                    statement = "BEGIN IMMEDIATE"  # a transaction, one statement at a time
                await conn.execute(statement, ())
                statement = _MIGRATIONS_TABLE
                await conn.execute(statement, ())
                statement = _APPLIED
                applied = await conn.execute(statement, ())
                done = {row.version for row in await applied.fetchall()}
                for migration in sorted(migrations, key=lambda m: m.version):
                    if migration.version in done:
                        continue
                    for statement in migration.statements:
                        try:
                            await conn.execute(statement, ())
                        except (OperationalError, sqlite3.OperationalError) as exc:
                            # SQLite has no ADD COLUMN IF NOT EXISTS: a file made before its
                            # migration (by hand, an older build) may have the column
                            if "duplicate column name" not in str(exc):
                                raise
                    statement = (
                        "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"
                        " ON CONFLICT (version) DO NOTHING"
                    )
                    await conn.execute(statement, (migration.version, time.time()))
                statement = "COMMIT"
                await conn.commit()
            except BaseException as exc:
                await to_the_end(self._recover())
                if isinstance(exc, sqlite3.Error):
                    raise _sqlite_error(exc, statement) from None
                raise


def _sqlite_error(exc: sqlite3.Error, sql: str) -> DatabaseError:
    """``exc`` of statement ``sql``, worded as SQLAlchemy words its errors (never a value)."""
    said = f"({type(exc).__module__}.{type(exc).__name__}) {exc}\n[SQL: {sql}]"
    return DatabaseError(without_database_detail(said))


def sqlite_engine(path: Path, **options: Any) -> AsyncEngine:
    """An async SQLite engine running statements on the loop's thread (:mod:`.sqlite_loop`),
    with WAL, and a wait for a lock in a worker thread, so readers never see "locked".

    Like every engine of mindroom's, its errors never quote a statement's values
    (``hide_parameters``): they are people's words, and an error goes to the log."""
    return create_async_engine(
        database_url(path),
        async_creator=partial(async_creator, path),
        hide_parameters=True,
        **options,
    )


class SyncDatabase:
    """The same database for synchronous callers (the maintenance schedule, from worker
    threads): a short connection per call, one writer at a time.

    SQLite: ``BEGIN IMMEDIATE`` (one writer in at a time, across processes). PostgreSQL (the
    psycopg driver): a transaction holding an advisory lock of ``lock_key``, so the writes of
    one store are serialised across processes the same way.
    """

    def __init__(self, target: Path | str, lock_key: int) -> None:
        self.target, self.lock_key = target, lock_key
        self.dialect = "sqlite" if isinstance(target, Path) else "postgresql"
        self._engine: Any = None
        if isinstance(target, str):
            from sqlalchemy import create_engine

            url = database_url(target).replace("+asyncpg", "+psycopg")
            self._engine = create_engine(
                url, pool_size=2, max_overflow=4, pool_pre_ping=True, hide_parameters=True
            )

    @contextlib.contextmanager
    def read(self) -> Iterator[SyncConnection]:
        """A connection for reads (no transaction held)."""
        if self._engine is None:
            with contextlib.closing(self._sqlite()) as db:
                yield SyncConnection(db, None)
            return
        with self._engine.connect() as conn:
            yield SyncConnection(None, conn)

    @contextlib.contextmanager
    def write(self) -> Iterator[SyncConnection]:
        """One transaction that no other writer of this store runs beside."""
        if self._engine is None:
            with contextlib.closing(self._sqlite()) as db:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield SyncConnection(db, None)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            return
        with self._engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self.lock_key})
            yield SyncConnection(None, conn)

    @contextlib.contextmanager
    def autocommit(self) -> Iterator[SyncConnection]:
        """A connection whose every statement commits at once, for the statements that refuse
        to run inside a transaction (PostgreSQL's ``VACUUM``)."""
        if self._engine is None:
            with contextlib.closing(self._sqlite()) as db:
                yield SyncConnection(db, None)
            return
        with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield SyncConnection(None, conn)

    def script(self, statements: Sequence[str]) -> None:
        """Run schema statements (``IF NOT EXISTS``) in one write."""
        with self.write() as db:
            for statement in statements:
                db.execute(statement)

    def _sqlite(self) -> sqlite3.Connection:
        assert isinstance(self.target, Path)
        db = sqlite3.connect(self.target, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        return db

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


class SyncConnection:
    """``execute(sql, params)`` with ``?`` placeholders; rows are read by column name."""

    def __init__(self, sqlite: sqlite3.Connection | None, conn: Any) -> None:
        self._sqlite, self._conn = sqlite, conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> SyncResult:
        if self._sqlite is not None:
            cursor = self._sqlite.execute(sql, tuple(params))
            return SyncResult(cursor.fetchall(), cursor.rowcount)
        bound, values = _bind(sql, params)
        result = self._conn.execute(text(bound), values)
        rows = [row._mapping for row in result] if result.returns_rows else []
        return SyncResult(rows, result.rowcount)


class SyncResult:
    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self.rows, self.rowcount = rows, rowcount

    def fetchall(self) -> list[Any]:
        return self.rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None
