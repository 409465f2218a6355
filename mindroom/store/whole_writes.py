"""Writes to a shared database connection that a cancel cannot cut in two.

Used by the ledger (:mod:`mindroom.store.ledger`) and the session book
(:mod:`mindroom.sessions.book`), which share the ledger's connection and its set of running
writes (so closing the ledger waits for both).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from mindroom.store.database import Database

_W = TypeVar("_W")


class Writer(Protocol):
    """An owner of a connection and of the set of its running writes."""

    _db: Database
    _writes: set[asyncio.Future[Any]]


_S = TypeVar("_S", bound=Writer)


def whole(
    write: Callable[..., Coroutine[Any, Any, _W]],
) -> Callable[..., Coroutine[Any, Any, _W]]:
    """A write that a cancel cannot cut in two: its statements and their commit run to the end
    in a task of their own (the caller still sees the cancel), as one unit: no statement of
    another task runs between them (a failing one would roll this write back with its own).
    Cut between a statement and its commit, the connection would keep the database's write
    lock, and every writer on another connection (the flush's, a short-lived one at shutdown)
    would wait out the busy timeout."""

    async def write_or_roll_back(self: Writer, *args: Any, **kwargs: Any) -> _W:
        async with self._db.unit.held():  # no other task's statement runs inside this write
            try:
                return await write(self, *args, **kwargs)
            except BaseException:  # a statement failed after another: let go of the write lock
                with contextlib.suppress(Exception):
                    await self._db.rollback()
                raise

    @functools.wraps(write)
    async def whole_write(self: Writer, *args: Any, **kwargs: Any) -> _W:
        task = asyncio.ensure_future(write_or_roll_back(self, *args, **kwargs))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return await asyncio.shield(task)

    return whole_write
