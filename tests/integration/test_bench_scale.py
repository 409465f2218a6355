"""The scale bench, run small: both modes, and two processes against one on PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.benches import REPO


@pytest.mark.slow
@pytest.mark.timeout(600)  # four Synapses and two PostgreSQL: over 120 s on a busy machine
def test_scale_bench_compares_both_modes_and_two_processes_with_one(tmp_path: Path) -> None:
    """A small run of ``bench/scale.py``: four Synapses, two PostgreSQL, and the line it ends
    with (the figures need the default size). Two agents are the fewest that two processes can
    split (one each, each holding its own lease); two threads give each agent one message in
    every burst, so each process answers in the two-process bursts."""
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scale.py"), "--agents", "2", "--threads", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    text = done.stdout
    assert re.search(r"one process +[\d.]+ replies/s; CPU cores used: mindroom [\d.]+", text)
    assert re.search(
        r"two processes +[\d.]+ replies/s; CPU cores used: mindroom 1 [\d.]+, "
        r"mindroom 2 [\d.]+",
        text,
    )
    for mode in ("clientserver", "appservice"):  # two processes against one, in each mode
        assert f"2 threads at once, {mode} mode on PostgreSQL: one process vs two" in text
    assert text.count("bottleneck: ") == 4
    per_reply = r"mindroom CPU per reply: one process [\d.]+ ms, two processes [\d.]+ ms"
    assert len(re.findall(per_reply, text)) == 2
    assert re.fullmatch(
        r"appservice_startup_s=\d+\.\d clientserver_startup_s=\d+\.\d "
        r"two_process_speedup=\d+\.\d\dx",
        lines[-1],
    )
