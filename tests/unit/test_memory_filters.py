"""One filter, two forms: the SQL over the index and the check of an entry read from a file
agree on every entry, so no read path can show what another hides."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import append_entry, parse_entries
from mindroom.memory.policy.filters import LIVE, MemoryFilter
from mindroom.memory.search.index import MemoryIndex

CATEGORIES = [None, "general", "profile", "tasks", "procedural"]
DAYS = [None, dt.date(2026, 1, 1), dt.date(2026, 6, 1), dt.date(2026, 11, 20)]


def _random_fields(rng: random.Random) -> EntryFields:
    return EntryFields(
        category=rng.choice(CATEGORIES),
        importance=rng.choice([None, 1, 2, 3, 4, 5]),
        pinned=rng.random() < 0.3,
        type=rng.choice([None, "semantic", "episodic", "insight", "procedural"]),
        state=rng.choice([None, None, "active", "soft_deleted"]),
        created=rng.choice(DAYS),
        updated=rng.choice(DAYS),
    )


def _random_filter(rng: random.Random, ids: list[str]) -> MemoryFilter:
    def maybe(values: list[object]) -> object:
        return rng.choice([None, *values])

    return MemoryFilter(
        categories=rng.choice(
            [None, frozenset(), frozenset({"general"}), frozenset({"profile", "tasks"})]
        ),
        default_category=rng.choice(["general", "profile"]),
        pinned=maybe([True, False]),  # type: ignore[arg-type]
        importance_min=maybe([1, 3, 5]),  # type: ignore[arg-type]
        importance_max=maybe([2, 4]),  # type: ignore[arg-type]
        updated_after=maybe(DAYS[1:]),  # type: ignore[arg-type]
        updated_before=maybe(DAYS[1:]),  # type: ignore[arg-type]
        types=rng.choice([None, frozenset({"semantic"}), frozenset({"episodic", "insight"})]),
        exclude_types=rng.choice([frozenset(), frozenset({"procedural"})]),
        soft_deleted=rng.random() < 0.2,
        ids=rng.choice([None, frozenset(), frozenset(rng.sample(ids, k=min(5, len(ids))))]),
        hand_written=rng.random() < 0.5,
    )


@pytest.mark.parametrize("seed", range(8))
def test_sql_and_entry_checks_of_a_filter_agree_on_every_entry(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    for name in ("MEMORY.md", "memory/2026-06-01.md", "notes.md"):
        doc = "- a hand-written line about tea\nplain line 2026-06-01\n"
        for n in range(30):
            doc = append_entry(
                doc, f"m-{rng.getrandbits(32):08x}", f"entry {n}", _random_fields(rng)
            )
        (root / name).write_text(doc)
    entries = [
        e
        for name in ("MEMORY.md", "memory/2026-06-01.md", "notes.md")
        for e in parse_entries((root / name).read_text(), name)
    ]
    index = MemoryIndex(tmp_path / "index.db", root)
    try:
        for _ in range(60):
            only = _random_filter(rng, [e.id for e in entries])
            by_sql = {(e.path, e.id) for e in index.select(only.where(), 10_000)}
            by_check = {(e.path, e.id) for e in entries if only.holds(e)}
            assert by_sql == by_check, only
        # a positive control: the checks are not all empty
        assert index.select(LIVE.where(), 10_000)
        assert {e.id for e in index.select(LIVE.where(), 10_000)} < {e.id for e in entries}
    finally:
        index.close()


def test_search_never_returns_soft_deleted_entries_unless_asked(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    doc = append_entry("", "m-00000001", "Alice likes green tea", EntryFields())
    doc = append_entry(
        doc, "m-00000002", "Alice liked black tea", EntryFields(state="soft_deleted")
    )
    (root / "MEMORY.md").write_text(doc)
    index = MemoryIndex(tmp_path / "index.db", root)
    try:
        assert [h.entry.id for h in index.search("tea")] == ["m-00000001"]
        gone = MemoryFilter(soft_deleted=True).where()
        assert [h.entry.id for h in index.search("tea", where=gone)] == ["m-00000002"]
        assert index.search("tea")[0].entry.fields == EntryFields()
    finally:
        index.close()
