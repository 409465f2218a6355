"""VectorIndex: embeddings of the memory entries, derived from the files like the keyword index.

Real files, real SQLite and the real local embedder (all-MiniLM-L6-v2, loaded once per session).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.adapters.embeddings.local import SentenceTransformerEmbedder
from mindroom.memory.files.protocol import atomic_write
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.candidates import search_candidates

SEEDED = WriteConsent.confirmed()  # test data stands for facts stored with consent

FACTS = [
    "Allergic to peanuts",
    "Bob plays the violin on Sundays",
    "The office moved to Berlin last spring",
    "Carol's son is called Max",
    "The car needs new winter tyres",
    "Runs five kilometres every morning",
]


class Counting:
    """An embedder that passes everything to a real one and remembers what it was asked."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.texts: list[str] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def scope(tmp_path: Path) -> MemoryScope:
    return MemoryScope("agent_test", tmp_path / "workspace", tmp_path / "state")


@pytest.fixture
def counting(local_embedder: Embedder) -> Counting:
    return Counting(local_embedder)


@pytest.fixture
def memory(tmp_path: Path, counting: Counting) -> Iterator[FileMemory]:
    (tmp_path / "workspace").mkdir()
    opened = FileMemory(scope(tmp_path), counting)
    yield opened
    opened.close()


def vectors_of(memory: FileMemory):
    vectors = memory.vectors
    assert vectors is not None
    return vectors


def hand_write(memory: FileMemory, relative: str, lines: list[str]) -> None:
    path = memory.scope.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(f"- {line}\n" for line in lines))


def texts(hits) -> list[str]:
    return [hit.entry.text for hit in hits]


def keys(rows) -> list[tuple]:
    return [row[:5] for row in rows]


def test_only_new_or_changed_entries_are_embedded(memory: FileMemory) -> None:
    vectors = vectors_of(memory)
    added = [memory.add_sync(text, actor="test", consent=SEEDED) for text in FACTS[:3]]
    assert vectors.sync() == 3

    memory.add_sync(FACTS[3], actor="test")
    assert vectors.sync() == 1
    memory.update_sync(added[0].id, "Allergic to peanuts and to cats", actor="test")
    assert vectors.sync() == 1
    memory.delete_sync(added[1].id, actor="test")
    assert vectors.sync() == 0
    assert vectors.sync() == 0  # nothing changed: nothing to do
    assert vectors.embedded == 5
    assert vectors.count() == 3


def test_an_unchanged_text_moved_to_another_file_keeps_its_vector(memory: FileMemory) -> None:
    vectors = vectors_of(memory)
    hand_write(memory, "MEMORY.md", FACTS[:4])
    assert vectors.sync() == 4

    hand_write(memory, "MEMORY.md", FACTS[:2])
    hand_write(memory, "memory/people.md", FACTS[2:4])

    assert vectors.sync() == 0
    assert {hit.entry.path for hit in vectors.search("where is the office?", 1)} == {
        "memory/people.md"
    }


def test_vector_search_finds_a_memory_that_shares_no_word_with_the_query(
    memory: FileMemory, local_embedder: Embedder
) -> None:
    hand_write(memory, "MEMORY.md", FACTS)
    query = "food intolerance"

    hits = vectors_of(memory).search(query, 3)

    assert texts(hits)[0] == "Allergic to peanuts"
    assert memory.index.search(query, 3) == []  # the keyword side cannot find it
    a, b = local_embedder.embed([query, "Allergic to peanuts"])
    assert hits[0].score == pytest.approx(float(a @ b), abs=1e-5)  # cosine similarity
    assert hits[0].score > hits[1].score > hits[2].score


def test_a_hand_edit_reaches_the_vector_index_as_it_reaches_the_keyword_index(
    memory: FileMemory,
) -> None:
    vectors = vectors_of(memory)
    hand_write(memory, "MEMORY.md", FACTS[:3])
    hand_write(memory, "memory/2025-03-01.md", ["Went sailing on the lake with Dana"])
    assert texts(vectors.search("a trip on a boat", 1)) == ["Went sailing on the lake with Dana"]

    hand_write(memory, "memory/2025-03-01.md", ["Went hiking in the Alps with Dana"])
    assert texts(vectors.search("a walk in the mountains", 1)) == [
        "Went hiking in the Alps with Dana"
    ]
    assert "Went sailing on the lake with Dana" not in texts(vectors.search("boat", 10))
    (memory.scope.root / "memory" / "2025-03-01.md").unlink()
    assert all("Dana" not in text for text in texts(vectors.search("hiking with Dana", 10)))

    # both indexes hold exactly the entries the files hold
    assert keys(vectors.snapshot()) == memory.index.snapshot()


