"""Hybrid search and the recall gate with the real local embedder.

Real files, real SQLite, the real all-MiniLM-L6-v2 (the ``local_embedder`` session fixture).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.config import parse_config
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.hybrid import Weights, fuse, hybrid_search
from mindroom.memory.search.index import SearchHit
from mindroom.memory.search.recall import RecallSettings, build_recall
from tests.support.harness import config_text
from tests.support.waiting import wait_until_sync

SEEDED = WriteConsent.confirmed()  # test data stands for facts stored with consent

FACTS = [
    "Alice (@alice:example.org) takes cello lessons every Thursday",
    "The office moved to Berlin last spring",
    "Carol's son is called Max and he is seven",
    "Bob is allergic to peanuts",
    "The team retrospective is on the first Monday of the month",
    "Alice prefers green tea over coffee",
]
CHITCHAT = ["thanks!", "ok sounds good", "lol", "good morning", "see you later", "nice one"]


def entry(text: str, line: int) -> MemoryEntry:
    return MemoryEntry(id=f"m-{line}", text=text, path="MEMORY.md", start_line=line, end_line=line)


def test_fusion_normalises_each_half_so_neither_drowns_the_other() -> None:
    a, b, c, d, e = (entry(text, line) for line, text in enumerate("abcde", 1))
    keyword = [SearchHit(a, 0.9), SearchHit(b, 0.8), SearchHit(d, 0.1)]
    vector = [SearchHit(c, 0.8), SearchHit(b, 0.75), SearchHit(e, 0.1)]
    found = fuse(keyword, vector, Weights(0.5, 0.5))
    assert [f.entry.text for f in found][0] == "b"  # high in both halves
    assert {f.entry.text for f in found} == {"a", "b", "c", "d", "e"}
    by_text = {f.entry.text: f for f in found}
    assert by_text["a"].similarity == 0.1  # outside the vector pool: bounded by its worst
    assert by_text["c"].keyword is None
    lone = fuse([SearchHit(a, 0.01)], [], Weights(0.5, 0.5, file=0.0))
    assert lone[0].score == 0.5  # a lone keyword hit counts fully, however low its BM25
    only_vectors = fuse([], [SearchHit(c, 0.2)], Weights(0.0, 1.0, file=0.0))
    assert only_vectors[0].score == 1.0


@pytest.fixture
def memory(tmp_path: Path, local_embedder: Embedder) -> Iterator[FileMemory]:
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    opened = FileMemory(MemoryScope("agent_test", workspace, tmp_path / "state"), local_embedder)
    day = (dt.date.today() - dt.timedelta(days=30)).isoformat()
    for text in FACTS:
        opened.add_sync(text, actor="test", path=f"memory/{day}.md", consent=SEEDED)
    yield opened
    opened.close()


def test_hybrid_search_finds_a_memory_by_meaning_where_keywords_find_nothing(
    memory: FileMemory,
) -> None:
    query = "which musical instrument is she learning?"
    assert memory.index.search(query, 5) == []  # the control: no shared word
    found = hybrid_search(memory, query, 3)
    assert found[0].entry.text == FACTS[0]
    assert found[0].similarity is not None
    # the tools' search is the same ranking
    tool = asyncio.run(memory.search(query, 3))
    assert [h.entry.text for h in tool] == [f.entry.text for f in found]


def test_without_vectors_the_search_is_keyword_only(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    plain = FileMemory(MemoryScope("agent_test", workspace, tmp_path / "state"))
    try:
        plain.add_sync("Bob is allergic to peanuts", actor="test")
        found = hybrid_search(plain, "is Bob allergic to anything?", 3)
        assert [f.entry.text for f in found] == ["Bob is allergic to peanuts"]
        assert found[0].similarity is None
    finally:
        plain.close()


def test_recall_gives_chitchat_nothing_and_questions_their_memory(memory: FileMemory) -> None:
    settings = RecallSettings.of(
        parse_config(config_text("http://127.0.0.1:9/v1", {"a": {}}), "c.yaml").memory.file
    )
    for message in CHITCHAT:
        block = build_recall(memory, message, settings)
        assert not any(fact in block for fact in FACTS), (message, block)
    asked = build_recall(memory, "when does Alice have her music lessons?", settings)
    assert FACTS[0] in asked  # the control: a real question gets its memory
    asked = build_recall(memory, "what is the name of Carol's kid?", settings)
    assert FACTS[2] in asked


def test_a_hit_gains_from_the_hits_written_just_before_and_after_it() -> None:
    first, second, far = entry("q", 1), entry("answer", 2), entry("other", 9)
    keyword = [SearchHit(first, 0.9), SearchHit(far, 0.5), SearchHit(second, 0.1)]
    vector = [SearchHit(first, 0.9), SearchHit(far, 0.5), SearchHit(second, 0.1)]
    plain = fuse(keyword, vector, Weights(0.5, 0.5, neighbour=0.0))
    assert [f.entry.text for f in plain] == ["q", "other", "answer"]  # the control
    near = fuse(keyword, vector, Weights(0.5, 0.5, neighbour=0.6))
    assert [f.entry.text for f in near] == ["q", "answer", "other"]  # beside the best hit


def test_a_hit_gains_from_the_other_hits_of_its_file() -> None:
    """A day (a conversation) with several good hits is about the query: its weaker hits rise
    above an equally weak hit alone in another file."""

    def at(path: str, text: str, line: int) -> MemoryEntry:
        return MemoryEntry(
            id=f"m-{path}-{line}", text=text, path=path, start_line=line, end_line=line
        )

    best, good, weak = (
        at("memory/a.md", "best", 1),
        at("memory/a.md", "good", 10),
        at("memory/a.md", "weak", 20),
    )
    alone = at("memory/b.md", "alone", 1)
    keyword = [
        SearchHit(best, 0.9),
        SearchHit(good, 0.7),
        SearchHit(alone, 0.45),
        SearchHit(weak, 0.4),
    ]
    vector = [
        SearchHit(best, 0.9),
        SearchHit(good, 0.7),
        SearchHit(alone, 0.45),
        SearchHit(weak, 0.4),
    ]
    plain = fuse(keyword, vector, Weights(0.5, 0.5, neighbour=0.0, file=0.0))
    assert [f.entry.text for f in plain] == ["best", "good", "alone", "weak"]  # the control
    together = fuse(keyword, vector, Weights(0.5, 0.5, neighbour=0.0, file=0.2))
    assert [f.entry.text for f in together] == ["best", "good", "weak", "alone"]
    # a file's own order never changes: the gain is the same for every hit of one file
    assert [f.entry.text for f in together if f.entry.path == "memory/a.md"] == [
        "best",
        "good",
        "weak",
    ]


def test_a_big_backlog_is_embedded_in_the_background_while_search_stays_keyword_only(
    tmp_path: Path, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade from keyword-only (or a big import) leaves many entries unembedded: a search
    does not make its caller wait for them; it answers from keywords and the vectors follow."""
    import mindroom.memory.search.hybrid as hybrid

    monkeypatch.setattr(hybrid, "CATCH_UP_LIMIT", 3)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    memory = FileMemory(MemoryScope("agent_test", workspace, tmp_path / "state"), local_embedder)
    try:
        for text in FACTS:  # 6 new entries, more than the limit
            memory.add_sync(text, actor="test", consent=SEEDED)
        found = hybrid_search(memory, "is Bob allergic to peanuts?", 3)
        assert found[0].entry.text == "Bob is allergic to peanuts"  # from keywords
        assert found[0].similarity is None  # the vector half sat this one out
        vectors = memory.vectors
        assert vectors is not None

        def by_meaning() -> list:
            # keyword-only while the background thread still embeds (it holds the index)
            later = hybrid_search(memory, "which musical instrument is she learning?", 3)
            return later if later and later[0].entry.text == FACTS[0] else []

        later = wait_until_sync(by_meaning, "the backlog embedded, then found by meaning")
        assert later[0].similarity is not None  # the control: found by meaning
        assert vectors.embedded == len(FACTS)  # every entry, in the background
    finally:
        memory.close()


