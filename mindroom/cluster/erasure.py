"""Forget-me across the processes that share one database: all of them hold still.

One process's :class:`~mindroom.people.erasure.ErasureGate` holds only its own work. With
several ``mindroom run`` processes on one PostgreSQL database (:mod:`mindroom.cluster`), an
answer another process is writing when a person presses forget-me could store their words
after the erasure. :class:`ClusterErasure` extends the gate's rule to every process, with one
PostgreSQL advisory lock (:data:`LOCK_KEY`):

* every running process holds the lock *shared*, on a connection of its own, all the time;
* an erasure (in whichever process serves ``/me``) first holds its own process's gate, then
  asks for the lock *exclusively*: PostgreSQL grants it once no other process holds it, and
  queues every shared request made meanwhile behind it;
* each process looks twice a second whether another process waits for the lock exclusively.
  If one does, it holds its own gate as for an erasure of its own (the work running there ends,
  new work waits), lets go of the stores it keeps open for people (the person's files are about
  to go), releases its shared lock and asks for it again: that request is granted once the
  erasure is done, and only then does its work go on.

So no process reads a person's data before the erasure and writes it back after, whichever
process runs the erasure. A process that dies releases its lock with its connection. One that
hangs would keep an erasure waiting: the erasure gives up after ``lock_timeout_s``, erases
nothing, and says so (:class:`ErasureBusy`). A process whose connection was lost holds the lock
again at its next look. An erasure whose own connection drops while it erases has lost the lock
(the others may go on before it ends): it logs an error saying to run it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mindroom.errors import ErasureBusy
from mindroom.people.erasure import ErasureGate
from mindroom.store.database import Database
from mindroom.tasks import within

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOCK_KEY = int.from_bytes(b"mrforget", "big") & 0x7FFF_FFFF_FFFF_FFFF
"""The advisory lock's key (one bigint for every mindroom database)."""

POLL_S = 0.5
"""How often a process looks whether another one waits to erase."""

_STATE = """
SELECT
  coalesce(bool_or(NOT granted AND mode = 'ExclusiveLock' AND pid <> pg_backend_pid()), false)
    AS waiting,
  coalesce(bool_or(granted AND mode = 'ShareLock' AND pid = pg_backend_pid()), false) AS held
FROM pg_locks
WHERE locktype = 'advisory' AND classid = ? AND objid = ? AND objsubid = 1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
_KEPT = """
SELECT count(*) AS kept FROM pg_locks
WHERE locktype = 'advisory' AND classid = ? AND objid = ? AND objsubid = 1
  AND granted AND mode = 'ExclusiveLock' AND pid = pg_backend_pid()
"""
_KEY_PARTS = ((LOCK_KEY >> 32) & 0xFFFF_FFFF, LOCK_KEY & 0xFFFF_FFFF)  # as pg_locks shows it


class ClusterErasure:
    """This process's part in the processes' rule (see the module docstring).

    ``gate`` is this process's gate; ``let_go`` (awaited) closes the stores it keeps open for people
    (called while the gate is held for another process's erasure).
    """

    def __init__(
        self,
        target: str,
        gate: ErasureGate,
        let_go: Callable[[], Awaitable[None]],
        *,
        poll_s: float = POLL_S,
        lock_timeout_s: float = 60.0,
    ) -> None:
        self._target = target
        self._gate = gate
        self._let_go = let_go
        self._poll_s = poll_s
        self.lock_timeout_s = lock_timeout_s
        self._db: Database | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._erasing = False  # this process holds (or waits for) the lock exclusively
        self.held_for_others = 0  # how often this process held still for another's erasure

    async def start(self) -> None:
        """Hold the lock shared (waiting while another process erases) and start looking."""
        self._db = await Database.open(self._target, [])
        try:
            await self._lock_shared()
        except BaseException:
            await self._db.close()
            self._db = None
            raise
        self._watcher = asyncio.get_running_loop().create_task(
            self._watch(), name="cluster-erasure"
        )

    async def close(self) -> None:
        """Stop looking and release the lock (with the connection)."""
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def _database(self) -> Database:
        if self._db is None:
            raise RuntimeError("ClusterErasure is not started")
        return self._db

    async def _lock_shared(self) -> None:
        await self._database.query("SELECT pg_advisory_lock_shared(?)", (LOCK_KEY,))

    async def _unlock_shared(self) -> None:
        await self._database.query("SELECT pg_advisory_unlock_shared(?)", (LOCK_KEY,))

    @contextlib.asynccontextmanager
    async def erasing(self) -> AsyncIterator[None]:
        """Run the block once every other process holds still (call it holding this process's
        gate for the erasure). :class:`ErasureBusy` when they did not within
        ``lock_timeout_s``: the block did not run."""
        db = self._database
        self._erasing = True
        try:
            try:
                await self._unlock_shared()
                await db.query(f"SET lock_timeout = {int(self.lock_timeout_s * 1000)}")
                await db.query("SELECT pg_advisory_lock(?)", (LOCK_KEY,))
            except Exception as exc:  # the wait ran out (or the database is away)
                with contextlib.suppress(Exception):  # else the next look holds it again
                    await db.query("SET lock_timeout = 0")
                    await self._lock_shared()
                raise ErasureBusy(
                    "another mindroom process sharing the database did not finish its work "
                    f"within {self.lock_timeout_s:.0f} s, or the database did not answer; "
                    "nothing was erased: try again"
                ) from exc
            await db.query("SET lock_timeout = 0")
            try:
                yield
            finally:
                await self._check_kept()
                try:
                    await db.query("SELECT pg_advisory_unlock(?)", (LOCK_KEY,))
                    await self._lock_shared()
                except Exception:  # a lost connection released it: the next look holds it
                    logger.warning("cannot hand the erasure lock back", exc_info=True)
        finally:
            self._erasing = False

    async def _check_kept(self) -> None:
        """Say so when the lock was lost during the erasure (its connection dropped): the
        other processes may have worked meanwhile."""
        try:
            row = await (await self._database.query(_KEPT, _KEY_PARTS)).fetchone()
            kept = bool(row.kept)
        except Exception:
            kept = False
        if not kept:
            logger.error(
                "the erasure lock was lost while erasing (the database connection dropped): "
                "other processes may have written meanwhile; run forget-me again"
            )

    async def _watch(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._look()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is away: look again at the next round
                logger.warning("cannot look for erasures of other processes", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await within(self._stopping.wait(), self._poll_s)

    async def _look(self) -> None:
        if self._erasing:
            return
        row = await self._state()
        if not row.held:  # a new connection (the old one was lost) holds nothing yet
            logger.warning(
                "the erasure lock was lost with the database connection: holding it again "
                "(an erasure by another process meanwhile may have run beside this one's work)"
            )
            await self._hold_still(relock_only=True)
            return
        if row.waiting:
            logger.info("another process is erasing a person: holding this one's work still")
            await self._hold_still()

    async def _state(self) -> Any:
        """Whether another process waits to erase, and whether this one holds its share."""
        return await (await self._database.query(_STATE, _KEY_PARTS)).fetchone()

    async def _hold_still(self, *, relock_only: bool = False) -> None:
        """Hold this process's gate (its running work ends, new work waits), let go of the
        people's stores, and hold the lock again once the erasure that waits is done. While
        the work here is still ending, the look goes on: an erasure that gave up meanwhile
        (:class:`ErasureBusy`) is not waited for."""
        holding = asyncio.Event()

        async def held() -> None:
            async with self._gate.erasing():
                holding.set()
                await self._let_go()
                if not relock_only:
                    self.held_for_others += 1
                    await self._unlock_shared()
                await self._lock_shared()  # granted once that erasure is done

        task = asyncio.get_running_loop().create_task(held(), name="cluster-erasure-hold")
        try:
            while not holding.is_set() and not task.done():  # this process's work ends
                with contextlib.suppress(TimeoutError):
                    await within(asyncio.shield(task), self._poll_s)
                if task.done() or holding.is_set() or relock_only:
                    continue
                waiting = (await self._state()).waiting
                if not waiting and not holding.is_set():  # that erasure gave up: go on
                    logger.info("the other process's erasure gave up: this one goes on")
                    task.cancel()  # (still waiting for this process's work: nothing let go)
                    break
            await asyncio.wait([task])
        except BaseException:
            task.cancel()
            await asyncio.wait([task])
            raise
        if not task.cancelled():
            task.result()


async def _nothing_open() -> None:
    """What a command outside the bot lets go of when it holds still: nothing."""


def run_alone(database: str, work: Callable[[], T], *, lock_timeout_s: float = 60.0) -> T:
    """Run ``work`` (blocking) while every mindroom process on ``database`` holds still: an
    erasure from outside the bot (``mindroom memory forget --user``). :class:`ErasureBusy`
    when they did not in time (``work`` did not run). Its own event loop, in a thread: it may
    be called with or without one running."""

    async def held() -> T:
        alone = ErasureGate()  # no work of its own: the others are what it waits for
        others = ClusterErasure(database, alone, _nothing_open, lock_timeout_s=lock_timeout_s)
        await others.start()
        try:
            async with others.erasing():
                return await asyncio.to_thread(work)
        finally:
            await others.close()

    with ThreadPoolExecutor(1, thread_name_prefix="erasure") as pool:
        return pool.submit(asyncio.run, held()).result()
