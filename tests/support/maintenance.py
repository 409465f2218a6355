"""What the maintenance tests share: a settable clock, a counting job type, small configs.

The config schema knows one job type, ``consolidation``; the tests register their own runner
under that name (``JOB_TYPES`` is the scheduler's registry, consulted before the lazy import of
the real consolidation), so what is tested is the scheduler, with a job that counts its runs.
Run as a script it is one tick of a runner in its own process (the two-process test).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mindroom.config import Config, parse_config
from mindroom.memory.jobs.maintenance.runner import JobContext
from mindroom.memory.jobs.maintenance.store import MaintenanceStore


@dataclass
class FakeClock:
    """An injectable clock: ``now`` until moved."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def maintenance_config(jobs: dict[str, dict[str, Any]], **settings: Any) -> Config:
    """A config whose ``memory.maintenance`` has ``jobs`` (the default jobs switched off unless
    named) and ``settings`` (timezone UTC unless given)."""
    merged: dict[str, Any] = {
        "consolidation_daily": {"enabled": False},
        "consolidation_weekly": {"enabled": False},
        "memory_lifecycle": {"enabled": False},
    }
    merged.update(jobs)
    maintenance = {"timezone": "UTC", **settings, "jobs": merged}
    return parse_config(json.dumps({"memory": {"maintenance": maintenance}}), "config.yaml")


EVERY_HOUR = {"cadence": "interval", "interval_minutes": 60}


def write_config(folder: Path, jobs: dict[str, object], **settings: object) -> Path:
    """A config.yaml (JSON is YAML) with these maintenance jobs; the defaults stay as they are
    unless ``jobs`` names them."""
    maintenance = {"timezone": "Europe/Berlin", **settings, "jobs": jobs}
    path = folder / "config.yaml"
    path.write_text(json.dumps({"memory": {"maintenance": maintenance}}))
    return path


def store_of(folder: Path) -> MaintenanceStore:
    return MaintenanceStore(folder / "mindroom_data" / "maintenance.db")


@dataclass
class CountingJob:
    """A job type that records each run's context and returns ``stats``.

    With ``gate`` it waits (in a worker thread) until the gate opens, so a test can hold a run
    open while a second runner ticks; ``started`` is set when a run begins.
    """

    stats: dict[str, Any] = field(default_factory=lambda: {"model_calls": 0, "merged": 1})
    gate: threading.Event | None = None
    started: threading.Event = field(default_factory=threading.Event)
    runs: list[JobContext] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, ctx: JobContext) -> dict[str, Any]:
        with self.lock:
            self.runs.append(ctx)
        self.started.set()
        if self.gate is not None:
            gate = self.gate
            opened = await asyncio.to_thread(gate.wait, 30)
            assert opened, "the test never opened the gate"
        return dict(self.stats)


async def _file_gated_job(ctx: JobContext) -> dict[str, Any]:
    """The job of the process test: notes its run in ``ran.txt``, waits for ``release``."""
    folder = ctx.storage
    with (folder / "ran.txt").open("a") as handle:
        handle.write(f"{ctx.job.name}\n")
    deadline = time.monotonic() + 30
    while not (folder / "release").exists():  # a condition, polled: the test opens it
        assert time.monotonic() < deadline, "never released"
        ctx.heartbeat()  # between units of work, as a real job does
        await asyncio.sleep(0.02)
    return {"model_calls": 0}


def register_gated_job() -> None:
    """Make ``consolidation`` the file-gated job in this process (for a CLI subprocess)."""
    from mindroom.memory.jobs.maintenance.runner import JOB_TYPES

    JOB_TYPES["consolidation"] = _file_gated_job


def _tick_in_process(folder: Path, now: str) -> None:
    """One tick of a runner of its own, in this process, at ``now``; prints its results."""
    from mindroom.memory.jobs.maintenance.runner import MaintenanceRunner
    from mindroom.memory.jobs.maintenance.store import MaintenanceStore

    register_gated_job()
    config = maintenance_config({"every_hour": EVERY_HOUR})
    clock = FakeClock(datetime.fromisoformat(now))
    store = MaintenanceStore(folder / "maintenance.db")
    runner = MaintenanceRunner(store, folder, lambda: config, clock=clock)
    while not (folder / "go").exists():  # both processes start their tick together
        time.sleep(0.01)
    results = asyncio.run(runner.tick())
    print(json.dumps([[r.job, r.status, r.summary] for r in results]))


if __name__ == "__main__":
    _tick_in_process(Path(sys.argv[1]), sys.argv[2])


T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday
