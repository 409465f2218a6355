"""Relations: a written entry is linked to its nearest neighbours above link_min (one edge per
pair, strength = similarity), and the LINK is in the audit trail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.relations import Relations, RelationSettings, link_entry

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


def test_recall_and_memory_query_bring_an_entry_linked_to_a_hit(memory: FileMemory) -> None:
    import datetime as dt
    import json

    from mindroom.memory.policy.access import CategoryAccess
    from mindroom.memory.policy.view import AgentView
    from mindroom.memory.search.recall import RecallSettings, build_recall
    from mindroom.memory.search.structured_query import Asker, parse_request, run_query

    hit = memory.add_sync("Alice drinks oat milk every morning", actor="tool", path="notes.md")
    doctor = memory.add_sync("Dr Okafor looks after Alice", actor="tool", path="notes.md")
    now = dt.datetime(2026, 11, 25, 12)

    def recall() -> str:
        return build_recall(
            memory,
            "what about oat milk?",
            RecallSettings(),
            now=now,
            count=False,
            relations=SETTINGS,
        )

    def query() -> list[dict[str, str]]:
        view = AgentView(memory, CategoryAccess.everything(), relations=SETTINGS)
        request = parse_request({"query": "oat milk", "top_k": 1})
        return json.loads(run_query(view, request, Asker("a", None, frozenset({"a"}))))

    before, before_query = recall(), query()
    relations = Relations(memory)
    try:
        relations.link(hit.id, [(doctor.id, 0.9)])
    finally:
        relations.close()
    after, after_query = recall(), query()
    assert "oat milk every morning" in before  # control: the hit itself is recalled
    assert "Okafor" not in before
    assert "### Linked to these" in after
    assert "Dr Okafor looks after Alice" in after
    assert [r["id"] for r in before_query] == [hit.id]
    assert after_query[1] == {
        "id": doctor.id,
        "category": "general",
        "related_to": hit.id,
        "text": "[general] Dr Okafor looks after Alice",
    }
