"""Waiting for a condition, never for a fixed time: the one poll loop of the tests.

:func:`wait_until` is for async tests, :func:`wait_until_sync` for plain ones (threads,
subprocesses). Both return the condition's first truthy value, so a test can wait for a thing
and use it::

    row = await wait_until(lambda: ledger_row(path, event_id), "the event was claimed")

and fail with an ``AssertionError`` naming what did not happen. A long default timeout costs
nothing when the condition holds; it only bounds a failing test (pytest-timeout bounds it too).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["wait_until", "wait_until_sync"]


async def wait_until(
    condition: Callable[[], T | Awaitable[T]],
    what: str = "the condition",
    timeout: float = 60.0,
    *,
    interval: float = 0.05,
) -> T:
    """Poll ``condition`` (a function, or one returning an awaitable, such as a coroutine
    function or ``lambda: asyncio.to_thread(check)``) until it returns something truthy; that
    value. ``AssertionError`` naming ``what`` after ``timeout`` seconds.

    A plain function runs on the event loop: it should read cheap state (attributes, a small
    file, a SQLite row); wrap anything slower in :func:`asyncio.to_thread`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {what}")
        await asyncio.sleep(interval)


def wait_until_sync(
    condition: Callable[[], T],
    what: str = "the condition",
    timeout: float = 60.0,
    *,
    interval: float = 0.02,
) -> T:
    """:func:`wait_until` for a test without an event loop: blocks the calling thread."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {what}")
        time.sleep(interval)
    return result
