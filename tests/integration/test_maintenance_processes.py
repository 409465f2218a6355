"""Maintenance in processes of its own: two runners on one store run a due job exactly once;
the daemon ticks and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from tests.support.harness import REPO
from tests.support.maintenance import EVERY_HOUR, T0, store_of, write_config
from tests.support.waiting import wait_until_sync


def test_two_runner_processes_run_a_due_job_exactly_once(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    now = (T0 + timedelta(minutes=5)).isoformat()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.maintenance", str(tmp_path), now],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    # seeded by whichever starts first; due at once (an interval job without a window)
    (tmp_path / "go").touch()
    ran = tmp_path / "ran.txt"
    wait_until_sync(lambda: ran.exists() and any(p.poll() is not None for p in processes))
    assert ran.read_text() == "every_hour\n"  # the run is open, the other process is done
    (tmp_path / "release").touch()
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        outputs.extend(json.loads(out.strip().splitlines()[-1]))
    assert sorted(status for _, status, _ in outputs) == ["completed", "skipped"]
    assert ran.read_text() == "every_hour\n"
    store = MaintenanceStore(tmp_path / "maintenance.db")
    assert [run.status for run in store.runs("every_hour")] == ["completed"]


DAEMON = (
    "import sys, tests.support.maintenance as support; support.register_gated_job(); "
    "from mindroom.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def test_the_daemon_ticks_and_a_sigterm_ends_its_running_job_and_the_daemon_cleanly(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"hourly": EVERY_HOUR})
    log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-c",
            DAEMON,
            "maintenance",
            "daemon",
            "--config",
            str(config),
            "--interval-seconds",
            "5",
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_sync(
            lambda: (tmp_path / "ran.txt").exists()
        )  # the run is open, waiting for release
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
        log.close()
    output = (tmp_path / "daemon.log").read_text()
    assert "maintenance daemon" in output
    [run] = store_of(tmp_path).runs("hourly")
    assert run.status == "failed"
    assert "stopping" in (run.error_message or "")
    job = store_of(tmp_path).job("hourly")
    assert job is not None
    assert job.lease_owner is None  # released: the bot or the next daemon runs it at once
