"""One tick: every due, enabled job runs once through its job type, and every run is audited.

A job type is an async function ``(JobContext) -> dict`` of stats, which must include
``"model_calls": int`` (summed per day into the next run's ``model_calls_today``: the day
budget of every job of one type is shared). Types live in :data:`JOB_TYPES`; a type missing
there is imported on first use from :data:`LAZY_JOB_TYPES` (``consolidation`` is
``mindroom.memory.jobs.consolidate.run:run_consolidation``). A type that cannot be loaded, a job
that
raises or returns no stats: the run is recorded ``failed`` with the reason and the job waits for
its next due time; the runner itself never fails for a job.

The runner claims a job's lease before running it (see
:mod:`mindroom.memory.jobs.maintenance.store`) and
keeps it alive in the background while the job runs. A job should call ``ctx.heartbeat()``
between its units of work (scopes): it raises :class:`JobInterrupted` once the runner is
stopping (shutdown) or another runner took the lease over (this process was suspended past the
lease), so the job ends at a clean boundary. Such a run, and a cancelled one, is recorded
``failed`` ("interrupted") and the job stays due: it runs again at the next tick or start.
This module decides nothing about time: due times come from
:mod:`mindroom.memory.jobs.maintenance.schedule`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindroom.config.schema import Config
from mindroom.memory.jobs.maintenance.jobs import Job
from mindroom.memory.jobs.maintenance.schedule import day_start, zone
from mindroom.memory.jobs.maintenance.store import Claim, MaintenanceStore
from mindroom.people.erasure import ErasureGate

if TYPE_CHECKING:
    from mindroom.memory.registry import MemoryRegistry

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock (aware, UTC)."""
    return datetime.now(UTC)


class JobInterrupted(BaseException):  # noqa: N818 - a signal, like CancelledError
    """Raised by ``ctx.heartbeat()``: the run must end now (shutdown, or the lease was lost).

    A BaseException, like :class:`asyncio.CancelledError`, so that a job's ``except Exception``
    around one scope does not swallow it and go on running without the lease.
    """


@dataclass(frozen=True)
class JobContext:
    """What a job type gets for one run."""

    job: Job  # the job's name and effective settings (``job.name``, ``job.llm_command``)
    mode: str  # "light" (no model calls) or "deep"
    now: datetime  # the run's start, aware UTC, from the runner's (injectable) clock
    # stats.model_calls of this job type's runs since midnight in memory.maintenance.timezone
    model_calls_today: int
    config: Config
    storage: Path  # the storage root (the agents' workspaces, mindroom_data)
    registry: MemoryRegistry | None  # the bot's open memories; None: open your own
    heartbeat: Callable[[], None]  # between scopes: keeps the lease, raises JobInterrupted


JobRunner = Callable[[JobContext], Awaitable[dict[str, Any]]]
JOB_TYPES: dict[str, JobRunner] = {}
LAZY_JOB_TYPES = {
    "consolidation": "mindroom.memory.jobs.consolidate.run:run_consolidation",
    "lifecycle": "mindroom.memory.jobs.lifecycle:run_lifecycle",
}


class JobTypeUnavailable(Exception):  # noqa: N818 - reads as the sentence it reports
    """The job type is unknown or its module cannot be imported."""


