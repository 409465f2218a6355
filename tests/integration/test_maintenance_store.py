"""The schedule's SQLite database: jobs seeded from config.yaml, overrides, leases, the audit."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mindroom.config.maintenance_schema import MaintenanceConfig, MaintenanceJobConfig
from mindroom.errors import ConfigError
from mindroom.memory.jobs.maintenance.store import Claim, MaintenanceStore, iso

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


def jobs(**overrides: dict[str, object]) -> dict[str, MaintenanceJobConfig]:
    """The configured jobs: the defaults, with ``overrides`` merged over them by name."""
    return MaintenanceConfig.model_validate({"jobs": overrides}).jobs


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MaintenanceStore]:
    """The schedule in a SQLite file (the default) and in PostgreSQL (storage.database)."""
    if request.param == "sqlite":
        target: Path | str = tmp_path / "mindroom_data" / "maintenance.db"
    else:
        target = request.getfixturevalue("postgres").database()
    found = MaintenanceStore(target)
    assert found.db.dialect == request.param
    yield found
    found.close()


def test_the_default_jobs_are_seeded_due_at_their_next_window(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    seeded = {job.name: job for job in store.jobs()}
    assert set(seeded) == {"consolidation_daily", "consolidation_weekly", "memory_lifecycle"}
    lifecycle = seeded["memory_lifecycle"]
    assert lifecycle.job_type == "lifecycle"
    assert lifecycle.next_due_at == datetime(2026, 3, 3, 4, 0, tzinfo=UTC)  # 04:00 has passed
    daily = seeded["consolidation_daily"]
    assert (daily.job_type, daily.mode, daily.enabled) == ("consolidation", "light", True)
    assert daily.next_due_at == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    weekly = seeded["consolidation_weekly"]
    assert weekly.mode == "deep"
    assert weekly.next_due_at == datetime(2026, 3, 8, 3, 0, tzinfo=UTC)  # Sunday
    # the tables are the RFC's, timestamps UTC ISO
    with store.db.read() as db:
        row = db.execute(
            "SELECT next_due_at, created_at FROM maintenance_jobs WHERE id = ?",
            ("consolidation_daily",),
        ).fetchone()
        # the audit's columns are there (a missing one is an error)
        runs = db.execute(
            "SELECT status, started_at, completed_at, summary, stats_json FROM maintenance_runs"
        ).fetchall()
    assert (row["next_due_at"], row["created_at"]) == (
        "2026-03-02T10:00:00+00:00",
        "2026-03-02T09:00:00+00:00",
    )
    assert runs == []


def test_a_field_config_yaml_changes_is_applied_and_the_due_time_follows(
    store: MaintenanceStore,
) -> None:
    store.apply_config(jobs(), T0, UTC)
    store.apply_config(jobs(consolidation_daily={"window_start": "15:00"}), T0, UTC)
    daily = store.job("consolidation_daily")
    assert daily is not None
    assert daily.schedule.window_start == "15:00"
    assert daily.next_due_at == datetime(2026, 3, 2, 15, 0, tzinfo=UTC)


def test_a_cli_override_persists_until_config_yaml_changes_that_field(
    store: MaintenanceStore,
) -> None:
    store.apply_config(jobs(), T0, UTC)
    job = store.override("consolidation_daily", {"window_start": "11:00"}, T0, UTC)
    assert job.schedule.window_start == "11:00"
    assert job.overrides == {"window_start": "11:00"}
    assert job.next_due_at == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # kept: no --recompute
    # re-reading the same config.yaml (a restart, a reload) keeps the override
    store.apply_config(jobs(), T0, UTC)
    assert store.job("consolidation_daily").schedule.window_start == "11:00"  # type: ignore[union-attr]
    # a change of another field in config.yaml keeps it too
    store.apply_config(jobs(consolidation_daily={"window_end": "18:00"}), T0, UTC)
    kept = store.job("consolidation_daily")
    assert kept is not None
    assert (kept.schedule.window_start, kept.schedule.window_end) == ("11:00", "18:00")
    # config.yaml changing the field itself wins, and the override is gone
    store.apply_config(
        jobs(consolidation_daily={"window_start": "12:00", "window_end": "18:00"}), T0, UTC
    )
    won = store.job("consolidation_daily")
    assert won is not None
    assert won.schedule.window_start == "12:00"
    assert won.overrides == {}


def test_recompute_next_takes_the_new_window(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    job = store.override("consolidation_daily", {"window_start": "08:00"}, T0, UTC, recompute=True)
    assert job.next_due_at == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)


def test_an_invalid_override_is_refused_with_the_reason(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    with pytest.raises(ConfigError, match="window_end needs a window_start"):
        store.override(
            "consolidation_daily", {"window_start": None, "window_end": "12:00"}, T0, UTC
        )
    with pytest.raises(ConfigError, match="no maintenance job 'nope'"):
        store.override("nope", {"enabled": False}, T0, UTC)


def test_a_job_removed_from_config_is_disabled_and_its_runs_kept(store: MaintenanceStore) -> None:
    configured = jobs(extra={"cadence": "interval", "interval_minutes": 30})
    store.apply_config(configured, T0, UTC)
    claim = store.claim("extra", "me", T0, 60)
    assert claim.run_id is not None
    store.finish(claim, "me", T0, UTC, status="completed", stats={"model_calls": 0})
    store.apply_config(jobs(), T0, UTC)
    extra = store.job("extra")
    assert extra is not None
    assert not extra.enabled
    assert not extra.in_config
    assert [run.status for run in store.runs("extra")] == ["completed"]
    # back in config.yaml: config.yaml's values apply afresh
    store.apply_config(configured, T0 + timedelta(hours=1), UTC)
    back = store.job("extra")
    assert back is not None
    assert back.enabled
    assert back.in_config


def test_enabling_a_disabled_job_makes_it_due_at_its_next_window_not_at_once(
    store: MaintenanceStore,
) -> None:
    store.apply_config(jobs(consolidation_daily={"enabled": False}), T0, UTC)
    later = T0 + timedelta(days=10)
    store.apply_config(jobs(), later, UTC)
    daily = store.job("consolidation_daily")
    assert daily is not None
    assert daily.enabled
    assert daily.next_due_at == datetime(2026, 3, 12, 10, 0, tzinfo=UTC)


def test_a_claim_needs_a_due_enabled_job_without_a_live_lease(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    assert store.claim("consolidation_daily", "a", T0, 60).reason == "not due"
    due = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    first = store.claim("consolidation_daily", "a", due, 60)
    assert first.run_id is not None
    second = store.claim("consolidation_daily", "b", due + timedelta(seconds=59), 60)
    assert second.run_id is None
    assert "running in a" in second.reason
    [run] = store.runs("consolidation_daily")
    assert (run.status, run.owner) == ("running", "a")


def test_an_expired_lease_is_taken_over_and_the_stale_run_marked_failed(
    store: MaintenanceStore,
) -> None:
    store.apply_config(jobs(), T0, UTC)
    due = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    crashed = store.claim("consolidation_daily", "crashed", due, 60)
    assert crashed.run_id is not None
    # a heartbeat extends the lease
    assert store.heartbeat(crashed, "crashed", due + timedelta(seconds=50), 60)
    assert store.claim("consolidation_daily", "b", due + timedelta(seconds=100), 60).run_id is None
    # then the runner dies: 60 s after its last heartbeat the lease is free
    taken = store.claim("consolidation_daily", "b", due + timedelta(seconds=111), 60)
    assert taken.run_id is not None
    runs = {run.id: run for run in store.runs("consolidation_daily")}
    assert runs[crashed.run_id].status == "failed"
    assert "crashed" in (runs[crashed.run_id].error_message or "")
    assert runs[taken.run_id].status == "running"
    # the dead runner can no longer extend or finish the lease as its own
    assert not store.heartbeat(crashed, "crashed", due + timedelta(seconds=112), 60)


def test_reap_marks_runs_of_expired_leases_failed(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    due = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    claim = store.claim("consolidation_daily", "gone", due, 60)
    assert store.reap(due + timedelta(seconds=30)) == 0  # the control: a live lease stays
    assert store.reap(due + timedelta(seconds=61)) == 1
    [run] = store.runs("consolidation_daily")
    assert run.id == claim.run_id
    assert run.status == "failed"
    job = store.job("consolidation_daily")
    assert job is not None
    assert job.lease_owner is None
    assert job.next_due_at == due  # still due: the run did not finish


def test_finish_records_the_run_and_moves_the_due_time(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    due = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    claim = store.claim("consolidation_daily", "a", due, 60)
    store.finish(
        claim,
        "a",
        due + timedelta(minutes=2),
        UTC,
        status="completed",
        summary="3 merged",
        stats={"model_calls": 2, "merged": 3},
    )
    job = store.job("consolidation_daily")
    assert job is not None
    assert (job.last_status, job.last_summary, job.last_run_at) == ("completed", "3 merged", due)
    assert job.next_due_at == datetime(2026, 3, 3, 10, 0, tzinfo=UTC)
    assert job.lease_owner is None
    [run] = store.runs("consolidation_daily")
    assert run.stats == {"model_calls": 2, "merged": 3}
    assert run.completed_at == due + timedelta(minutes=2)


def test_an_interrupted_run_leaves_the_job_due(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    due = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    claim = store.claim("consolidation_daily", "a", due, 60)
    store.finish(claim, "a", due, UTC, status="failed", error="stopped", advance=False)
    job = store.job("consolidation_daily")
    assert job is not None
    assert job.next_due_at == due
    assert job.last_status == "failed"
    assert store.claim("consolidation_daily", "b", due, 60).run_id is not None


def test_model_calls_today_sums_the_days_runs_of_the_job_type(store: MaintenanceStore) -> None:
    yesterday = T0 - timedelta(days=1)
    every_minute = {"cadence": "interval", "interval_minutes": 1}
    store.apply_config(jobs(a=every_minute, b=every_minute), yesterday, UTC)
    for name, when, calls in (("a", yesterday, 50), ("a", T0, 3), ("b", T0, 4)):
        claim = store.claim(name, "me", when, 60)
        assert claim.run_id is not None, claim.reason
        store.finish(claim, "me", when, UTC, status="completed", stats={"model_calls": calls})
    day_start = datetime(2026, 3, 2, tzinfo=UTC)
    assert store.model_calls_since("consolidation", day_start) == 7
    assert iso(day_start) == "2026-03-02T00:00:00+00:00"


def test_enable_from_the_cli_makes_the_job_due_at_its_next_window(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    store.override("consolidation_daily", {"enabled": False}, T0, UTC)
    disabled = store.job("consolidation_daily")
    assert disabled is not None
    assert not disabled.enabled
    later = T0 + timedelta(days=3)
    enabled = store.override("consolidation_daily", {"enabled": True}, later, UTC)
    assert enabled.enabled
    assert enabled.overrides == {}  # config.yaml's value again: no override left
    assert enabled.next_due_at == datetime(2026, 3, 5, 10, 0, tzinfo=UTC)


def test_reset_drops_every_override(store: MaintenanceStore) -> None:
    store.apply_config(jobs(), T0, UTC)
    store.override("consolidation_daily", {"window_start": "11:00", "window_end": "12:00"}, T0, UTC)
    job = store.override("consolidation_daily", {}, T0, UTC, reset=True, recompute=True)
    assert job.overrides == {}
    assert (job.schedule.window_start, job.schedule.window_end) == ("10:00", None)


def test_earliest_due_waits_for_a_live_lease(store: MaintenanceStore) -> None:
    store.apply_config(jobs(consolidation_weekly={"enabled": False}), T0, UTC)
    due = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    assert store.earliest_due() == due
    store.claim("consolidation_daily", "elsewhere", due, 300)
    assert store.earliest_due() == due + timedelta(seconds=300)


def test_two_processes_claiming_one_due_job_at_once_start_one_run(
    store: MaintenanceStore,
) -> None:
    store.apply_config(jobs(), T0, UTC)
    other = MaintenanceStore(store.target)  # another process's connection to the same schedule
    due = T0 + timedelta(days=2)
    try:

        def claim(i: int) -> Claim:
            return (store if i % 2 else other).claim("consolidation_daily", f"p{i}", due, 60)

        with ThreadPoolExecutor(8) as pool:
            claims = list(pool.map(claim, range(8)))
    finally:
        other.close()
    started = [c for c in claims if c.run_id is not None]
    assert len(started) == 1
    assert all("running in" in c.reason for c in claims if c.run_id is None)
    assert [r.status for r in store.runs("consolidation_daily")] == ["running"]
