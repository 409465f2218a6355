"""The maintenance loop a running bot owns (and ``mindroom maintenance daemon`` runs alone).

It ticks (:meth:`~mindroom.memory.jobs.maintenance.runner.MaintenanceRunner.tick`) at once when
started,
then every ``memory.maintenance.tick_seconds`` or at the earliest due time, whichever comes
first, and when :meth:`MaintenanceLoop.poke`\\ d after memory writes. The poke is free: it
compares the wall clock with the earliest due time cached at the last tick, so a machine
that slept through a due time runs the job at the first write after it wakes instead of
waiting out a timer (asyncio's timers do not count the time a machine sleeps).

``memory.maintenance.enabled: false`` keeps the loop idle (read at every round, so a reload
turns it on or off) and its database unopened. :meth:`MaintenanceLoop.stop` ends a running
job at its next heartbeat, within a grace period, and cancels it after that; either way its
run is recorded and its lease released, and the job is due again at the next start. The bot
and the daemon may run side by side on one storage: the job's lease lets one of them run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mindroom.config.schema import Config
from mindroom.memory.jobs.maintenance.runner import Clock, MaintenanceRunner, utc_now
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.people.erasure import ErasureGate
from mindroom.tasks import within

if TYPE_CHECKING:
    from mindroom.memory.registry import MemoryRegistry
    from mindroom.tasks import TaskSupervisor

logger = logging.getLogger(__name__)

DB_NAME = "maintenance.db"
_MIN_WAIT_S = 1.0  # a due job leased elsewhere is looked at again this soon at the most


def db_path(storage: Path) -> Path:
    """The schedule's database of a storage root: ``<storage>/mindroom_data/maintenance.db``."""
    return storage / "mindroom_data" / DB_NAME


def schedule_target(storage: Path, database: str | None) -> Path | str:
    """The schedule: ``storage.database`` (PostgreSQL) when set, else :func:`db_path`."""
    return database or db_path(storage)


class WritesNotifier(Protocol):
    """Something that calls ``on_cycle`` after it wrote memory (the flush worker)."""

    on_cycle: Callable[[], object] | None


class MaintenanceLoop:
    """Owns one runner and ticks it in the background (see the module docstring)."""

    def __init__(
        self,
        config: Callable[[], Config],
        storage: Path,
        registry: MemoryRegistry | None,
        *,
        clock: Clock = utc_now,
        interval_seconds: float | None = None,
        gate: ErasureGate | None = None,
    ) -> None:
        self.config = config
        self.gate = gate  # the bot's, against forget-me (see MaintenanceRunner)
        self.storage = storage
        self.registry = registry
        self.clock = clock
        self.interval_seconds = interval_seconds  # None: memory.maintenance.tick_seconds
        self.runner: MaintenanceRunner | None = None  # made at the first enabled round
        self.next_due: datetime | None = None  # cached for poke(): no I/O there
        self.ticks = 0
        self.checks = 0  # rounds of the loop, ticking or not
        self._wake = asyncio.Event()
        self._stopping = False
        # several processes on one database: the one running the router maintains memory
        self.active: Callable[[], bool] = lambda: True
        self._task: asyncio.Task[Any] | None = None

    def start(self, tasks: TaskSupervisor, wake_after: WritesNotifier | None = None) -> None:
        """Run the loop as the service ``maintenance`` of ``tasks`` (it returns at once; the
        first tick runs in the background), poked after each cycle of ``wake_after``."""
        tasks.keep_running("maintenance", self.run)
        if wake_after is not None:
            wake_after.on_cycle = self.poke

    def poke(self) -> bool:
        """After memory writes: wake the loop when a job is due by the cached time."""
        due = self.next_due
        if self._stopping or due is None or self.clock() < due:
            return False
        self._wake.set()
        return True

    async def run(self) -> None:
        """Tick, wait, repeat until :meth:`stop`."""
        self._task = asyncio.current_task()
        while not self._stopping:
            settings = self.config().memory.maintenance
            self.checks += 1
            if settings.enabled and self.active():
                await self._tick()
            else:
                self.next_due = None
            wait = self.interval_seconds or settings.tick_seconds
            if self.next_due is not None:
                until_due = (self.next_due - self.clock()).total_seconds()
                wait = min(wait, max(_MIN_WAIT_S, until_due))
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), wait)
            self._wake.clear()

    async def _tick(self) -> None:
        try:
            if self.runner is None:
                target = schedule_target(self.storage, self.config().storage.database)
                store = await asyncio.to_thread(MaintenanceStore, target)
                self.runner = MaintenanceRunner(
                    store,
                    self.storage,
                    self.config,
                    registry=self.registry,
                    clock=self.clock,
                    gate=self.gate,
                )
            if self._stopping:
                return
            self.ticks += 1
            await self.runner.tick()
            self.next_due = await asyncio.to_thread(self.runner.store.earliest_due)
        except Exception:  # the loop's edge: logged, and the next round tries again
            logger.exception("maintenance tick failed")

    async def stop(self, grace_s: float) -> None:
        """End the loop: a running job stops at its next heartbeat within ``grace_s``, else
        it is cancelled; its run is recorded and its lease released either way."""
        self._stopping = True
        if self.runner is not None:
            self.runner.request_stop()
        self._wake.set()
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            done, _ = await asyncio.wait({task}, timeout=grace_s)
            if not done:
                logger.info(
                    "maintenance: the running job did not stop in %.0f s; cancelling", grace_s
                )
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.runner is not None:  # its connections (PostgreSQL: a pool)
            await asyncio.to_thread(self.runner.store.close)