def test_reindex_gives_the_same_index_as_incremental_updates(memory: FileMemory) -> None:
    vectors = vectors_of(memory)
    entries = [memory.add_sync(text, actor="test", consent=SEEDED) for text in FACTS]
    vectors.sync()
    memory.update_sync(entries[1].id, "Bob plays the cello on Sundays", actor="test")
    memory.delete_sync(entries[2].id, actor="test")
    hand_write(memory, "memory/2025-03-01.md", ["Booked flights to Lisbon", "Dentist on Friday"])
    vectors.sync()
    hand_write(memory, "memory/2025-03-01.md", ["Booked flights to Porto", "Dentist on Friday"])
    queries = ["music", "travel plans", "health", "family"]
    before = vectors.snapshot()
    hits_before = [[(h.entry.id, h.entry.path) for h in vectors.search(q, 3)] for q in queries]

    memory.index.rebuild()
    assert vectors.rebuild() == len(before)

    after = vectors.snapshot()
    assert keys(after) == keys(before) == memory.index.snapshot()
    for old, new in zip(before, after, strict=True):
        np.testing.assert_allclose(old[5], new[5], atol=1e-5)
    assert [[(h.entry.id, h.entry.path) for h in vectors.search(q, 3)] for q in queries] == (
        hits_before
    )


def test_a_deleted_index_is_rebuilt_from_the_files(tmp_path: Path, memory: FileMemory) -> None:
    for text in FACTS:
        memory.add_sync(text, actor="test", consent=SEEDED)
    before = [(h.entry.id, round(h.score, 4)) for h in vectors_of(memory).search("music", 3)]
    memory.close()
    for name in os.listdir(tmp_path / "state"):
        if name.startswith(("index.db", "vectors.db")):
            (tmp_path / "state" / name).unlink()

    again = Counting(vectors_of(memory).embedder)
    reopened = FileMemory(scope(tmp_path), again)
    try:
        after = [(h.entry.id, round(h.score, 4)) for h in vectors_of(reopened).search("music", 3)]
        assert after == before
        assert vectors_of(reopened).embedded == len(FACTS)  # everything embedded again
    finally:
        reopened.close()


def test_stored_vectors_are_reused_by_the_next_process(tmp_path: Path, memory: FileMemory) -> None:
    for text in FACTS:
        memory.add_sync(text, actor="test", consent=SEEDED)
    vectors_of(memory).sync()
    memory.close()

    again = Counting(vectors_of(memory).embedder)
    reopened = FileMemory(scope(tmp_path), again)
    try:
        assert texts(vectors_of(reopened).search("food intolerance", 1)) == [FACTS[0]]
        assert again.texts == ["food intolerance"]  # only the query was embedded
    finally:
        reopened.close()


def test_vectors_of_entries_that_are_gone_are_pruned(tmp_path: Path, memory: FileMemory) -> None:
    hand_write(memory, "MEMORY.md", FACTS)
    vectors_of(memory).sync()
    hand_write(memory, "MEMORY.md", FACTS[:2])
    vectors_of(memory).sync()
    assert vectors_of(memory).stored() == len(FACTS)  # few gone: kept until a bulk prune
    memory.close()

    reopened = FileMemory(scope(tmp_path), memory.embedder)
    try:
        assert vectors_of(reopened).count() == 2
        assert vectors_of(reopened).stored() == 2  # opening prunes
    finally:
        reopened.close()


def test_excluded_files_are_left_out_of_vector_hits(memory: FileMemory) -> None:
    hand_write(memory, "MEMORY.md", FACTS[:1])
    hand_write(memory, "memory/food.md", ["Cannot eat shellfish"])
    all_hits = vectors_of(memory).search("food allergy", 5)
    assert {hit.entry.path for hit in all_hits} == {"MEMORY.md", "memory/food.md"}

    hits = vectors_of(memory).search("food allergy", 5, exclude_paths=frozenset({"MEMORY.md"}))

    assert texts(hits) == ["Cannot eat shellfish"]


