"""The audience bench measures what it says: its rule of where a fact may be shown is worked
out from the rooms alone, and a small run (as a person runs it, in a subprocess, from a folder
that is not the repository) ends with its line, no leak, and a positive control for each read
path and for the leak count (without the audience rule, facts do show where they may not)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
LAST = re.compile(r"audience_leaks=(\d+) reads=(\d+) recalled_where_allowed=(\d\.\d{3})")
SHARED = re.compile(r"shared: leaks=(\d+) recalled_where_allowed=(\d\.\d{3})")
ROW = re.compile(r"# (\S+(?: \S+)?) +(\d+) +(\d+) +(\d+)")
PATHS = {
    "delta header",
    "get_memory",
    "list_memories",
    "memory_get",
    "memory_query",
    "recall",
    "search_memories",
}


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("audience")


def test_a_fact_is_allowed_where_every_reader_could_read_where_it_was_told(
    bench: ModuleType,
) -> None:
    rooms = {room.key: room for room in bench.ROOMS}
    dm, other_dm = rooms["dm-alice"], rooms["dm-bob"]
    closed, encrypted, lobby = rooms["invite-only"], rooms["encrypted"], rooms["lobby"]
    assert bench.allowed(dm, dm)
    assert not bench.allowed(dm, other_dm)
    assert not bench.allowed(dm, closed)
    assert not bench.allowed(dm, lobby)
    assert bench.allowed(closed, dm)
    assert bench.allowed(closed, other_dm)
    assert bench.allowed(closed, encrypted)
    assert bench.allowed(encrypted, closed)
    assert not bench.allowed(closed, lobby)
    assert all(bench.allowed(lobby, room) for room in bench.ROOMS)
    # the rooms are what the bot would see: the DMs private to one person, the lobby open
    assert dm.audience().only_person == "@alice:bench.example"
    assert closed.audience().closed
    assert encrypted.audience().encrypted
    assert not lobby.audience().closed


@pytest.mark.timeout(300)  # a few thousand recalls and tool calls on a busy machine
def test_a_small_run_ends_with_its_line_and_no_leak(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "audience.py"), "--facts", "12"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    last = LAST.fullmatch(lines[-1])
    assert last is not None, lines[-1]
    leaks, reads, recalled = int(last[1]), int(last[2]), float(last[3])
    assert leaks == 0, done.stdout
    assert reads > 0
    shared = SHARED.fullmatch(lines[-2])
    assert shared is not None, lines[-2]
    assert int(shared[1]) > 0  # the control: without the rule, facts show where they may not
    assert recalled >= float(shared[2]) > 0  # the rule costs nothing where it allows
    rows = {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in map(ROW.fullmatch, lines) if m}
    assert set(rows) == PATHS, rows
    for path, (done_reads, shown, leaked) in rows.items():
        assert done_reads > 0, path
        assert shown > 0, path  # the control: each path showed facts where they are allowed
        assert leaked == 0, path
    assert sum(r[0] for r in rows.values()) == reads
