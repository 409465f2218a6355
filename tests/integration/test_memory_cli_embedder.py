"""``mindroom memory reindex`` with the bundled embedder (the real all-MiniLM-L6-v2): every entry is
embedded again, and the rebuilt vector index equals the incremental one."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import agent_scope
from tests.support.memory_cli import MemoryCli, copy_config, memory_cli, root_of


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return copy_config(tmp_path)


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]) -> MemoryCli:
    return memory_cli(config, capsys)


def test_reindex_counts_every_entry_and_restores_search_after_the_db_is_lost(
    cli, config: Path
) -> None:
    cli("add", "kiwi fact")
    cli("add", "mango fact", "--file", "topics/fruit.md")
    (root_of(config) / "memory").mkdir()
    (root_of(config) / "memory" / "2024-05-03.md").write_text("# Today\n- hand kiwi\n")
    state = config.parent / "mindroom_data" / "memory" / "agent_general"
    for db in state.glob("index.db*"):
        db.unlink()

    code, out, _ = cli("reindex")

    assert code == 0
    assert out == (
        f"reindexed 3 memories from {root_of(config)}\n"
        "embedded 3 memories with sentence-transformers/all-MiniLM-L6-v2\n"
    )
    code, out, _ = cli("search", "kiwi")
    assert len(out.splitlines()) == 2


def test_reindex_rebuilds_the_vector_index_like_the_incremental_one(
    cli, config: Path, local_embedder
) -> None:
    cli("add", "Alice prefers oolong tea")
    cli("add", "The garage door sticks", "--file", "topics/house.md")
    scope = agent_scope(config.parent, "general")
    incremental = FileMemory(scope, local_embedder)
    try:
        assert incremental.vectors is not None
        incremental.vectors.sync()
        (root_of(config) / "topics" / "house.md").write_text("- The garage door squeaks\n")
        expected = incremental.vectors.snapshot()  # follows the hand edit
    finally:
        incremental.close()

    code, out, _ = cli("reindex")

    assert code == 0
    assert out.endswith("embedded 2 memories with sentence-transformers/all-MiniLM-L6-v2\n")
    rebuilt = FileMemory(scope, local_embedder)
    try:
        assert rebuilt.vectors is not None
        assert rebuilt.vectors.sync() == 0  # every vector is in the rebuilt index
        found = rebuilt.vectors.snapshot()
    finally:
        rebuilt.close()
    assert [row[2] for row in found] == ["Alice prefers oolong tea", "The garage door squeaks"]
    assert [row[:5] for row in found] == [row[:5] for row in expected]
    for new, old in zip(found, expected, strict=True):
        assert new[5].tolist() == pytest.approx(old[5].tolist(), abs=1e-5)
