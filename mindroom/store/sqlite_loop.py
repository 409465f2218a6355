"""SQLite on the event loop's thread, waiting for another writer's lock in a worker thread.

A statement on a local SQLite file takes tens of microseconds. An async driver (aiosqlite)
runs each one in a thread of its own and hands the result back, and on a busy machine each of
those hops costs a millisecond and more: a reply's path runs dozens. So mindroom runs SQLite's
statements where its code runs, on the loop's thread, and keeps off the loop only what can
take long, a wait for a lock another connection holds: the connection's busy timeout is 0,
and a statement that finds the database locked runs again in a worker thread with the usual
timeout (:data:`SQLITE_BUSY_TIMEOUT_S`), the loop free meanwhile.

:class:`LoopSqlite` is that connection. :func:`async_creator` hands it to SQLAlchemy's asyncio
engine in aiosqlite's shape (the engines of Agno's session stores), and
:mod:`mindroom.store.database` runs the control state's statements on it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mindroom.store.migrations import SQLITE_BUSY_TIMEOUT_S

_T = TypeVar("_T")


def _locked(exc: sqlite3.OperationalError) -> bool:
    """SQLite's busy ("database is locked"): another connection holds the lock."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY


class LoopSqlite:
    """One SQLite connection (WAL, ``synchronous=NORMAL``) whose calls run on the caller's
    thread, or wait for a lock in a worker thread (:meth:`run`).

    Transactions are the ``sqlite3`` module's own, as with aiosqlite: one begins before the
    first write and lasts until a commit or rollback; a read alone starts none. Its calls are
    serialised by its caller (one statement at a time, as on any DBAPI connection)."""

    def __init__(self, path: Path | str) -> None:
        self.db = sqlite3.connect(path, timeout=0, check_same_thread=False)
        try:
            self._pragma("journal_mode=WAL")
        except sqlite3.OperationalError as exc:  # another process is creating the file
            if not _locked(exc):
                self.db.close()
                raise
            self._waiting(lambda: self._pragma("journal_mode=WAL"))
        self._pragma("synchronous=NORMAL")

    def _pragma(self, pragma: str) -> None:
        self.db.execute(f"PRAGMA {pragma}").close()

    async def run(self, call: Callable[[], _T]) -> _T:
        """``call()`` (statements on :attr:`db`) here; if it found the database locked, again
        in a worker thread that waits for the lock. The thread's call runs to its end even if
        the caller is cancelled, so the connection is never used by two threads at once."""
        try:
            return call()
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise
        running = asyncio.get_running_loop().run_in_executor(None, self._waiting, call)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await running
            raise

    def _waiting(self, call: Callable[[], _T]) -> _T:
        self._pragma(f"busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        try:
            return call()
        finally:
            self._pragma("busy_timeout = 0")

    def close(self) -> None:
        self.db.close()


# -- in aiosqlite's shape, for SQLAlchemy's asyncio engine ------------------------------------


async def async_creator(path: Path) -> _Connection:
    """A connection to ``path`` for ``create_async_engine("sqlite+aiosqlite://...",
    async_creator=...)``: SQLAlchemy's aiosqlite dialect, on :class:`LoopSqlite`."""
    return _Connection(LoopSqlite(path))


class _Connection:
    """What SQLAlchemy's aiosqlite adapter uses of an ``aiosqlite.Connection``."""

    def __init__(self, sqlite: LoopSqlite) -> None:
        self._sqlite = sqlite
        self._connection: sqlite3.Connection | None = sqlite.db  # truthy while open

    @property
    def isolation_level(self) -> str | None:
        return self._sqlite.db.isolation_level

    def cursor(self) -> _Cursor:
        return _Cursor(self._sqlite)

    async def commit(self) -> None:
        await self._sqlite.run(self._sqlite.db.commit)

    async def rollback(self) -> None:
        await self._sqlite.run(self._sqlite.db.rollback)

    async def create_function(self, *args: Any, **kw: Any) -> None:
        self._sqlite.db.create_function(*args, **kw)

    async def close(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._sqlite.close()

    def stop(self) -> None:
        """aiosqlite's forced close (SQLAlchemy's terminate): there is no thread to stop."""
        if self._connection is not None:
            self._connection = None
            self._sqlite.close()


class _Cursor:
    """What SQLAlchemy's aiosqlite adapter uses of an ``aiosqlite.Cursor``."""

    arraysize = 1

    def __init__(self, sqlite: LoopSqlite) -> None:
        self._sqlite = sqlite
        self._cursor = sqlite.db.cursor()

    async def __aenter__(self) -> _Cursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    async def execute(self, sql: str, parameters: Any = ()) -> _Cursor:
        await self._sqlite.run(lambda: self._cursor.execute(sql, parameters))
        return self

    async def executemany(self, sql: str, parameters: Sequence[Any]) -> _Cursor:
        await self._sqlite.run(lambda: self._cursor.executemany(sql, parameters))
        return self

    async def fetchone(self) -> Any:
        return await self._sqlite.run(self._cursor.fetchone)

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        count = size if size is not None else self.arraysize
        return await self._sqlite.run(lambda: self._cursor.fetchmany(count))

    async def fetchall(self) -> list[Any]:
        return await self._sqlite.run(self._cursor.fetchall)

    async def close(self) -> None:
        self._cursor.close()
