"""The memory search benches, run small, end with their figure lines: the keyword and hybrid
index table, the dashboard's pages over a big scope."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.benches import run_bench


def test_memory_search_hybrid_table_follows_the_keyword_one_and_re_embeds_the_changed(
    tmp_path: Path,
) -> None:
    """``--hybrid`` leaves the keyword table as it was and adds its own, one row per size; the
    bench itself asserts that the update embedded exactly the changed entries."""
    args = ["--sizes", "40", "--queries", "5", "--hybrid"]
    lines = run_bench("memory_search.py", *args, cwd=tmp_path)
    header = ["entries", "build", "index", "med", "index", "p95", "scan", "med", "scan", "p95"]
    assert lines[0].split() == [*header, "scan/index"]
    assert lines[2] == "target: index median under 10 ms at 100k entries"
    assert lines[3] == "hybrid: sentence-transformers/all-MiniLM-L6-v2"
    assert lines[4].startswith("load average before: ")
    number = r"\d+\.\d+"
    assert re.fullmatch(
        rf" +40 +{number}s +{number}s +{number}ms +{number}ms +{number}ms +{number}ms"
        rf" +{number}x +{number}s +{number}s",
        lines[6],
    ), lines[6]
    assert lines[7].startswith("load average after: ")
    assert lines[8].startswith("targets: hybrid median <= 25 ms at 100k")


def test_dashboard_pages_bench_times_every_page_over_a_big_scope(tmp_path: Path) -> None:
    """A small run (the figures need the default 10k entries)."""
    lines = run_bench("dashboard_pages.py", "--entries", "600", "--rounds", "3", cwd=tmp_path)
    text = "\n".join(lines)
    assert "600 entries and 600 history records" in text
    for page in ("scope listing", "scope search", "entry + history", "memory settings"):
        assert re.search(rf"{re.escape(page)} +p50 +[\d.]+ ms", text), page
    assert re.fullmatch(r"max_page_p50_ms=\d+\.\d", lines[-1])
