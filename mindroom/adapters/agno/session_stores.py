"""The Agno session databases of a runtime, with a bound on how many stay open.

With ``storage.database`` (PostgreSQL) every store is a schema of that database instead of a
file, named by the file's path in the storage (:func:`store_schema`), on one shared engine;
the bound then only limits the stores kept in memory.

A store is an :class:`AsyncSqliteDb` on its own SQLAlchemy engine (aiosqlite: each pooled
connection is a thread and three descriptors). Shared stores (a shared agent's, a team's,
a learning machine's) are few and stay open. Stores keyed by a person (a private companion's
sessions) are kept open for the ``capacity`` most recently used; beyond that the least
recently used one that no turn is using is retired: its engine is disposed (``await
engine.dispose()``, which closes its connections and their threads) by a task this object owns,
and the store opens again, from the same file, the next time that person talks.

A store is leased while in use: every store fetched inside :meth:`SessionStores.leasing` (a
turn, a read of a session's chat) is held until that block ends, so an engine is never disposed
under a running turn; if every open store is leased the bound is exceeded for a moment and
restored when the leases end.

Sessions are read and written by their id alone (:class:`ConversationSessions`): who a
conversation belongs to is in its id (a private conversation's id names its person), never in
Agno's session owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agno.db.base import AsyncBaseDb, SessionType
from agno.db.postgres import AsyncPostgresDb
from agno.db.sqlite import AsyncSqliteDb
from agno.session import Session
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from mindroom.store.database import database_url, sqlite_engine

logger = logging.getLogger(__name__)


class _ByConversation:
    """An Agno session store where a session is one conversation, whoever speaks in it.

    Agno makes the user_id of a session's first run its owner: a later turn for another user_id
    neither reads the session (no history) nor saves to it (the upsert matches no row). In a
    shared agent's thread several people talk, so sessions here are stored without an owner and
    read by id alone. Each run keeps its person's user_id (the flush attributes facts by it) and
    the turn still runs for that person (Agno's learning stays per person).
    """

    async def get_session(
        self,
        session_id: str,
        session_type: SessionType | None = None,
        user_id: str | None = None,
        deserialize: bool | None = True,
        runs_limit: int | None = None,
    ) -> Session | dict[str, Any] | None:
        return await super().get_session(  # type: ignore[misc]  # (the store's, after this)
            session_id, session_type, None, deserialize, runs_limit
        )

    async def upsert_session(
        self, session: Session, deserialize: bool | None = True
    ) -> Session | dict[str, Any] | None:
        unowned = dataclasses.replace(session, user_id=None)
        stored = await super().upsert_session(unowned, deserialize)  # type: ignore[misc]
        if stored is None:  # saved by an older version, owned by its first person: disown it
            await self._disown(session.session_id)
            stored = await super().upsert_session(unowned, deserialize)  # type: ignore[misc]
        return stored

    async def _disown(self, session_id: str) -> None:
        table = await self._get_table(table_type="sessions")  # type: ignore[attr-defined]
        if table is None:
            return
        async with self.async_session_factory() as sess, sess.begin():  # type: ignore[attr-defined]
            await sess.execute(
                table.update().where(table.c.session_id == session_id).values(user_id=None)
            )


class ConversationSessions(_ByConversation, AsyncSqliteDb):
    """A store in its own SQLite file (the default)."""


class PostgresConversationSessions(_ByConversation, AsyncPostgresDb):
    """A store in its own schema of ``storage.database`` (one schema where SQLite has one
    file: every Agno table of a person's store, their learning's too, stays theirs)."""


def store_schema(storage: Path, path: Path) -> str:
    """The PostgreSQL schema of the store whose SQLite file would be ``path``: named by that
    path inside the storage, so every process of a deployment finds the same one."""
    try:
        relative = path.resolve().relative_to(storage.resolve()).as_posix()
    except ValueError:
        relative = path.resolve().as_posix()
    return "mindroom_" + hashlib.sha256(relative.encode()).hexdigest()[:24]


@dataclass(eq=False)
class _Store:
    path: str
    db: AsyncBaseDb
    engine: AsyncEngine | None  # its own (SQLite); None: the shared PostgreSQL engine
    leases: int = 0


@dataclass(eq=False)
class _LeaseScope:
    stores: list[_Store] = field(default_factory=list)


_scope: ContextVar[_LeaseScope | None] = ContextVar("mindroom_session_store_leases", default=None)


class SessionStores:
    """Open session databases by path: shared ones pinned, per-person ones in an LRU."""

    def __init__(
        self, capacity: int, database: str | None = None, storage: Path | None = None
    ) -> None:
        """``database``: ``storage.database`` (every store a schema there, named by its path
        inside ``storage``); None: a SQLite file per store."""
        self.capacity = capacity
        self.database, self.storage = database, storage or Path.cwd()
        self._shared: AsyncEngine | None = None  # the PostgreSQL engine, made on first use
        self._pinned: dict[str, _Store] = {}
        self._recent: OrderedDict[str, _Store] = OrderedDict()  # least recently used first
        self._disposals: set[asyncio.Task[None]] = set()
        self._undisposed: list[AsyncEngine] = []  # retired with no event loop running

    def get(self, path: Path, *, per_person: bool, **db_options: Any) -> AsyncBaseDb:
        """The store at ``path``, opened on first use; leased to the enclosing :meth:`leasing`.

        ``per_person`` stores count against the capacity; ``db_options`` go to
        :class:`AsyncSqliteDb` when the store is opened (e.g. ``session_table``).
        """
        key = str(path)
        store = self._pinned.get(key) or self._recent.get(key)
        if store is None:
            store = self._open(path, key, db_options)
            (self._recent if per_person else self._pinned)[key] = store
        if key in self._recent:
            self._recent.move_to_end(key)
        scope = _scope.get()
        if scope is not None:
            store.leases += 1
            scope.stores.append(store)
        self._trim(keep=key)
        return store.db

    def _open(self, path: Path, key: str, db_options: dict[str, Any]) -> _Store:
        if self.database is not None:
            if self._shared is None:
                self._shared = create_async_engine(
                    database_url(self.database),
                    pool_size=5,
                    max_overflow=10,
                    pool_pre_ping=True,
                    hide_parameters=True,  # an error is logged: never with people's words
                )
            schema = store_schema(self.storage, path)
            db = PostgresConversationSessions(
                db_engine=self._shared, db_schema=schema, **db_options
            )
            return _Store(key, db, None)
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = sqlite_engine(path)
        return _Store(key, ConversationSessions(db_engine=engine, **db_options), engine)

    @contextlib.contextmanager
    def leasing(self) -> Iterator[None]:
        """Hold every store fetched in this block (in this task) until the block ends."""
        scope = _LeaseScope()
        token = _scope.set(scope)
        try:
            yield
        finally:
            _scope.reset(token)
            for store in scope.stores:
                store.leases -= 1
            self._trim()

    def open_paths(self) -> list[str]:
        """Paths of the per-person stores open now, least recently used first."""
        return list(self._recent)

    def forget_under(self, folder: Path) -> None:
        """Retire the per-person stores under ``folder`` (a person being forgotten: their
        files are about to go, and no cached engine or session may write them again). A store
        leased by a turn running now is retired when that turn ends, as by :meth:`_trim`."""
        prefix = str(folder).rstrip("/") + "/"
        for key in [k for k in self._recent if k.startswith(prefix)]:
            store = self._recent.pop(key)
            if store.engine is not None:
                self._retire(store.engine)

    def _trim(self, keep: str | None = None) -> None:
        """Retire the least recently used unleased per-person stores beyond the capacity
        (never ``keep``, the one just handed out)."""
        excess = len(self._recent) - self.capacity
        if excess <= 0:
            return
        idle = [s for s in self._recent.values() if s.leases == 0 and s.path != keep][:excess]
        for store in idle:
            del self._recent[store.path]
            if store.engine is not None:  # a schema on the shared engine has nothing to close
                self._retire(store.engine)

    def _retire(self, engine: AsyncEngine) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): dispose at close
            self._undisposed.append(engine)
            return
        task = loop.create_task(engine.dispose(), name="dispose session store")
        self._disposals.add(task)
        task.add_done_callback(self._disposed)

    def _disposed(self, task: asyncio.Task[None]) -> None:
        self._disposals.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("closing a session store failed", exc_info=task.exception())

    async def close(self) -> None:
        """Dispose every engine, including retired ones still being disposed."""
        engines = [s.engine for s in [*self._pinned.values(), *self._recent.values()] if s.engine]
        engines += self._undisposed
        if self._shared is not None:
            engines.append(self._shared)
            self._shared = None
        self._pinned.clear()
        self._recent.clear()
        self._undisposed.clear()
        for engine in engines:
            await engine.dispose()
        if self._disposals:
            await asyncio.gather(*self._disposals, return_exceptions=True)
