"""``mindroom maintenance status | tick | config JOB | daemon``."""

from __future__ import annotations

import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from mindroom.cli.main import main
from mindroom.memory.jobs.maintenance.runner import JOB_TYPES
from tests.support.maintenance import EVERY_HOUR, CountingJob, store_of, write_config

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingJob:
    job = CountingJob()
    monkeypatch.setitem(JOB_TYPES, "consolidation", job)
    return job


def test_status_shows_each_job_its_schedule_next_due_in_local_and_utc_and_the_last_run(
    tmp_path: Path, counting: CountingJob, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"hourly": EVERY_HOUR})
    assert main(["maintenance", "tick", "--config", str(config)]) == 0
    ticked = capsys.readouterr().out
    assert "hourly: completed: merged 1, model_calls 0" in ticked
    assert main(["maintenance", "status", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "maintenance: on" in out
    assert "Europe/Berlin" in out
    blocks = {block.split()[0]: block for block in out.split("\n\n")[1:]}
    assert set(blocks) == {
        "consolidation_daily",
        "consolidation_weekly",
        "memory_lifecycle",
        "hourly",
    }
    daily = blocks["consolidation_daily"]
    assert "enabled" in daily
    assert "consolidation, light" in daily
    assert "daily 10:00" in daily
    assert "10:00 CE" in daily  # CET or CEST: the window's wall-clock time in the zone
    assert " UTC)" in daily
    assert "last run  never" in daily
    assert "weekly sunday 03:00" in blocks["consolidation_weekly"]
    hourly = blocks["hourly"]
    assert "every 60 min" in hourly
    assert "completed: merged 1, model_calls 0" in hourly


def test_config_overrides_a_window_until_config_yaml_changes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {})
    args = ["--config", str(config)]
    assert (
        main(["maintenance", "config", "consolidation_daily", "--window-start", "11:00", *args])
        == 0
    )
    out = capsys.readouterr().out
    assert "daily 11:00" in out
    assert "--recompute-next" in out  # the due time stays; says how to move it
    job = store_of(tmp_path).job("consolidation_daily")
    assert job is not None
    assert job.overrides == {"window_start": "11:00"}
    assert job.next_due_at.astimezone(BERLIN).strftime("%H:%M") == "10:00"  # kept
    assert main(["maintenance", "config", "consolidation_daily", "--recompute-next", *args]) == 0
    moved = store_of(tmp_path).job("consolidation_daily")
    assert moved is not None
    assert moved.next_due_at.astimezone(BERLIN).strftime("%H:%M") == "11:00"
    # a restart of the bot, a status: the unchanged config.yaml keeps the override
    assert main(["maintenance", "status", *args]) == 0
    assert "override  window_start 11:00 (config.yaml: 10:00)" in capsys.readouterr().out
    # config.yaml changes that field: config.yaml wins
    write_config(tmp_path, {"consolidation_daily": {"window_start": "12:00"}})
    assert main(["maintenance", "status", *args]) == 0
    out = capsys.readouterr().out
    assert "daily 12:00" in out
    assert "override  " not in out


def test_config_disable_enable_and_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {})
    args = ["--config", str(config)]
    assert main(["maintenance", "config", "consolidation_weekly", "--disable", *args]) == 0
    job = store_of(tmp_path).job("consolidation_weekly")
    assert job is not None
    assert not job.enabled
    assert main(["maintenance", "config", "consolidation_weekly", "--reset", *args]) == 0
    job = store_of(tmp_path).job("consolidation_weekly")
    assert job is not None
    assert job.enabled
    assert job.overrides == {}


def test_config_refuses_enable_and_disable_together_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {})
    args = ["--config", str(config)]
    for both in (["--enable", "--disable"], ["--disable", "--enable"]):
        code = main(["maintenance", "config", "consolidation_weekly", *both, *args])
        assert code == 2
        assert "--enable and --disable exclude each other" in capsys.readouterr().err
    assert store_of(tmp_path).job("consolidation_weekly") is None  # never even opened
    # the control: one of them alone is applied
    assert main(["maintenance", "config", "consolidation_weekly", "--disable", *args]) == 0
    job = store_of(tmp_path).job("consolidation_weekly")
    assert job is not None
    assert not job.enabled


def test_config_refuses_an_unknown_job_a_bad_time_and_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {})
    args = ["--config", str(config)]
    assert main(["maintenance", "config", "nope", "--disable", *args]) == 2
    assert "no maintenance job 'nope'" in capsys.readouterr().err
    assert (
        main(["maintenance", "config", "consolidation_daily", "--window-start", "25:00", *args])
        == 2
    )
    assert "'25:00' is not a time of day" in capsys.readouterr().err
    assert main(["maintenance", "config", "consolidation_daily", *args]) == 2
    assert "nothing to change" in capsys.readouterr().err


def test_tick_reports_a_failed_run_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(JOB_TYPES, "consolidation", raising=False)
    # not there (recall imports the package's records, so the job's module is named too)
    monkeypatch.setitem(sys.modules, "mindroom.memory.jobs.consolidate", None)
    monkeypatch.setitem(sys.modules, "mindroom.memory.jobs.consolidate.run", None)
    config = write_config(tmp_path, {"hourly": EVERY_HOUR})
    assert main(["maintenance", "tick", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert "hourly: failed: job type 'consolidation' is not available" in out
    assert main(["maintenance", "tick", "--config", str(config)]) == 0
    assert "nothing due" in capsys.readouterr().out  # failed runs wait for their next time


def test_tick_with_maintenance_off_runs_nothing(
    tmp_path: Path, counting: CountingJob, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"hourly": EVERY_HOUR}, enabled=False)
    assert main(["maintenance", "tick", "--config", str(config)]) == 0
    assert "maintenance is off" in capsys.readouterr().out
    assert counting.runs == []
    write_config(tmp_path, {"hourly": EVERY_HOUR})
    assert main(["maintenance", "tick", "--config", str(config)]) == 0  # the positive control
    assert len(counting.runs) == 1


def test_tick_job_runs_a_job_now_that_is_not_due_and_keeps_its_schedule(
    tmp_path: Path, counting: CountingJob, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"hourly": EVERY_HOUR})
    assert main(["maintenance", "tick", "--config", str(config)]) == 0
    assert len(counting.runs) == 1
    capsys.readouterr()
    assert main(["maintenance", "tick", "--config", str(config)]) == 0  # the control: not due
    assert "nothing due" in capsys.readouterr().out
    assert len(counting.runs) == 1

    assert main(["maintenance", "tick", "--job", "hourly", "--config", str(config)]) == 0

    assert "hourly: completed" in capsys.readouterr().out
    assert len(counting.runs) == 2
    runs = store_of(tmp_path).runs("hourly")
    assert [r.status for r in runs] == ["completed", "completed"]
    assert store_of(tmp_path).job("hourly").next_due_at > runs[0].started_at  # type: ignore[union-attr]


def test_tick_job_refuses_an_unknown_job_and_runs_nothing(
    tmp_path: Path, counting: CountingJob, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"hourly": EVERY_HOUR})

    assert main(["maintenance", "tick", "--job", "hourlly", "--config", str(config)]) == 2

    assert "no maintenance job 'hourlly' (jobs: " in capsys.readouterr().out
    assert counting.runs == []
