"""The background loop a bot (or ``mindroom maintenance daemon``) runs: ticks at start, on its
interval and when poked after memory writes; off with ``memory.maintenance.enabled: false``;
stops cleanly, releasing the lease of a running job."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from mindroom.config import Config
from mindroom.memory.jobs.maintenance.loop import MaintenanceLoop
from mindroom.memory.jobs.maintenance.runner import JOB_TYPES, JobContext
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.tasks import TaskSupervisor
from tests.support.maintenance import EVERY_HOUR, T0, CountingJob, FakeClock, maintenance_config
from tests.support.waiting import wait_until

pytestmark = pytest.mark.asyncio


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingJob:
    job = CountingJob()
    monkeypatch.setitem(JOB_TYPES, "consolidation", job)
    return job


class Settable:
    """A config getter whose config a test replaces (a hot reload)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> Config:
        return self.config


async def test_the_loop_ticks_at_start_in_the_background(
    tmp_path: Path, counting: CountingJob
) -> None:
    counting.gate = threading.Event()  # the run stays open: start must not wait for it
    loop = MaintenanceLoop(Settable(maintenance_config({"hourly": EVERY_HOUR})), tmp_path, None)
    tasks = TaskSupervisor()
    loop.start(tasks)  # returns at once
    await wait_until(lambda: len(counting.runs) == 1)
    counting.gate.set()
    store = MaintenanceStore(tmp_path / "mindroom_data" / "maintenance.db")
    await wait_until(lambda: [r.status for r in store.runs("hourly")] == ["completed"])
    await loop.stop(5)
    await tasks.stop(1)


async def test_a_poke_after_memory_writes_runs_a_job_that_became_due(
    tmp_path: Path, counting: CountingJob
) -> None:
    clock = FakeClock(T0)
    config = maintenance_config({"hourly": EVERY_HOUR}, tick_seconds=3600)
    loop = MaintenanceLoop(Settable(config), tmp_path, None, clock=clock)
    tasks = TaskSupervisor()
    loop.start(tasks)
    await wait_until(lambda: len(counting.runs) == 1)
    await wait_until(lambda: loop.next_due is not None)
    assert loop.poke() is False  # nothing due: the loop is not woken
    clock.advance(minutes=30)
    assert loop.poke() is False
    assert loop.ticks == 1
    clock.advance(minutes=31)  # the machine slept past the due time; the timer is far off
    assert loop.poke() is True
    await wait_until(lambda: len(counting.runs) == 2)
    assert loop.ticks == 2
    await loop.stop(5)
    await tasks.stop(1)


async def test_disabled_maintenance_neither_ticks_nor_opens_its_database(
    tmp_path: Path, counting: CountingJob
) -> None:
    clock = FakeClock(T0)
    settable = Settable(
        maintenance_config({"hourly": EVERY_HOUR}, enabled=False, tick_seconds=0.05)
    )
    loop = MaintenanceLoop(settable, tmp_path, None, clock=clock)
    tasks = TaskSupervisor()
    loop.start(tasks)
    await wait_until(lambda: loop.checks >= 3)  # the loop went round: a tick would have run
    assert counting.runs == []
    assert not (tmp_path / "mindroom_data" / "maintenance.db").exists()
    settable.config = maintenance_config({"hourly": EVERY_HOUR}, tick_seconds=0.05)  # reload
    await wait_until(lambda: len(counting.runs) == 1)  # the positive control
    await loop.stop(5)
    await tasks.stop(1)


async def test_stop_ends_a_running_job_at_its_next_heartbeat_and_releases_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    between_scopes = threading.Event()
    scopes: list[int] = []

    async def scoped(ctx: JobContext) -> dict[str, int]:
        for scope in range(100):
            ctx.heartbeat()
            scopes.append(scope)
            between_scopes.set()
            await asyncio.sleep(0.01)  # a scope's work
        return {"model_calls": 0}

    monkeypatch.setitem(JOB_TYPES, "consolidation", scoped)
    loop = MaintenanceLoop(Settable(maintenance_config({"hourly": EVERY_HOUR})), tmp_path, None)
    tasks = TaskSupervisor()
    loop.start(tasks)
    await asyncio.to_thread(between_scopes.wait, 30)
    await loop.stop(5)
    assert 0 < len(scopes) < 100  # ended between scopes, not run to the end
    store = MaintenanceStore(tmp_path / "mindroom_data" / "maintenance.db")
    [run] = store.runs("hourly")
    assert run.status == "failed"
    assert "stopping" in (run.error_message or "")
    job = store.job("hourly")
    assert job is not None
    assert job.lease_owner is None
    assert job.next_due_at <= run.started_at + timedelta(seconds=1)  # due again at next start
    await tasks.stop(1)


async def test_stop_cancels_a_job_that_does_not_reach_a_heartbeat_in_the_grace(
    tmp_path: Path, counting: CountingJob
) -> None:
    counting.gate = threading.Event()
    loop = MaintenanceLoop(Settable(maintenance_config({"hourly": EVERY_HOUR})), tmp_path, None)
    tasks = TaskSupervisor()
    loop.start(tasks)
    await asyncio.to_thread(counting.started.wait, 30)
    await loop.stop(0.1)
    counting.gate.set()
    store = MaintenanceStore(tmp_path / "mindroom_data" / "maintenance.db")
    [run] = store.runs("hourly")
    assert run.status == "failed"
    assert "cancelled" in (run.error_message or "")
    job = store.job("hourly")
    assert job is not None
    assert job.lease_owner is None
    await tasks.stop(1)


async def test_stop_before_start_and_twice_is_harmless(tmp_path: Path) -> None:
    loop = MaintenanceLoop(Settable(maintenance_config({})), tmp_path, None)
    await loop.stop(1)
    await loop.stop(1)
