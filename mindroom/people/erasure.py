"""Forget-me and the work done on people's behalf: who waits for whom.

An erasure (the ``/me`` forget button, while the bot runs) removes a person's part of every
store. Work that runs at the same moment could write it again: an answer in flight stores its
session and the memory its tools wrote, a flush writes the facts it extracted, and a shared
agent's session read before the erase would be saved back whole after it. Which of those hold
the person's words is not knowable while they run, so the rule is decided here, once, for all
of them:

* work on people's behalf runs inside :meth:`ErasureGate.working`, any number at a time:
  answering a message (``Answerer.handle``) and indexing its session, a reaction (a consent
  given), a consent offer, a flush of a conversation, a curation pass, a maintenance run, a
  re-index after a hand edit, a memory edit on the dashboard or ``/me``, the start-up's
  audience backfill (it writes rooms' readers, people's IDs);
* an erasure runs inside :meth:`ErasureGate.erasing`, alone: it waits until the work running
  now has ended, and work that starts meanwhile waits until the erasure is done. So an erase
  never overlaps work it could miss, and work after it reads the data as it is now.

Work nested in work (an answer that runs a command, a task an answer awaits) joins the lease
it runs under instead of queueing behind a waiting erasure, which would wait for it in turn.
Work that outlives its lease (a thread cannot be stopped: a mem0 extraction past its timeout,
recall's events written beside the answer) is :meth:`ErasureGate.track`-ed: an erasure waits
for it too before it runs.
Forget-me is rare and quick; while one waits, new answers wait with it (for at most the
longest answer running then), which is what lets it ever start on a busy bot.

The gate is one process's. Several processes sharing one database each have their own, and
:mod:`mindroom.cluster.erasure` makes an erasure in any of them hold the others' gates too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass
class _Lease:
    gate: ErasureGate
    live: bool = True


_held: ContextVar[_Lease | None] = ContextVar("mindroom_erasure_lease", default=None)


class ErasureGate:
    """Many workers or one erasure (see the module docstring). One per running bot, on one
    event loop."""

    def __init__(self) -> None:
        self._working = 0
        self._erasing = False
        self._queued = 0  # erasures waiting for the work running now to end
        self._held_back = 0  # work waiting for an erasure to be done
        self._outliving: set[asyncio.Future[Any]] = set()  # see track()
        self._changed = asyncio.Event()

    @property
    def working_now(self) -> int:
        """How many pieces of work hold the gate."""
        return self._working

    @property
    def held_back(self) -> int:
        """How many pieces of work wait for an erasure to be done."""
        return self._held_back

    @property
    def erasure_waiting(self) -> bool:
        """Whether an erasure waits for work to end (new work waits behind it)."""
        return self._queued > 0

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._changed.wait()

    @contextlib.asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        """Work on people's behalf: waits while an erasure runs or waits."""
        outer = _held.get()
        if outer is None or outer.gate is not self or not outer.live:
            self._held_back += 1
            try:
                await self._wait(lambda: not self._erasing and not self._queued)
            finally:
                self._held_back -= 1
        self._working += 1  # no await between the check and this: the loop runs one task
        lease = _Lease(self)
        token = _held.set(lease)
        try:
            yield
        finally:
            lease.live = False
            _held.reset(token)
            self._working -= 1
            self._notify()

    def track(self, future: asyncio.Future[Any]) -> None:
        """Work that may outlive the lease it started under (a thread that cannot be
        stopped): an erasure also waits for ``future`` to be done before it runs."""
        if not future.done():
            self._outliving.add(future)
            future.add_done_callback(self._outliving.discard)

    @contextlib.asynccontextmanager
    async def erasing(self) -> AsyncIterator[None]:
        """An erasure: returns once no work runs and no tracked work is left, and keeps new
        work waiting until it ends."""
        self._queued += 1
        try:
            if self._working or self._erasing:
                logger.info("forget-me waits for %d answers or flushes in progress", self._working)
            await self._wait(lambda: not self._erasing and not self._working)
        finally:
            self._queued -= 1
            self._notify()  # a cancelled erasure lets the work it held back go
        self._erasing = True
        try:
            if self._outliving:  # no new work can start meanwhile: these are the last writers
                await asyncio.wait(set(self._outliving))
            yield
        finally:
            self._erasing = False
            self._notify()
