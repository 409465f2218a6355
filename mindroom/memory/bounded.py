"""Memory calls from the event loop: in a worker thread, with a bound on how long they take.

Memory operations read and write files and SQLite; they run in a thread so the event loop
never waits, and the caller gets an answer (an error) in time even if the thread is stuck.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from mindroom.errors import MemoryStoreError
from mindroom.tasks import within

_T = TypeVar("_T")

# far above files.OPERATION_SECONDS: a safety net, the protocol's own bounds come first
CALL_SECONDS = 60.0


def _no_stop_iteration(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    try:
        return function(*args, **kwargs)
    except StopIteration:  # would never resolve the awaiting future: make it an error
        raise MemoryStoreError("the memory operation failed; try again") from None


async def bounded(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run ``function`` in a worker thread; MemoryStoreError if it takes over CALL_SECONDS
    (the thread itself cannot be stopped; the caller gets its answer, an error, in time)."""
    try:
        return await within(
            asyncio.to_thread(_no_stop_iteration, function, *args, **kwargs), CALL_SECONDS
        )
    except TimeoutError:
        raise MemoryStoreError(
            f"the memory operation did not finish in {CALL_SECONDS:.0f} s; try again"
        ) from None


class Threads:
    """Blocking work in worker threads that an owner can wait for before closing.

    A thread cannot be stopped: when its caller times out or is cancelled it keeps running,
    and closing the store it writes to under it (mem0's SQLite, a memory's index) can crash
    the process. The owner runs such work through :meth:`run` and calls :meth:`drain` before
    it closes what the work uses.
    """

    def __init__(self, on_start: Callable[[asyncio.Future[Any]], None] | None = None) -> None:
        self._running: set[asyncio.Future[Any]] = set()
        self._on_start = on_start  # told of each thread (the bot's erasure gate tracks them)

    async def run(self, timeout: float, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)`` in a thread; TimeoutError after ``timeout`` (the thread is
        still waited for by :meth:`drain`)."""
        future = asyncio.ensure_future(asyncio.to_thread(function, *args))
        self._running.add(future)
        future.add_done_callback(self._finished)
        if self._on_start is not None:
            self._on_start(future)
        return await within(asyncio.shield(future), timeout)

    def _finished(self, future: asyncio.Future[Any]) -> None:
        self._running.discard(future)
        if not future.cancelled():
            future.exception()  # a caller that gave up has logged its own failure already

    def busy(self) -> int:
        """How many threads are still running."""
        return len(self._running)

    async def drain(self, timeout: float) -> bool:
        """Wait until every thread has finished, at most ``timeout``; True when they have."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)
        return not self._running
