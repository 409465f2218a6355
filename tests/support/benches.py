"""Running a bench script as a person runs it: in a subprocess, from a folder of the test's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_bench(script: str, *args: str, cwd: Path, timeout: float = 60) -> list[str]:
    """The lines ``bench/<script> <args>`` printed; it must exit 0 (else its stderr is shown)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
