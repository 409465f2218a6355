"""The runner: due jobs run through the job-type registry, once, audited, never twice at once."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mindroom.memory.jobs.maintenance.runner import (
    JOB_TYPES,
    JobContext,
    JobInterrupted,
    MaintenanceRunner,
)
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.people.erasure import ErasureGate
from tests.support.maintenance import (
    EVERY_HOUR,
    T0,
    CountingJob,
    FakeClock,
    maintenance_config,
)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingJob:
    job = CountingJob()
    monkeypatch.setitem(JOB_TYPES, "consolidation", job)
    return job


def runner_for(folder: Path, config, clock: FakeClock, **options) -> MaintenanceRunner:  # noqa: ANN001
    store = MaintenanceStore(folder / "maintenance.db")
    return MaintenanceRunner(store, folder, lambda: config, clock=clock, **options)


DAILY_10 = {"cadence": "daily", "window_start": "10:00"}


@pytest.mark.asyncio
async def test_a_job_missed_during_days_of_downtime_runs_once_then_at_its_next_window(
    tmp_path: Path, counting: CountingJob
) -> None:
    clock = FakeClock(T0)
    runner = runner_for(tmp_path, maintenance_config({"daily": DAILY_10}), clock)
    assert await runner.tick() == []  # 09:00: not due yet (seeded due at 10:00)
    assert counting.runs == []
    clock.now = datetime(2026, 3, 5, 8, 0, tzinfo=UTC)  # slept through three 10:00s
    [result] = await runner.tick()
    assert result.status == "completed"
    assert len(counting.runs) == 1
    assert await runner.tick() == []  # once, not once per missed day
    job = runner.store.job("daily")
    assert job is not None
    assert job.next_due_at == datetime(2026, 3, 5, 10, 0, tzinfo=UTC)
    clock.now = datetime(2026, 3, 5, 10, 0, 5, tzinfo=UTC)
    assert [r.status for r in await runner.tick()] == ["completed"]
    assert len(counting.runs) == 2


@pytest.mark.asyncio
async def test_the_context_carries_the_job_mode_clock_and_the_days_model_calls(
    tmp_path: Path, counting: CountingJob
) -> None:
    clock = FakeClock(T0)
    config = maintenance_config({"light": EVERY_HOUR, "deep": {**EVERY_HOUR, "mode": "deep"}})
    runner = runner_for(tmp_path, config, clock)
    counting.stats = {"model_calls": 4, "merged": 2}
    await runner.tick()
    deep, light = counting.runs  # by name
    assert (deep.job.name, deep.mode, light.mode) == ("deep", "deep", "light")
    assert deep.now == T0
    assert deep.config is config
    assert deep.storage == tmp_path
    assert deep.model_calls_today == 0
    assert light.model_calls_today == 4  # the deep run's calls: the day budget is shared
    clock.advance(hours=1)
    await runner.tick()
    assert counting.runs[-1].model_calls_today == 12
    clock.now = datetime(2026, 3, 3, 0, 0, tzinfo=UTC)  # a new day
    await runner.tick()
    assert counting.runs[-1].model_calls_today == 4


@pytest.mark.asyncio
async def test_every_run_is_audited_with_its_stats_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(ctx: JobContext) -> dict[str, int]:
        raise ValueError("the memory folder is gone")

    monkeypatch.setitem(JOB_TYPES, "consolidation", broken)
    clock = FakeClock(T0)
    runner = runner_for(tmp_path, maintenance_config({"hourly": EVERY_HOUR}), clock)
    [result] = await runner.tick()
    assert result.status == "failed"
    [run] = runner.store.runs("hourly")
    assert run.status == "failed"
    assert run.error_message == "ValueError: the memory folder is gone"
    job = runner.store.job("hourly")
    assert job is not None
    assert job.next_due_at == T0 + timedelta(hours=1)  # a failed run waits for its next time

    async def fine(ctx: JobContext) -> dict[str, int]:
        return {"model_calls": 3, "merged": 5, "archived": 5}

    monkeypatch.setitem(JOB_TYPES, "consolidation", fine)
    clock.advance(hours=1)
    [result] = await runner.tick()
    assert result.status == "completed"
    run = runner.store.runs("hourly")[-1]
    assert run.stats == {"model_calls": 3, "merged": 5, "archived": 5}
    assert run.summary == "merged 5, archived 5, model_calls 3"


@pytest.mark.asyncio
async def test_without_the_consolidation_module_the_run_fails_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(JOB_TYPES, "consolidation", raising=False)
    # as if it did not exist (None in sys.modules makes the import fail; recall imports the
    # package's records, so the job's own module is named too)
    monkeypatch.setitem(sys.modules, "mindroom.memory.jobs.consolidate", None)
    monkeypatch.setitem(sys.modules, "mindroom.memory.jobs.consolidate.run", None)
    runner = runner_for(tmp_path, maintenance_config({"hourly": EVERY_HOUR}), FakeClock(T0))
    [result] = await runner.tick()
    assert result.status == "failed"
    [run] = runner.store.runs("hourly")
    assert run.error_message is not None
    assert "job type 'consolidation' is not available" in run.error_message
    assert "mindroom.memory.jobs.consolidate.run" in run.error_message


@pytest.mark.asyncio
async def test_a_job_that_returns_no_stats_is_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def wrong(ctx: JobContext) -> None:
        return None

    monkeypatch.setitem(JOB_TYPES, "consolidation", wrong)
    runner = runner_for(tmp_path, maintenance_config({"hourly": EVERY_HOUR}), FakeClock(T0))
    [result] = await runner.tick()
    assert result.status == "failed"
    assert "not a dict of stats" in (runner.store.runs("hourly")[0].error_message or "")


def _tick_in_thread(runner: MaintenanceRunner, results: dict[str, object], key: str) -> None:
    results[key] = asyncio.run(runner.tick())


def test_two_runners_in_two_threads_run_a_due_job_exactly_once(
    tmp_path: Path, counting: CountingJob
) -> None:
    counting.gate = threading.Event()
    config = maintenance_config({"hourly": EVERY_HOUR})
    clock = FakeClock(T0)
    first, second = runner_for(tmp_path, config, clock), runner_for(tmp_path, config, clock)
    results: dict[str, object] = {}
    threads = [
        threading.Thread(target=_tick_in_thread, args=(runner, results, name))
        for name, runner in (("first", first), ("second", second))
    ]
    for thread in threads:
        thread.start()
    assert counting.started.wait(30)  # one of them runs the job and holds it open
    # the other one's tick ends while the run is open: it found the job leased
    finished = _wait_for_one(threads)
    assert len(counting.runs) == 1
    counting.gate.set()
    for thread in threads:
        thread.join(30)
    outcomes = sorted(r.status for key in results for r in results[key])  # type: ignore[attr-defined]
    assert outcomes == ["completed", "skipped"]
    skipped = [r for key in results for r in results[key] if r.status == "skipped"]  # type: ignore[attr-defined]
    assert "running in" in skipped[0].summary
    assert finished is not None
    assert len(counting.runs) == 1
    assert [run.status for run in first.store.runs("hourly")] == ["completed"]


def _wait_for_one(threads: list[threading.Thread]) -> threading.Thread | None:
    for _ in range(3000):
        for thread in threads:
            if not thread.is_alive():
                return thread
        threads[0].join(0.01)
    return None


@pytest.mark.asyncio
async def test_a_crashed_runners_lease_is_taken_over_after_it_expires(
    tmp_path: Path, counting: CountingJob
) -> None:
    clock = FakeClock(T0)
    config = maintenance_config({"hourly": EVERY_HOUR})
    survivor = runner_for(tmp_path, config, clock, lease_seconds=120)
    await survivor.sync()
    # another runner claimed the job and died (kill -9) before finishing
    crashed = survivor.store.claim("hourly", "crashed-runner", T0, 120)
    assert crashed.run_id is not None
    clock.advance(seconds=119)
    [result] = await survivor.tick()
    assert result.status == "skipped"  # the control: a live lease is respected
    assert counting.runs == []
    clock.advance(seconds=2)
    [result] = await survivor.tick()
    assert result.status == "completed"
    assert len(counting.runs) == 1
    runs = {run.id: run for run in survivor.store.runs("hourly")}
    assert runs[crashed.run_id].status == "failed"
    assert "crashed-runner stopped without finishing" in (runs[crashed.run_id].error_message or "")


@pytest.mark.asyncio
async def test_heartbeat_raises_once_the_runner_is_stopping_and_the_job_stays_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scopes: list[int] = []
    runner = runner_for(tmp_path, maintenance_config({"hourly": EVERY_HOUR}), FakeClock(T0))

    async def three_scopes(ctx: JobContext) -> dict[str, int]:
        for scope in range(3):
            ctx.heartbeat()  # between scopes
            scopes.append(scope)
            if scope == 0:
                runner.request_stop()  # shutdown begins during the first scope
        return {"model_calls": 0}

    monkeypatch.setitem(JOB_TYPES, "consolidation", three_scopes)
    [result] = await runner.tick()
    assert scopes == [0]
    assert result.status == "failed"
    [run] = runner.store.runs("hourly")
    assert "interrupted" in (run.error_message or "")
    job = runner.store.job("hourly")
    assert job is not None
    assert job.next_due_at == T0  # due again at the next start: the pass was not finished
    assert job.lease_owner is None


@pytest.mark.asyncio
async def test_a_forget_me_waiting_ends_a_run_at_its_next_heartbeat_and_erases_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = ErasureGate()
    runner = runner_for(
        tmp_path, maintenance_config({"hourly": EVERY_HOUR}), FakeClock(T0), gate=gate
    )
    log: list[str] = []
    in_scope = asyncio.Event()
    next_scope = asyncio.Event()

    async def three_scopes(ctx: JobContext) -> dict[str, int]:
        for scope in range(3):
            ctx.heartbeat()  # between scopes
            log.append(f"scope {scope}")
            in_scope.set()
            await next_scope.wait()
        return {"model_calls": 0}

    async def forget() -> None:
        async with gate.erasing():
            log.append("erased")

    monkeypatch.setitem(JOB_TYPES, "consolidation", three_scopes)
    tick = asyncio.create_task(runner.tick())
    await asyncio.wait_for(in_scope.wait(), 5)
    erasure = asyncio.create_task(forget())
    for _ in range(10):
        await asyncio.sleep(0)
    assert log == ["scope 0"]  # the erasure waits for the scope in progress
    next_scope.set()
    [result] = await asyncio.wait_for(tick, 5)
    await asyncio.wait_for(erasure, 5)

    assert log == ["scope 0", "erased"]  # no further scope, and nothing after the erasure
    assert result.status == "failed"
    [run] = runner.store.runs("hourly")
    assert "forgotten" in (run.error_message or "")
    job = runner.store.job("hourly")
    assert job is not None
    assert job.next_due_at == T0  # the pass runs again at the next tick


@pytest.mark.asyncio
async def test_a_run_that_lost_its_lease_is_stopped_at_its_next_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(T0)
    runner = runner_for(tmp_path, maintenance_config({"hourly": EVERY_HOUR}), clock)
    seen: list[str] = []

    async def slow(ctx: JobContext) -> dict[str, int]:
        # the laptop slept through the lease; another runner took the job over meanwhile
        clock.advance(seconds=runner.lease_seconds + 1)
        runner.store.claim("hourly", "other", clock(), 600)
        try:
            ctx.heartbeat()
        except JobInterrupted as exc:
            seen.append(str(exc))
            raise
        return {"model_calls": 0}

    monkeypatch.setitem(JOB_TYPES, "consolidation", slow)
    [result] = await runner.tick()
    assert result.status == "failed"
    assert seen
    assert "lease" in seen[0]
    job = runner.store.job("hourly")
    assert job is not None
    assert job.lease_owner == "other"  # left to the runner that holds it now


@pytest.mark.asyncio
async def test_a_cancelled_run_is_recorded_and_its_lease_released(
    tmp_path: Path, counting: CountingJob
) -> None:
    counting.gate = threading.Event()
    runner = runner_for(tmp_path, maintenance_config({"hourly": EVERY_HOUR}), FakeClock(T0))
    tick = asyncio.create_task(runner.tick())
    await asyncio.to_thread(counting.started.wait, 30)
    tick.cancel()
    with pytest.raises(asyncio.CancelledError):
        await tick
    counting.gate.set()
    [run] = runner.store.runs("hourly")
    assert run.status == "failed"
    assert "interrupted" in (run.error_message or "")
    job = runner.store.job("hourly")
    assert job is not None
    assert job.lease_owner is None
    assert job.next_due_at == T0


@pytest.mark.asyncio
async def test_a_disabled_job_is_not_run_and_config_changes_are_applied_at_the_next_tick(
    tmp_path: Path, counting: CountingJob
) -> None:
    clock = FakeClock(T0)
    config = maintenance_config({"hourly": {**EVERY_HOUR, "enabled": False}})
    runner = MaintenanceRunner(
        MaintenanceStore(tmp_path / "maintenance.db"), tmp_path, lambda: config, clock=clock
    )
    assert await runner.tick() == []
    assert counting.runs == []
    config = maintenance_config({"hourly": EVERY_HOUR})  # a reload turns it on
    assert [r.status for r in await runner.tick()] == ["completed"]  # the positive control
    assert len(counting.runs) == 1


def test_the_runner_owner_names_the_host_and_process(tmp_path: Path) -> None:
    runner = runner_for(tmp_path, maintenance_config({}), FakeClock(datetime.now(UTC)))
    assert f":{os.getpid()}:" in runner.owner


def test_a_run_asked_for_now_is_skipped_while_another_runner_runs_the_job(
    tmp_path: Path, counting: CountingJob
) -> None:
    counting.gate = threading.Event()
    config = maintenance_config({"hourly": EVERY_HOUR})
    clock = FakeClock(T0)
    first, second = runner_for(tmp_path, config, clock), runner_for(tmp_path, config, clock)
    results: dict[str, object] = {}
    ticking = threading.Thread(target=_tick_in_thread, args=(first, results, "first"))
    ticking.start()
    assert counting.started.wait(30)  # the first runner holds the job open

    asked = asyncio.run(second.run_now("hourly"))

    assert asked.status == "skipped"
    assert "running in" in asked.summary
    counting.gate.set()
    ticking.join(30)
    assert len(counting.runs) == 1
    again = asyncio.run(second.run_now("hourly"))  # the control: free, it runs although not due
    assert again.status == "completed"
    assert len(counting.runs) == 2
    with pytest.raises(KeyError):
        asyncio.run(second.run_now("nope"))