def test_candidates_hold_both_halves_and_the_product_search_fuses_them(
    memory: FileMemory,
) -> None:
    hand_write(memory, "MEMORY.md", FACTS)

    found = search_candidates(memory, "what does Bob play", 3)

    assert found.keyword == memory.index.search("what does Bob play", 3)
    assert texts(found.keyword)[0] == "Bob plays the violin on Sundays"
    assert found.vector is not None
    assert texts(found.vector)[0] == "Bob plays the violin on Sundays"
    assert found.note == ""
    # the product's search fuses both halves (mindroom.memory.search.hybrid)
    fused = asyncio.run(memory.search("what does Bob play", 3))
    assert texts(fused)[0] == "Bob plays the violin on Sundays"


def test_an_embedder_that_cannot_load_leaves_search_keyword_only_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "workspace").mkdir()
    broken = SentenceTransformerEmbedder("./no-such-model", base_dir=tmp_path)
    memory = FileMemory(scope(tmp_path), broken)
    try:
        hand_write(memory, "MEMORY.md", FACTS)
        with caplog.at_level(logging.WARNING):
            first = search_candidates(memory, "Bob violin", 3)
            second = search_candidates(memory, "Bob violin", 3)
    finally:
        memory.close()

    for found in (first, second):
        assert texts(found.keyword)[0] == "Bob plays the violin on Sundays"
        assert found.vector is None
        assert "keyword-only" in found.note
        assert "no sentence-transformers model folder" in found.note
    warnings = [r for r in caplog.records if "keyword-only" in r.getMessage()]
    assert len(warnings) == 1
    assert "agent_test" in warnings[0].getMessage()


def test_a_memory_without_an_embedder_is_keyword_only(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    memory = FileMemory(scope(tmp_path))
    try:
        hand_write(memory, "MEMORY.md", FACTS)
        found = search_candidates(memory, "Bob violin", 3)
    finally:
        memory.close()
    assert texts(found.keyword)[0] == "Bob plays the violin on Sundays"
    assert found.vector is None
    assert not (tmp_path / "state" / "vectors.db").exists()


def test_a_copied_scope_with_its_vectors_needs_no_embedding(
    tmp_path: Path, memory: FileMemory
) -> None:
    hand_write(memory, "MEMORY.md", FACTS)
    vectors_of(memory).sync()
    memory.close()
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "workspace", copy / "workspace")
    shutil.copytree(tmp_path / "state", copy / "state")

    again = Counting(vectors_of(memory).embedder)
    moved = FileMemory(scope(copy), again)
    try:
        # new inodes: the keyword index re-reads every file; the texts, and so vectors, are known
        assert vectors_of(moved).sync() == 0
        assert again.texts == []
    finally:
        moved.close()


def test_large_indexes_score_through_float16_and_rank_exactly_like_small_ones(
    tmp_path: Path, memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mindroom.memory.search.vectors as vectors_module

    hand_write(memory, "MEMORY.md", FACTS)
    hand_write(memory, "memory/2025-03-01.md", [f"Note {i}: {f}" for i, f in enumerate(FACTS)])
    queries = ["food intolerance", "music on weekends", "a car in winter", "exercise"]

    def ranked(opened: FileMemory) -> list[list[tuple[str, str, float]]]:
        return [
            [(h.entry.id, h.entry.path, h.score) for h in vectors_of(opened).search(q, 4)]
            for q in queries
        ]

    exact = ranked(memory)
    assert vectors_of(memory)._scorer is None
    monkeypatch.setattr(vectors_module, "HALF_FROM", 1)
    large = FileMemory(scope(tmp_path), memory.embedder)
    try:
        found = ranked(large)
        assert vectors_of(large)._scorer is not None  # the float16 path ran
    finally:
        large.close()

    assert [[hit[:2] for hit in hits] for hits in found] == [
        [hit[:2] for hit in hits] for hits in exact
    ]
    for new, old in zip(found, exact, strict=True):
        assert [hit[2] for hit in new] == pytest.approx([hit[2] for hit in old], abs=1e-6)
