"""SQLite on the event loop's thread, waiting for another writer's lock in a worker thread.

A statement on a local SQLite file takes tens of microseconds. An async driver (aiosqlite)
runs each one in a thread of its own and hands the result back, and on a busy machine each of
those hops costs a millisecond and more: a reply's path runs dozens. So mindroom runs SQLite's
statements where its code runs, on the loop's thread, and keeps off the loop only what can
take long, a wait for a lock another connection holds: the connection's busy timeout is 0,
and a statement that finds the database locked runs again in a worker thread with the usual
timeout (:data:`SQLITE_BUSY_TIMEOUT_S`), the loop free meanwhile. A cancel (a shutdown) ends
such a wait at once, not when SQLite's timeout runs out.

:class:`LoopSqlite` is that connection. :func:`async_creator` hands it to SQLAlchemy's asyncio
engine in aiosqlite's shape (the engines of Agno's session stores), and
:mod:`mindroom.store.database` runs the control state's statements on it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from mindroom.store.migrations import SQLITE_BUSY_TIMEOUT_S
from mindroom.store.wal import WAL_SECONDS, use_wal
from mindroom.tasks import to_the_end

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


def _locked(exc: sqlite3.OperationalError) -> bool:
    """SQLite's busy ("database is locked"): another connection holds the lock."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY


def _waited_out(exc: sqlite3.OperationalError) -> bool:
    """A busy that ends by waiting: a lock another connection holds, or a log another process
    is recovering (SQLITE_BUSY_RECOVERY). Not a stale snapshot (SQLITE_BUSY_SNAPSHOT): that
    stays stale, and the caller's transaction has to start again."""
    code = getattr(exc, "sqlite_errorcode", 0)
    return code & 0xFF == sqlite3.SQLITE_BUSY and code != sqlite3.SQLITE_BUSY_SNAPSHOT


