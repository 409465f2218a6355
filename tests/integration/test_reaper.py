"""A test that times out leaves no process behind: a pytest run of a test that starts a child
(standing in for a bot or a server) and hangs is ended by pytest-timeout; then the child is gone.
The control: the same run without the reaper leaves the child running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import wait_until_sync

REPO = Path(__file__).resolve().parents[2]

HANGING = """
import subprocess, sys, time
from pathlib import Path

def test_starts_a_server_and_hangs():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path("child.pid").write_text(str(child.pid))
    time.sleep(600)
"""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def run_hanging(folder: Path, *options: str) -> int:
    """Run the hanging test under a 3 s pytest-timeout; the pid of the child it started."""
    folder.mkdir()
    (folder / "test_hangs.py").write_text(HANGING)
    env = {k: v for k, v in os.environ.items() if k != "MINDROOM_TEST_SESSION"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "timeout=3"]
        + [*options, "test_hangs.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode != 0, done.stdout  # the test timed out
    # (the thread method ends a worker of ``-n`` at once: pytest reports its crash)
    assert "Timeout" in done.stdout or "crashed while running" in done.stdout, done.stdout
    return int((folder / "child.pid").read_text())


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(
    "options",
    [
        ["-o", "timeout_method=signal"],
        ["-o", "timeout_method=thread"],
        # a worker process of pytest-xdist (the README's command) that the timeout ends
        ["-n", "1", "-o", "timeout_method=thread"],
    ],
    ids=["signal", "thread", "xdist-worker"],
)
def test_a_timed_out_test_leaves_no_child_process(tmp_path: Path, options: list[str]) -> None:
    pid = run_hanging(tmp_path / "reaped", "-p", "tests.support.reaper", *options)
    wait_until_sync(lambda: not alive(pid), "the timed-out test's child was stopped", timeout=30)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_the_control_without_the_reaper_the_child_stays(tmp_path: Path) -> None:
    pid = run_hanging(tmp_path / "unreaped")
    try:
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
