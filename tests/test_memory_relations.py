"""Relations: a written entry is linked to its nearest neighbours above link_min (one edge per
pair, strength = similarity), and the LINK is in the audit trail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.memory.relations import Relations, RelationSettings, link_entry
from mindroom.memory.scope import MemoryScope
from mindroom.memory.store import FileMemory

SETTINGS = RelationSettings(top_k=2, link_min=0.3)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    (root / "memory").mkdir(parents=True)
    mem = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    for text in [
        "Alice is lactose intolerant",
        "Alice avoids milk because of lactose intolerance",
        "Bob repairs vintage bicycles",
        "Carol teaches piano on Tuesdays",
    ] + [f"Chat number {n} about the weather" for n in range(20)]:
        mem.add_sync(text, actor="test", path="memory/2026-11-01.md")
    yield mem
    mem.close()


def test_a_new_entry_links_to_its_neighbours_and_not_to_unrelated_ones(memory: FileMemory) -> None:
    entry = memory.add_sync("Alice drinks oat milk, lactose free", actor="tool")
    assert link_entry(memory, entry, SETTINGS, actor="tool") >= 1
    relations = Relations(memory)
    try:
        edges = relations.edges([entry.id])[entry.id]
    finally:
        relations.close()
    texts = {memory.find(i).text for i, _ in edges}
    assert texts <= {
        "Alice is lactose intolerant",
        "Alice avoids milk because of lactose intolerance",
    }
    assert texts
    assert all(0.3 <= strength < 1 for _, strength in edges)
    (record,) = [r for r in memory.history_of(entry.id) if r.op == "link"]
    assert record.meta is not None
    assert record.meta["to"] == [i for i, _ in edges]


def test_linking_again_keeps_one_edge_per_pair(memory: FileMemory) -> None:
    entry = memory.add_sync("Alice drinks oat milk, lactose free", actor="tool")
    first = link_entry(memory, entry, SETTINGS, actor="tool")
    link_entry(memory, entry, SETTINGS, actor="tool")
    relations = Relations(memory)
    try:
        assert relations.count() == first
    finally:
        relations.close()


def test_nothing_links_below_link_min_and_hand_written_lines_are_not_linked(
    memory: FileMemory,
) -> None:
    entry = memory.add_sync("Dave builds model ships", actor="tool")
    assert link_entry(memory, entry, SETTINGS, actor="tool") == 0
    relations = Relations(memory)
    try:
        assert relations.count() == 0
    finally:
        relations.close()
