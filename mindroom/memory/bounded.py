"""Memory calls from the event loop: in a worker thread, with a bound on how long they take.

Memory operations read and write files and SQLite; they run in a thread so the event loop
never waits, and the caller gets an answer (an error) in time even if the thread is stuck.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from mindroom.errors import MemoryStoreError

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
        return await asyncio.wait_for(
            asyncio.to_thread(_no_stop_iteration, function, *args, **kwargs), CALL_SECONDS
        )
    except TimeoutError:
        raise MemoryStoreError(
            f"the memory operation did not finish in {CALL_SECONDS:.0f} s; try again"
        ) from None