def job_runner(job_type: str) -> JobRunner:
    """The runner of ``job_type``: registered, or imported now from :data:`LAZY_JOB_TYPES`."""
    if job_type in JOB_TYPES:
        return JOB_TYPES[job_type]
    target = LAZY_JOB_TYPES.get(job_type)
    if target is None:
        raise JobTypeUnavailable(f"unknown job type {job_type!r}")
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise JobTypeUnavailable(
                f"job type {job_type!r} is not available: this version of mindroom has no "
                f"{module_name}"
            ) from None
        raise JobTypeUnavailable(f"job type {job_type!r} cannot be loaded: {exc}") from exc
    except Exception as exc:
        raise JobTypeUnavailable(
            f"job type {job_type!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc
    runner = getattr(module, attribute, None)
    if runner is None:
        raise JobTypeUnavailable(f"job type {job_type!r}: {module_name} has no {attribute}")
    return runner  # type: ignore[no-any-return]


@dataclass(frozen=True)
class TickResult:
    """What a tick did with one due job: ``completed``, ``failed`` or ``skipped`` (why)."""

    job: str
    status: str
    summary: str = ""
    run_id: str | None = None


def runner_owner() -> str:
    """A name for one runner: host, pid and a random part (two runners of one process differ)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class _Lease:
    """The lease of one run: extended by the keeper task and by ``ctx.heartbeat()``."""

    def __init__(self, runner: MaintenanceRunner, claim: Claim, clock: Clock) -> None:
        self.runner, self.claim, self.clock = runner, claim, clock
        self.extended = clock()
        self.lost = False
        self._lock = threading.Lock()

    def extend(self, force: bool = False) -> bool:
        """One heartbeat in SQLite (skipped when the last is recent); False once lost."""
        with self._lock:
            now = self.clock()
            recent = now - self.extended < timedelta(seconds=self.runner.heartbeat_seconds)
            if self.lost or (recent and not force):
                return not self.lost
            held = self.runner.store.heartbeat(
                self.claim, self.runner.owner, now, self.runner.lease_seconds
            )
            self.extended, self.lost = now, not held
            if not held:
                logger.warning(
                    "maintenance job %s: its lease was taken over by another runner",
                    self.claim.job.name,
                )
            return held

    def beat(self) -> None:
        """``ctx.heartbeat()``: keep the lease; raise :class:`JobInterrupted` when the run
        must end."""
        if self.runner.stopping.is_set():
            raise JobInterrupted("interrupted: the maintenance runner is stopping")
        if self.runner.gate.erasure_waiting:  # forget-me waits for this run: end it now
            raise JobInterrupted("interrupted: a person is being forgotten (runs again next tick)")
        if not self.extend():
            raise JobInterrupted("interrupted: another runner took the job's lease over")


class MaintenanceRunner:
    """Ticks: applies config.yaml's jobs, then runs the due ones, one after another."""

    def __init__(
        self,
        store: MaintenanceStore,
        storage: Path,
        config: Callable[[], Config],
        *,
        registry: MemoryRegistry | None = None,
        clock: Clock = utc_now,
        owner: str | None = None,
        lease_seconds: float = 300.0,
        heartbeat_seconds: float = 30.0,
        gate: ErasureGate | None = None,
    ) -> None:
        self.store = store
        # the bot's: a forget-me waits for a run in progress (which ends at its next
        # heartbeat), and no run starts while one waits or erases
        self.gate = gate or ErasureGate()
        self.storage = storage
        self.config = config
        self.registry = registry
        self.clock = clock
        self.owner = owner or runner_owner()
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.stopping = threading.Event()  # read by ctx.heartbeat() in any thread
        self._applied: Config | None = None  # the config whose jobs were applied last

    def request_stop(self) -> None:
        """Make running jobs end at their next heartbeat, and no further job start."""
        self.stopping.set()

    async def sync(self, now: datetime | None = None) -> tzinfo:
        """Apply the jobs of the config to the database when the config is a new one (a
        start, a reload); returns the zone of the windows.

        Only then: a bot whose config is behind config.yaml (a reload pending, or refused)
        must not undo what ``mindroom maintenance`` applied from the file meanwhile.
        """
        config = self.config()
        settings = config.memory.maintenance
        tz = zone(settings.timezone)
        if self._applied is not config:
            await asyncio.to_thread(self.store.apply_config, settings.jobs, now or self.clock(), tz)
            self._applied = config
        return tz

    async def tick(self, now: datetime | None = None) -> list[TickResult]:
        """Run every due, enabled job once (``now``: the tick's time; default the clock)."""
        clock: Clock = (lambda: now) if now is not None else self.clock
        tz = await self.sync(clock())
        await asyncio.to_thread(self.store.reap, clock())
        results = []
        for job in await asyncio.to_thread(self.store.jobs):
            if self.stopping.is_set():
                break
            if job.enabled and job.next_due_at <= clock():
                results.append(await self._run(job.name, clock, tz))
        return results

    async def run_now(self, name: str) -> TickResult:
        """Run job ``name`` now, due or not (never beside another run of it: the lease holds);
        its next due time is then computed as after any run. KeyError: no such job."""
        tz = await self.sync(self.clock())
        await asyncio.to_thread(self.store.reap, self.clock())
        if await asyncio.to_thread(self.store.job, name) is None:
            raise KeyError(name)
        return await self._run(name, self.clock, tz, due=False)

    async def _run(self, name: str, clock: Clock, tz: tzinfo, *, due: bool = True) -> TickResult:
        async with self.gate.working():
            return await self._run_held(name, clock, tz, due=due)

    async def _run_held(
        self, name: str, clock: Clock, tz: tzinfo, *, due: bool = True
    ) -> TickResult:
        claim = await asyncio.to_thread(
            partial(self.store.claim, name, self.owner, clock(), self.lease_seconds, due=due)
        )
        if claim.run_id is None:
            return TickResult(name, "skipped", claim.reason)
        job, started = claim.job, claim.started_at or clock()
        calls = await asyncio.to_thread(
            self.store.model_calls_since, job.job_type, day_start(started, tz)
        )
        lease = _Lease(self, claim, clock)
        ctx = JobContext(
            job, job.mode, started, calls, self.config(), self.storage, self.registry, lease.beat
        )
        logger.info("maintenance job %s (%s, %s) starts", name, job.job_type, job.mode)
        work = asyncio.create_task(self._work(ctx), name=f"maintenance:{name}")
        keeper = asyncio.create_task(self._keep(lease, work))
        try:
            status, stats, error, advance = await work
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not lease.lost or (current is not None and current.cancelling()):
                # shutdown: recorded at once (no await left to a cancelled task), then raised
                self.store.finish(
                    claim,
                    self.owner,
                    clock(),
                    tz,
                    status="failed",
                    advance=False,
                    error="interrupted: cancelled (the runner stopped)",
                )
                raise
            status, stats, advance = "failed", {}, False
            error = "interrupted: another runner took the job's lease over"
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
        summary = _summary(stats) if status == "completed" else None
        await asyncio.to_thread(
            self.store.finish,
            claim,
            self.owner,
            clock(),
            tz,
            status=status,
            summary=summary,
            stats=stats,
            error=error,
            advance=advance,
        )
        if status == "completed":
            logger.info("maintenance job %s completed: %s", name, summary)
        else:
            logger.warning("maintenance job %s failed: %s", name, error)
        return TickResult(name, status, summary or error or "", claim.run_id)

    async def _work(self, ctx: JobContext) -> tuple[str, dict[str, Any], str | None, bool]:
        """Run the job: ``(status, stats, error, advance the due time)``; never raises for
        the job's own failures."""
        try:
            # imported in a thread: a job module's first import must not stall the replies
            runner = await asyncio.to_thread(job_runner, ctx.job.job_type)
            result = await runner(ctx)
        except JobInterrupted as exc:
            return "failed", {}, str(exc), False
        except JobTypeUnavailable as exc:
            return "failed", {}, str(exc), True
        except Exception as exc:
            logger.exception("maintenance job %s failed", ctx.job.name)
            return "failed", {}, f"{type(exc).__name__}: {exc}", True
        if not isinstance(result, dict):
            return (
                "failed",
                {},
                f"the job returned {type(result).__name__}, not a dict of stats",
                True,
            )
        stats = json.loads(json.dumps(result, default=str))
        if not isinstance(stats.get("model_calls"), int):
            logger.warning("maintenance job %s reported no model_calls; counted 0", ctx.job.name)
            stats["model_calls"] = 0
        return "completed", stats, None, True

    async def _keep(self, lease: _Lease, work: asyncio.Task[Any]) -> None:
        """Extend the lease while the job runs; cancel the job if the lease was lost."""
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                held = await asyncio.to_thread(lease.extend, True)
            except Exception:
                logger.exception("maintenance: cannot extend the lease of %s", lease.claim.job.name)
                continue
            if not held:
                work.cancel()
                return


def _summary(stats: dict[str, Any]) -> str:
    """``stats["summary"]`` if the job wrote one, else its figures: ``merged 5, model_calls 0``."""
    if isinstance(stats.get("summary"), str):
        return str(stats["summary"])
    figures = [
        (k, v) for k, v in stats.items() if isinstance(v, int | float) and k != "model_calls"
    ]
    figures.append(("model_calls", stats.get("model_calls", 0)))
    return ", ".join(f"{key} {value}" for key, value in figures)