class LoopSqlite:
    """One SQLite connection (WAL, ``synchronous=NORMAL``) whose calls run on the caller's
    thread, or wait for a lock in a worker thread (:meth:`run`). Open with :meth:`open`.

    Transactions are the ``sqlite3`` module's own, as with aiosqlite: one begins before the
    first write and lasts until a commit or rollback; a read alone starts none. Its calls are
    serialised by its caller (one statement at a time, as on any DBAPI connection).

    In WAL mode a commit writes without waiting for the disk; what waits for it is a checkpoint
    (copying the log into the database, with an fsync) and the close of the last connection.
    Both run in a thread: SQLite's automatic checkpoint is off on this connection, and
    every :data:`CHECKPOINT_EVERY` commits a passive checkpoint runs on a connection of its own
    in a thread."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path
        self._commits = 0
        self._checkpoint: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, path: Path) -> LoopSqlite:
        db = sqlite3.connect(path, timeout=0, check_same_thread=False)
        try:
            try:
                db.execute("PRAGMA journal_mode=WAL").close()
            except sqlite3.OperationalError as exc:
                if not _locked(exc):
                    raise
                # another connection is switching it: retried (a cancel ends the retries)
                gave_up = threading.Event()
                await _to_the_end(use_wal, db, WAL_SECONDS, gave_up, on_cancel=gave_up.set)
            db.execute("PRAGMA synchronous=NORMAL").close()
            db.execute("PRAGMA wal_autocheckpoint = 0").close()
        except BaseException:
            db.close()
            raise
        return cls(db, path)

    async def run(self, call: Callable[[], _T]) -> _T:
        """``call()`` (statements on :attr:`db`) here; if it found the database locked, again
        in a worker thread that waits for the lock (:data:`SQLITE_BUSY_TIMEOUT_S` at most).

        A caller cancelled meanwhile (a shutdown, a timeout) gives the wait up within
        :data:`WAIT_SLICE_MS`: the thread's call ends ("locked") before the cancel is raised,
        so the connection is never used by two threads at once, and the caller rolls back."""
        try:
            return call()
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise
        gave_up = threading.Event()
        return await _to_the_end(self._waiting, call, gave_up, on_cancel=gave_up.set)

    def _waiting(self, call: Callable[[], _T], gave_up: threading.Event) -> _T:
        """``call()``, tried again while another connection holds the lock, until it runs, the
        timeout passes or ``gave_up`` is set. SQLite's own wait cannot be cut short (an
        interrupt does not end it), so it waits in slices of :data:`WAIT_SLICE_MS`."""
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
        self.db.execute(f"PRAGMA busy_timeout = {WAIT_SLICE_MS}").close()
        try:
            while True:
                tried = time.monotonic()
                try:
                    return call()
                except sqlite3.OperationalError as exc:
                    if not _waited_out(exc) or gave_up.is_set() or time.monotonic() >= deadline:
                        raise
                # SQLite skips its own wait where it could deadlock (this connection holds a
                # read snapshot): then the pause between tries is this thread's
                gave_up.wait(max(0.0, WAIT_SLICE_MS / 1000 - (time.monotonic() - tried)))
        finally:
            self.db.execute("PRAGMA busy_timeout = 0").close()

    async def commit(self) -> None:
        if not self.db.in_transaction:  # a read alone: nothing to commit, nothing to count
            return
        await self.run(self.db.commit)
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY and self._checkpoint is None:
            self._commits = 0
            loop = asyncio.get_running_loop()
            self._checkpoint = loop.run_in_executor(_WAITS, _checkpoint, self.path)
            self._checkpoint.add_done_callback(self._checkpointed)

    def _checkpointed(self, done: asyncio.Future[None]) -> None:
        self._checkpoint = None
        if not done.cancelled() and (exc := done.exception()) is not None:
            logger.warning("checkpoint of %s failed: %s", self.path.name, exc)

    async def close(self) -> None:
        """Close (in a worker thread: the last connection's close checkpoints the log)."""
        await _to_the_end(self.db.close)


CHECKPOINT_EVERY = 100

WAIT_SLICE_MS = 50
"""How long one try in a waiting thread waits for the lock before it looks whether its caller
gave up."""


def _checkpoint(path: Path) -> None:
    """A passive checkpoint of ``path``; none when the file is gone (erased meanwhile: a
    checkpoint never makes the file again)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True)
    except sqlite3.OperationalError:
        if path.exists():
            raise
        return
    with contextlib.closing(db):
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").close()


# The threads that wait for SQLite (a lock, the disk): their own pool, made as needed. In
# asyncio's default pool (a few threads, shared with recall) waits for a lock held by a busy
# writer would hold up everything else queued there, and a wait could queue behind another
# that waits for a lock its own task holds.
_WAITS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="sqlite-wait")


async def _to_the_end(
    call: Callable[..., _T], *args: Any, on_cancel: Callable[[], object] | None = None
) -> _T:
    """``call(*args)`` in a thread of :data:`_WAITS`, awaited to its end even when the caller
    is cancelled, once or more (then ``on_cancel()`` asks it to end soon, and the cancel is
    raised after it): the connection it uses is never used by two threads at once."""
    running = asyncio.get_running_loop().run_in_executor(_WAITS, call, *args)
    return await to_the_end(running, on_cancel)


# -- in aiosqlite's shape, for SQLAlchemy's asyncio engine ------------------------------------


async def async_creator(path: Path) -> _Connection:
    """A connection to ``path`` for ``create_async_engine("sqlite+aiosqlite://...",
    async_creator=...)``: SQLAlchemy's aiosqlite dialect, on :class:`LoopSqlite`."""
    return _Connection(await LoopSqlite.open(path))


class _Connection:
    """What SQLAlchemy's aiosqlite adapter uses of an ``aiosqlite.Connection``."""

    def __init__(self, sqlite: LoopSqlite) -> None:
        self._sqlite = sqlite
        self._connection: sqlite3.Connection | None = sqlite.db  # truthy while open
        # the adapter sets the isolation level through aiosqlite's own connection and queue
        self._conn, self._tx = sqlite.db, _RunNow()

    @property
    def isolation_level(self) -> str | None:
        return self._sqlite.db.isolation_level

    def cursor(self) -> _Cursor:
        return _Cursor(self._sqlite)

    async def commit(self) -> None:
        await self._sqlite.commit()

    async def rollback(self) -> None:
        await self._sqlite.run(self._sqlite.db.rollback)

    async def create_function(self, *args: Any, **kw: Any) -> None:
        self._sqlite.db.create_function(*args, **kw)

    async def close(self) -> None:
        if self._connection is not None:
            self._connection = None
            await self._sqlite.close()

    def stop(self) -> None:
        """aiosqlite's forced close (SQLAlchemy's terminate): closed here and now."""
        if self._connection is not None:
            self._connection = None
            self._sqlite.db.close()


class _RunNow:
    """aiosqlite's request queue as SQLAlchemy's adapter uses it (to set the isolation level,
    ``AUTOCOMMIT`` among them): the call runs here and now, on the loop's thread."""

    def put_nowait(self, request: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, call = request
        try:
            future.set_result(call())
        except Exception as exc:
            future.set_exception(exc)


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
