"""Ownership of every background task: nothing runs unowned, nothing dies silently.

:class:`TaskSupervisor` holds two kinds of task:

* **services** (a sync loop, the memory watcher, the flush loop, the config watcher) run for
  the bot's lifetime. One that raises is logged at once, with its name and traceback, and
  restarted after a growing pause (1 s, doubling, at most 60 s); one that returns has ended
  on purpose and is not restarted.
* **jobs** (answering one message) run once. A job that raises is logged at once.

:meth:`TaskSupervisor.stop` cancels the services, gives jobs a grace period, cancels the rest
and awaits everything. What it deliberately does not do: decide what a task does or retry a
job (the ledger resumes unfinished answers at the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

RESTART_FIRST_S = 1.0
RESTART_MAX_S = 60.0
_HEALTHY_S = 300.0  # a service that ran this long before failing starts its back-off afresh
_CANCEL_AGAIN_S = 1.0  # a task still running this long after a cancel is cancelled again


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, raising TimeoutError after ``seconds`` (None: no limit).

    What ``asyncio.wait_for`` does, without its flaw on Python 3.11: there, a cancellation
    that arrives as the awaited thing finishes is swallowed, so a loop around it runs on after
    its task was cancelled, and a shutdown waiting for that task hangs.
    """
    async with asyncio.timeout(seconds):
        return await awaitable


async def to_the_end(awaitable: Awaitable[T], on_cancel: Callable[[], object] | None = None) -> T:
    """``await awaitable`` to its end even when the caller is cancelled, once or more: then
    ``on_cancel()`` (at the first cancel: ask the work to end soon), and the cancel is raised
    once the work ended (its own result or error is dropped).

    For work that must not be left running under the next step (a statement in a thread on
    a connection the caller rolls back next, a rollback, a close). ``asyncio.shield`` alone
    is not enough: a second cancel ends the wait for the shielded work."""
    running = asyncio.ensure_future(awaitable)
    cancel: asyncio.CancelledError | None = None
    while not running.done():
        try:
            await asyncio.wait({running})  # never cancels ``running``
        except asyncio.CancelledError as exc:
            if cancel is None and on_cancel is not None:
                on_cancel()
            cancel = exc
    if cancel is not None:
        if not running.cancelled():
            running.exception()  # retrieved: what the caller sees is the cancel
        raise cancel
    return running.result()


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it ended, cancelling it again each second while it runs
    on (code that swallowed a cancellation is not left running, and nothing waits forever)."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=_CANCEL_AGAIN_S)
        if not task.done():
            logger.warning("%s ran on after it was cancelled; cancelling it again", task.get_name())
    with contextlib.suppress(BaseException):
        task.result()


class TaskSupervisor:
    """Starts, watches, restarts and stops the bot's tasks."""

    def __init__(self) -> None:
        self._services: dict[str, asyncio.Task[None]] = {}
        self._jobs: set[asyncio.Task[Any]] = set()
        self.failures: dict[str, str] = {}  # service or job name -> its last error, for status

    # -- services -------------------------------------------------------------------------------

    def keep_running(self, name: str, factory: Callable[[], Awaitable[None]]) -> None:
        """Run ``factory()`` as service ``name`` until it returns or :meth:`stop` (restarting)."""
        if name in self._services and not self._services[name].done():
            raise RuntimeError(f"a service named {name!r} is already running")
        self._services[name] = asyncio.create_task(self._supervise(name, factory), name=name)

    async def _supervise(self, name: str, factory: Callable[[], Awaitable[None]]) -> None:
        pause = RESTART_FIRST_S
        while True:
            started = time.monotonic()
            try:
                await factory()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures[name] = f"{type(exc).__name__}: {exc}"
                if time.monotonic() - started > _HEALTHY_S:
                    pause = RESTART_FIRST_S
                logger.exception("%s failed; restarting it in %.0f s", name, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, RESTART_MAX_S)

    async def cancel(self, name: str) -> None:
        """Stop service ``name`` (if running) and wait for it to end."""
        task = self._services.pop(name, None)
        if task is not None:
            await cancel_and_wait(task)

    def running(self, name: str) -> bool:
        """True while service ``name`` is running (or waiting to restart)."""
        task = self._services.get(name)
        return task is not None and not task.done()

    # -- jobs ---------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` once as job ``name``; a failure is logged the moment it happens."""
        task = asyncio.create_task(coro, name=name)
        self._jobs.add(task)
        task.add_done_callback(self._job_done)
        return task

    def _job_done(self, task: asyncio.Task[Any]) -> None:
        self._jobs.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.failures[task.get_name()] = f"{type(exc).__name__}: {exc}"
            logger.error("%s failed", task.get_name(), exc_info=exc)

    def jobs(self, prefix: str = "") -> list[asyncio.Task[Any]]:
        """The jobs running now whose names start with ``prefix``."""
        return [t for t in self._jobs if t.get_name().startswith(prefix)]

    # -- shutdown -----------------------------------------------------------------------------

    async def stop(self, grace_s: float) -> None:
        """Cancel every service, let jobs finish for ``grace_s``, cancel the rest, await all.

        A job spawned meanwhile (a turn finishing spawns the indexing of its session) is
        waited for too, within the same grace: none is left running once this returns."""
        for name in list(self._services):
            await self.cancel(name)
        deadline = time.monotonic() + grace_s
        while jobs := [task for task in self._jobs if not task.done()]:
            _, pending = await asyncio.wait(jobs, timeout=max(deadline - time.monotonic(), 0))
            for task in pending:
                await cancel_and_wait(task)
