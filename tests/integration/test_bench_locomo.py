"""The LoCoMo benchmarks measure what they say: run on a tiny LoCoMo-shaped file, by hand.

The data is written here (two sessions, a few turns, questions whose scores can be worked out
on paper); no real data and no network. The scripts run as a person runs them, in a
subprocess, from a folder that is not the repository.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from mindroom.config.schema import MemoryConfig
from mindroom.memory.files.protocol import read_text
from tests.support.benches import REPO, run_bench

SAMPLE = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {
                "speaker": "Caroline",
                "dia_id": "D1:1",
                "text": "I adopted a puppy named Biscuit last weekend.",
            },
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Pottery class keeps me busy."},
            {
                "speaker": "Caroline",
                "dia_id": "D1:3",
                "text": "Look at him!",
                "img_url": ["https://example.invalid/dog.jpg"],
                "blip_caption": "a photo of a dog sleeping on a couch",
            },
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Caroline", "dia_id": "D2:1", "text": "I started learning the violin."},
            {"speaker": "Melanie", "dia_id": "D2:2", "text": "Kayaking on the lake was wonderful."},
        ],
        "session_3_date_time": "4:00 pm on 1 July, 2023",  # a date without turns, as in LoCoMo
    },
    "qa": [
        # D1:1 is the only hit with these words ranked first; D2:2 shares none: found 1 of 2
        {
            "question": "What is the name of the puppy Caroline adopted?",
            "evidence": ["D1:1", "D2:2"],
            "category": 1,
        },
        # no stored word at all: nothing found
        {"question": "Which pet food brand is cheapest?", "evidence": ["D1:2"], "category": 4},
        # adversarial: only in "all"; "learning" is in D2:1 only
        {"question": "Who is learning an instrument?", "evidence": ["D2:1"], "category": 5},
        # skipped: evidence the conversation does not have, or none
        {"question": "Where is Biscuit?", "evidence": ["D9:9"], "category": 1},
        {"question": "What did Caroline adopt?", "evidence": [], "category": 2},
    ],
}

SUMMARY_RE = r"R@5=\d\.\d{3} R@10=\d\.\d{3} MRR=\d\.\d{3} n=\d+"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    return path


@pytest.fixture
def locomo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("locomo")


def test_locomo_retrieval_scores_recall_as_the_fraction_of_evidence_found(
    data: Path, tmp_path: Path
) -> None:
    lines = run_bench("locomo_retrieval.py", "--data", str(data), cwd=tmp_path)
    assert re.fullmatch(rf"cat1-4: {SUMMARY_RE}", lines[-2]), lines
    assert re.fullmatch(rf"all: {SUMMARY_RE}", lines[-1]), lines
    # cat 1-4: the puppy question finds 1 of its 2 turns at rank 1, the pet food one nothing
    assert lines[-2] == "cat1-4: R@5=0.250 R@10=0.250 MRR=0.500 n=2"
    # all: plus the adversarial one, found at rank 1: (0.5 + 0 + 1) / 3, (1 + 0 + 1) / 3
    assert lines[-1] == "all: R@5=0.500 R@10=0.500 MRR=0.667 n=3"


def test_locomo_retrieval_on_mem0_ends_with_the_same_two_lines_and_prints_latencies(
    data: Path, tmp_path: Path
) -> None:
    lines = run_bench("locomo_retrieval.py", "--data", str(data), "--backend", "mem0", cwd=tmp_path)
    # five turns stored, ten hits asked for: every turn is among the hits, so a question
    # scores recall 1 exactly when each hit was mapped back to its turn's dia_id
    assert re.fullmatch(r"cat1-4: R@5=1\.000 R@10=1\.000 MRR=\d\.\d{3} n=2", lines[-2]), lines
    assert re.fullmatch(r"all: R@5=1\.000 R@10=1\.000 MRR=\d\.\d{3} n=3", lines[-1]), lines
    ms = r"p50=\d+\.\d ms p95=\d+\.\d ms"
    expected = [
        rf"# mem0 add \(verbatim, infer=False\): {ms} n=5",
        rf"# mem0 add \(infer=True, scripted model answering at once\): {ms} n=5 stored=5",
        rf"# mem0 search: {ms} n=3",
        rf"# file cat1-4: {SUMMARY_RE}",
        rf"# file all: {SUMMARY_RE}",
        rf"# file search \(embedder default\): {ms} n=3",
        rf"# keyword-only search: {ms} n=3",  # the baseline, measured in the same run
        rf"# keyword-only cat1-4: {SUMMARY_RE}",
        rf"# keyword-only all: {SUMMARY_RE}",
    ]
    assert len(lines) == 1 + len(expected) + 2, lines  # one conversation line first
    for pattern, line in zip(expected, lines[1:-2], strict=True):
        assert re.fullmatch(pattern, line), (pattern, line)


def test_recall_gate_counts_chitchat_and_the_questions_that_get_their_evidence(
    data: Path, tmp_path: Path
) -> None:
    lines = run_bench("recall_gate.py", "--data", str(data), cwd=tmp_path)
    chitchat = re.fullmatch(r"chitchat: injected=(\d+)/30 hits=(\d+)", lines[-2])
    assert chitchat is not None, lines
    injected, hits = int(chitchat[1]), int(chitchat[2])
    assert injected <= hits <= 30 * 5  # five stored turns at most in each block
    # no chit-chat message shares a word with these turns: search alone injects nothing
    assert "# chitchat a year later (no recent days): injected=0/30 hits=0" in lines
    # the puppy question gets D1:1 from the search (session 1 is not a recent day); the pet
    # food question shares no word with D1:2; the others are adversarial or skipped
    assert lines[-1] == "questions: evidence_injected=1/2"


def test_turns_are_entries_in_the_daily_file_of_their_session(
    locomo: ModuleType, tmp_path: Path
) -> None:
    conversation = locomo.parse_conversation(SAMPLE)
    memory = locomo.open_memory(locomo.bench_config(), tmp_path)
    try:
        dia_ids = asyncio.run(locomo.store(memory, conversation))
    finally:
        memory.close()
    assert sorted(dia_ids.values()) == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    may = read_text(memory.scope.root / "memory" / "2023-05-08.md")
    june = read_text(memory.scope.root / "memory" / "2023-06-09.md")
    assert "- Caroline (8 May 2023): I adopted a puppy named Biscuit last weekend. <!--" in may
    assert "- Melanie (9 June 2023): Kayaking on the lake was wonderful. <!--" in june
    assert "Caroline (8 May 2023): Look at him!" in may
    assert "couch" not in may  # the image caption is not the turn's text
    assert sorted(p.name for p in (memory.scope.root / "memory").iterdir()) == [
        "2023-05-08.md",
        "2023-06-09.md",
    ]


def test_session_dates_name_the_day(locomo: ModuleType) -> None:
    assert str(locomo.session_day("1:56 pm on 8 May, 2023")) == "2023-05-08"
    assert str(locomo.session_day("12:09 am on 13 September, 2023")) == "2023-09-13"


def test_the_default_data_is_found_from_the_repository_not_the_working_folder(
    locomo: ModuleType,
) -> None:
    expected = (REPO.parent / "shared" / "data" / "locomo-dev.json").resolve()
    default = locomo.DEFAULT_DATA
    assert default == expected


def test_the_default_embedder_reaches_the_memory_config_or_says_it_is_not_built(
    locomo: ModuleType,
) -> None:
    if "embedder" in MemoryConfig.model_fields:
        assert locomo.bench_config("default").memory.embedder is not None
    else:
        with pytest.raises(SystemExit, match="embedder support is not built yet"):
            locomo.bench_config("default")
    # keyword-only means no embedder, also once the product has one (the seam must say so)
    embedder = locomo.bench_config("none").memory_embedder
    assert embedder is None or embedder.provider == "none"


def test_a_turn_counts_as_injected_only_when_its_whole_entry_is_in_the_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    recall_gate = importlib.import_module("recall_gate")
    texts = {
        "D1:1": "Caroline (8 May 2023): I adopted a puppy named Biscuit last weekend.",
        "D1:2": "Caroline (8 May 2023): I adopted a cat.",
        "D1:3": "Melanie (8 May 2023): Pottery class keeps me busy.",
    }
    block = "<memory>\n### Related memories (search)\n- [memory/2023-05-08.md:1] " + texts["D1:1"]
    assert recall_gate.injected(block, texts) == {"D1:1"}
    assert recall_gate.counts([{"D1:1"}, set(), {"D1:2", "D1:3"}]) == "injected=2/3 hits=3"


def test_structured_memory_bench_times_memory_query_against_the_store_search(
    data: Path, tmp_path: Path
) -> None:
    """The bench runs the tool's own path on a small scope and ends with its figure line (its
    validator reads the tiny LoCoMo-shaped file, never the default data outside the
    repository)."""
    args = ["--entries", "700", "--queries", "20", "--links", "10", "--conversations", "1"]
    args += ["--data", str(data)]
    lines = run_bench("structured_memory.py", *args, cwd=tmp_path)
    assert lines[0].startswith("entries: 700  index built in ")
    assert re.fullmatch(r"queries: 20 \(\d+ with results\)", lines[1]), lines[1]
    assert int(re.search(r"\((\d+) with", lines[1]).group(1)) > 0  # type: ignore[union-attr]
    edges = re.search(r"relations: (\d+) edges for 10 new entries", "\n".join(lines))
    assert edges is not None
    assert int(edges.group(1)) > 0
    facts = re.search(r"validator: (\d+) facts from the extraction turn", "\n".join(lines))
    assert facts is not None
    assert int(facts.group(1)) > 0
    assert re.fullmatch(
        r"memory_query_bullets_p50_ms=\d+\.\d edge_ms=\d+\.\d\d validator_pass=[01]\.\d\d",
        lines[-1],
    ), lines[-1]


def test_locomo_retrieval_with_the_postgresql_index_prints_its_scores_beside_the_local_ones(
    data: Path, tmp_path: Path
) -> None:
    """``--index postgresql``: the same memories searched in PostgreSQL (a server of the
    bench's own), its lines before the backend's two."""
    lines = run_bench(
        "locomo_retrieval.py",
        "--data",
        str(data),
        "--embedder",
        "default",
        "--index",
        "postgresql",
        cwd=tmp_path,
    )
    ms = r"p50=\d+\.\d ms p95=\d+\.\d ms"
    assert re.fullmatch(rf"# postgresql-index search: {ms} n=3", lines[-5]), lines
    assert re.fullmatch(rf"# postgresql-index cat1-4: {SUMMARY_RE}", lines[-4]), lines
    assert re.fullmatch(rf"# postgresql-index all: {SUMMARY_RE}", lines[-3]), lines
    # five turns, ten hits asked for: every turn is among both indexes' hits
    assert re.fullmatch(r"all: R@5=1\.000 R@10=1\.000 MRR=\d\.\d{3} n=3", lines[-1]), lines
    assert re.search(r"all: R@5=1\.000 R@10=1\.000", lines[-3]), lines[-3]
