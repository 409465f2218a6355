"""``bench/memory_import.py`` measures what it says: a small run, by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_memory_import_bench_imports_every_entry_and_ends_with_its_figure(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "memory_import.py"), "--entries", "60"]
        + ["--per-file", "20"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=110,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "cli: imported 60 memories into agent_general (0 already there)" in lines
    assert "entries in the memory files afterwards: 60" in lines
    assert lines[-1].startswith("import_entries=60 import_s=")
    float(lines[-1].rsplit("=", 1)[1])
