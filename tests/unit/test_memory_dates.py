"""Entry dates: from the daily file or the text, searchable, carried by hits; the schema change."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from pathlib import Path

from mindroom.memory.files.dates import date_words, entry_dates
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.search.index import SCHEMA_VERSION, MemoryIndex
from tests.support.harness import write_entries

NOW = dt.datetime(2023, 8, 17, 12)  # a Thursday


def found(index: MemoryIndex, query: str, limit: int = 10) -> list[str]:
    return [hit.entry.text for hit in index.search(query, limit, now=NOW)]


def diary(root: Path) -> None:
    write_entries(root, "memory/2023-05-08.md", ["went hiking with Bob", "bought new boots"])
    write_entries(root, "memory/2023-06-01.md", ["painted the kitchen"])
    write_entries(root, "memory/2023-08-16.md", ["fixed the bike", "called mum"])
    write_entries(root, "memory/2022-05-20.md", ["planted tomatoes"])
    write_entries(root, "topics/trips.md", ["Flew to Lisbon on 12 March 2024", "Undated trip idea"])
    write_entries(root, "MEMORY.md", ["Bob is my brother", "I may move to Porto"])


def test_entries_of_a_daily_file_are_found_by_their_day_month_and_year(
    index: MemoryIndex, root: Path
) -> None:
    diary(root)
    may_2023 = ["went hiking with Bob", "bought new boots"]
    assert sorted(found(index, "what did I do in May 2023?")) == sorted(may_2023)
    assert sorted(found(index, "what happened on 8 May 2023")) == sorted(may_2023)
    assert sorted(found(index, "2023-05-08")) == sorted(may_2023)
    assert sorted(found(index, "on 8 May")) == sorted(may_2023)
    assert sorted(found(index, "anything in May?")) == sorted([*may_2023, "planted tomatoes"])
    assert found(index, "June 2023") == ["painted the kitchen"]
    assert found(index, "what about 9 May 2023?") == []


def test_a_date_written_in_an_entry_is_its_date_and_is_searchable(
    index: MemoryIndex, root: Path
) -> None:
    diary(root)
    [hit] = index.search("March 2024", now=NOW)
    assert hit.entry.text == "Flew to Lisbon on 12 March 2024"
    assert hit.entry.date == dt.date(2024, 3, 12)
    assert found(index, "12 March") == ["Flew to Lisbon on 12 March 2024"]


def test_search_hits_carry_the_entry_date(index: MemoryIndex, root: Path) -> None:
    diary(root)
    dates = {hit.entry.text: hit.entry.date for hit in index.search("bike boots trip", 10)}
    assert dates == {
        "fixed the bike": dt.date(2023, 8, 16),
        "bought new boots": dt.date(2023, 5, 8),
        "Undated trip idea": None,
    }


def test_relative_dates_find_the_entries_of_those_days(index: MemoryIndex, root: Path) -> None:
    diary(root)
    assert sorted(found(index, "what did I do yesterday?")) == ["called mum", "fixed the bike"]
    assert found(index, "today") == []
    write_entries(root, "memory/2023-05-09.md", ["fixed the bike again"])
    # the same words, but the day asked about ranks first
    assert found(index, "did I fix the bike yesterday?")[0] == "fixed the bike"


def test_a_month_name_that_is_not_a_date_matches_words_not_dates(
    index: MemoryIndex, root: Path
) -> None:
    diary(root)
    assert found(index, "May I move?") == ["I may move to Porto"]


def test_the_date_column_spells_each_date_of_an_entry() -> None:
    dates = entry_dates("memory/2023-05-08.md", "met Ann, booked 2023-06-01 and 2 July 2023")
    assert dates == [dt.date(2023, 5, 8), dt.date(2023, 6, 1), dt.date(2023, 7, 2)]
    assert date_words(dates[:1]) == "2023-05-08 8 May 2023"
    assert entry_dates("topics/x.md", "nothing dated, 2023-02-30 is no day") == []
    entry = MemoryEntry("h-1", "note", "memory/2023-05-08.md", 1, 1)
    assert entry.date == dt.date(2023, 5, 8)


# -- the schema change: an index of the old schema is rebuilt from the files -------------------

OLD_SCHEMA = """
CREATE TABLE files (path TEXT PRIMARY KEY, signature TEXT NOT NULL);
CREATE VIRTUAL TABLE entries USING fts5(
    text, path UNINDEXED, entry_id UNINDEXED, start_line UNINDEXED, end_line UNINDEXED,
    tokenize = 'porter unicode61'
);
"""


def test_an_index_of_the_old_schema_is_rebuilt_when_opened(tmp_path: Path, root: Path) -> None:
    diary(root)
    db_path = tmp_path / "state" / "index.db"
    db_path.parent.mkdir()
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        db.executescript(OLD_SCHEMA)
        # what an old version indexed: it looks up to date, but has no dates
        for relative in ("memory/2023-05-08.md", "topics/trips.md"):
            stat = (root / relative).stat()
            signature = f"{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}"
            db.execute("INSERT INTO files VALUES (?, ?)", (relative, signature))
        db.execute("INSERT INTO entries VALUES ('stale row', 'topics/trips.md', 'h-x', 1, 1)")
        db.commit()

    index = MemoryIndex(db_path, root)
    try:
        assert sorted(found(index, "May 2023")) == ["bought new boots", "went hiking with Bob"]
        assert found(index, "stale") == []
        fresh = MemoryIndex(tmp_path / "fresh" / "index.db", root)
        try:
            fresh.rebuild()
            assert index.snapshot() == fresh.snapshot()
        finally:
            fresh.close()
    finally:
        index.close()
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_an_index_of_the_current_schema_is_kept_when_reopened(
    tmp_path: Path, root: Path, index: MemoryIndex
) -> None:
    diary(root)
    assert index.sync() > 0
    index.close()
    again = MemoryIndex(index.db_path, root)
    try:
        assert again.sync() == 0  # nothing re-indexed: the rows were kept
        assert "painted the kitchen" in found(again, "June 2023")
    finally:
        again.close()
