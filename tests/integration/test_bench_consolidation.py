"""The consolidation bench measures what it says: its plant is what the issue asks for, its
oracle answers from the plant, and a small run (as a person runs it, in a subprocess, from a
folder that is not the repository) ends with the figures line and loses nothing.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
FINAL = re.compile(
    r"duplicates: recall=(\d\.\d\d) precision=(\d\.\d\d) "
    r"conflicts: recall=(\d\.\d\d) precision=(\d\.\d\d) originals_lost=(\d+)"
)
TODAY = dt.date(2026, 11, 24)


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("consolidation")


def test_a_small_run_ends_with_the_figures_line_and_loses_no_original(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "consolidation.py"),
            "--entries",
            "200",
            "--embedder",
            "none",
            "--seed",
            "3",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    final = FINAL.fullmatch(lines[-1])
    assert final is not None, lines
    assert all(0 <= float(final[i]) <= 1 for i in range(1, 5)), lines[-1]
    assert final[5] == "0"
    assert all(line.startswith("# ") for line in lines[:-1]), lines
    assert lines[0].startswith("# entries: 200 (")
    # exact copies need neither an embedder nor the model: every one is merged, none wrongly
    exact = next(line for line in lines if line.startswith("# duplicates exact: "))
    planted = re.fullmatch(r"# duplicates exact: planted=(\d+) found=(\d+) recall=1\.00", exact)
    assert planted is not None, exact
    assert planted[1] == planted[2] != "0", exact
    assert re.search(
        r"^# merges exact duplicate: (\d+), correct \1, precision=1\.00$", done.stdout, re.MULTILINE
    ), lines
    calls = next(line for line in lines if line.startswith("# model calls: "))
    judged = re.match(r"# model calls: (\d+) \(judge budget\), (\d+) \(server requests\)", calls)
    assert judged is not None, calls
    assert judged[1] == judged[2], calls
    for kind in ("negation", "value change"):
        assert any(line.startswith(f"# conflicts {kind}: planted=") for line in lines), kind
    assert list(tmp_path.iterdir()) == []  # the memory was built in a temporary folder


def test_the_default_plant_has_every_kind_with_near_misses_and_one_fact_per_text(
    bench: ModuleType,
) -> None:
    plant = bench.build_plant(1200, 1, TODAY)
    entries = plant.entries
    assert len(entries) == 1200
    roles = Counter(e.role for e in entries)
    assert all(roles[kind] >= 30 for kind in bench.DUPLICATE_KINDS), roles
    assert sum(roles[kind] for kind in bench.DUPLICATE_KINDS) == round(1200 * 0.13)
    assert roles["contradiction"] == len(plant.contradictions) == 60
    assert set(Counter(plant.contradictions.values())) == set(bench.CONFLICT_KINDS)
    assert len({e.id for e in entries}) == len(entries)
    # no two facts read the same, and every entry reads as its own fact
    assert all(plant.by_text[bench.normal(e.text)] == e.fact for e in entries)
    facts = plant.facts.values()
    assert len({f.attribute.name for f in facts}) >= 20
    # near misses: one person with several facts, one value for several people, relatives
    per_person = Counter(f.person for f in facts)
    assert max(per_person.values()) >= 5
    shared = Counter((f.attribute.name, f.value.key) for f in facts if not f.relative)
    assert sum(1 for n in shared.values() if n > 1) >= 20
    assert sum(f.relative for f in facts) >= 10
    # daily files of the 60 days before yesterday; copies on another day than their fact's
    days = {e.path for e in entries} - {"MEMORY.md"}
    assert len(days) == 60
    assert min(days) == f"memory/{TODAY - dt.timedelta(days=61)}.md"
    assert max(days) == f"memory/{TODAY - dt.timedelta(days=2)}.md"
    first = {e.fact: e for e in entries if e.role == "fact"}
    for copy in (e for e in entries if e.role in bench.DUPLICATE_KINDS):
        assert (copy.path == first[copy.fact].path) == (copy.path == "MEMORY.md"), copy
    assert any(e.hand for e in entries)
    assert any(e.path == "MEMORY.md" and not e.hand for e in entries)


def test_the_oracle_answers_from_the_plant(bench: ModuleType) -> None:
    plant = bench.build_plant(300, 2, TODAY)
    said: Counter[str] = Counter()
    verdict = bench.oracle(plant, said)
    first = {e.fact: e.text for e in plant.entries if e.role == "fact"}
    near = next(e for e in plant.entries if e.role == "near-exact")
    assert verdict(first[near.fact], near.text) == {"verdict": "same", "merged": near.text}
    a, b = sorted(next(iter(plant.contradictions)))
    assert verdict(plant.facts[b].text, plant.facts[a].text) == "conflict"
    other = next(f for f in first if f not in (a, b, near.fact))
    assert verdict(first[other], plant.facts[a].text) == "different"
    assert verdict("Somebody nobody planted", first[near.fact]) == "different"
    assert said == {
        "same": 1,
        "conflict": 1,
        "different": 1,
        "different (a text not in the plant)": 1,
    }