def test_a_private_companions_vectors_never_answer_for_another_person(tmp_path: Path) -> None:
    """Meaning crosses no person's boundary: Bob's search, by meaning or by words, never
    returns what Alice told the same companion (each person's vectors live in their scope)."""
    from mindroom.memory.registry import MemoryRegistry

    agents = {"mind": {"private": {"per": "user"}}}
    config = parse_config(config_text("http://127.0.0.1:9/v1", agents, memory={}), "c.yaml")
    registry = MemoryRegistry(config, tmp_path)
    try:
        alice = registry.for_agent("mind", "@alice:localhost")
        bob = registry.for_agent("mind", "@bob:localhost")
        assert alice is not None
        assert bob is not None
        assert alice.vectors is not None  # the local embedder is on for this config
        alice.add_sync("Alice takes cello lessons every Thursday", actor="test")
        bob.add_sync("Bob is allergic to peanuts", actor="test")
        question = "which musical instrument is being learned?"
        mine = hybrid_search(alice, question, 5)
        assert [f.entry.text for f in mine][0].startswith("Alice takes cello")  # the control
        theirs = hybrid_search(bob, question, 5)
        assert all("cello" not in f.entry.text for f in theirs), theirs
        assert all("cello" not in f.entry.text for f in hybrid_search(bob, "cello lessons", 5))
    finally:
        registry.close()
