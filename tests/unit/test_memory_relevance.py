"""The relevance gate: what a hit shares with the message must be specific to this memory."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.search.index import MemoryIndex
from mindroom.memory.search.query import parse_query
from mindroom.memory.search.relevance import Candidate, Gate, idf, judge, relevant
from tests.support.harness import write_entries

NOW = dt.datetime(2024, 5, 3, 12)
MEMORY_ENTRY = MemoryEntry("h-1", "text", "MEMORY.md", 1, 1)
COMMON = "thanks for the good time"
GATE = Gate(rare_word_entries=5)


def judged(index: MemoryIndex, query: str, gate: Gate = GATE) -> dict[str, float]:
    hits = index.search(query, 50, now=NOW)
    return {c.entry.text: c.information for c in judge(index, query, hits, gate, now=NOW)}


def test_term_counts_match_as_the_index_matches(index: MemoryIndex, root: Path) -> None:
    write_entries(
        root, "memory/2024-05-02.md", ["Alice runs every morning", "Bob was running late"]
    )
    write_entries(root, "topics/x.md", ["running shoes on 2 May 2024", "nothing here"])
    index.sync()
    terms = parse_query("who ran yesterday, running?", NOW)
    entries = [MemoryEntry("h-1", "Bob was running late", "memory/2024-05-02.md", 2, 2)]
    entries.append(MemoryEntry("h-2", "nothing here", "topics/x.md", 2, 2))

    counts = index.term_counts(terms, entries)

    assert counts.total == 4
    assert counts.frequency == {"2024-05-02": 3, "ran": 0, "running": 3}  # stems, both dates
    assert counts.held == [frozenset({"2024-05-02", "running"}), frozenset()]


def test_a_hit_must_share_as_much_as_a_word_of_few_entries(index: MemoryIndex, root: Path) -> None:
    fillers = [f"filler line {n}" for n in range(100)]
    write_entries(
        root, "MEMORY.md", [COMMON] * 30 + fillers + [f"Pixel the dog, photo {n}" for n in range(5)]
    )
    write_entries(root, "topics/pets.md", ["the cat sleeps a lot"] * 6)
    total = 30 + 100 + 5 + 6
    unit = idf(total, 5)

    info = judged(index, "thanks! what do Pixel and the cat do?")

    assert info["Pixel the dog, photo 0"] == pytest.approx(1.0)
    assert info["the cat sleeps a lot"] == pytest.approx(idf(total, 6) / unit)
    assert info["the cat sleeps a lot"] < 1.0
    assert info[COMMON] == pytest.approx(idf(total, 30) / unit)
    assert info[COMMON] < 0.5


def test_information_adds_up_over_the_shared_terms(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", [f"filler line {n}" for n in range(41)])
    teapots = [f"green tea pot {n}" for n in range(6)]
    write_entries(root, "topics/a.md", ["green tea", "black tea", "green walls", *teapots])
    info = judged(index, "green tea")
    tea = green = idf(50, 8) / idf(50, 5)  # each is in 8 of 50 entries
    assert info["green tea"] == pytest.approx(tea + green)
    assert info["green tea"] > 1.0
    assert info["black tea"] == pytest.approx(tea)
    assert info["black tea"] < 1.0
    assert info["green walls"] == pytest.approx(green)


def test_the_same_word_is_specific_in_one_memory_and_common_in_another(
    tmp_path: Path, root: Path
) -> None:
    write_entries(root, "MEMORY.md", ["went hiking", *[f"note {n}" for n in range(30)]])
    rare = MemoryIndex(tmp_path / "a.db", root)
    other = tmp_path / "other"
    write_entries(other, "MEMORY.md", [f"went hiking again {n}" for n in range(30)])
    common = MemoryIndex(tmp_path / "b.db", other)
    try:
        [found] = judge(rare, "hiking?", rare.search("hiking?"), GATE)
        assert relevant(found, GATE)
        judged_common = judge(common, "hiking?", common.search("hiking?"), GATE)
        assert judged_common
        assert not any(relevant(c, GATE) for c in judged_common)
    finally:
        rare.close()
        common.close()


def test_a_memory_too_small_to_tell_counts_any_shared_word(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["my cat Miso", "Miso sleeps on the piano", "Miso hates rain"])
    info = judged(index, "what does Miso do?")
    assert len(info) == 3
    assert all(relevant(Candidate(MEMORY_ENTRY, 0.5, value), GATE) for value in info.values())
    assert judged(index, "what does Miso do?", Gate(rare_word_entries=1)) == {
        text: pytest.approx(idf(3, 3) / idf(3, 1)) for text in info
    }


def test_a_day_named_in_the_message_weighs_in_full(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", [f"filler line {n}" for n in range(40)])
    write_entries(root, "memory/2024-05-02.md", [f"yesterday's note {n}" for n in range(20)])
    write_entries(root, "memory/2024-04-01.md", ["an older note"])
    info = judged(index, "what did I do yesterday?")
    assert set(info) == {f"yesterday's note {n}" for n in range(20)}
    assert all(value > 1.0 for value in info.values())
    month = judged(index, "what did I do in May 2024?")
    assert all(value < 1.0 for value in month.values())  # a month is as common as its entries


def test_similarity_decides_when_a_hit_carries_one() -> None:
    gate = Gate(rare_word_entries=5, min_similarity=0.5)
    assert relevant(Candidate(MEMORY_ENTRY, 0.5, information=1.0), gate)
    assert not relevant(Candidate(MEMORY_ENTRY, 0.5, information=0.9), gate)
    assert relevant(Candidate(MEMORY_ENTRY, 0.5, information=0.0, similarity=0.6), gate)
    assert not relevant(Candidate(MEMORY_ENTRY, 0.5, information=3.0, similarity=0.2), gate)


def test_judge_passes_on_a_semantic_similarity_by_entry(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["the dog is called Pixel", "the cat is called Miso"])
    hits = index.search("dog cat", now=NOW)
    similarity = {("MEMORY.md", 1): 0.9}
    found = judge(index, "dog cat", hits, GATE, similarity=similarity)
    assert {c.entry.text: c.similarity for c in found} == {
        "the dog is called Pixel": 0.9,
        "the cat is called Miso": None,
    }
