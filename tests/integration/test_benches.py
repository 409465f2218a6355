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
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mindroom.config.schema import MemoryConfig
from mindroom.memory.files.protocol import read_text

REPO = Path(__file__).resolve().parents[2]

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


def run_bench(script: str, *args: str, cwd: Path, timeout: float = 60) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


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


def test_memory_search_hybrid_table_follows_the_keyword_one_and_re_embeds_the_changed(
    tmp_path: Path,
) -> None:
    """``--hybrid`` leaves the keyword table as it was and adds its own, one row per size; the
    bench itself asserts that the update embedded exactly the changed entries."""
    args = ["--sizes", "40", "--queries", "5", "--hybrid"]
    lines = run_bench("memory_search.py", *args, cwd=tmp_path)
    header = ["entries", "build", "index", "med", "index", "p95", "scan", "med", "scan", "p95"]
    assert lines[0].split() == [*header, "scan/index"]
    assert lines[2] == "target: index median under 10 ms at 100k entries"
    assert lines[3] == "hybrid: sentence-transformers/all-MiniLM-L6-v2"
    assert lines[4].startswith("load average before: ")
    number = r"\d+\.\d+"
    assert re.fullmatch(
        rf" +40 +{number}s +{number}s +{number}ms +{number}ms +{number}ms +{number}ms"
        rf" +{number}x +{number}s +{number}s",
        lines[6],
    ), lines[6]
    assert lines[7].startswith("load average after: ")
    assert lines[8].startswith("targets: hybrid median <= 25 ms at 100k")


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


def test_session_index_bench_times_replies_with_and_without_the_source(tmp_path: Path) -> None:
    """The bench runs real turns and a real index on a small scale and ends with its line."""
    args = ["--sessions", "2", "--turns", "8", "--indexed", "30", "--queries", "10"]
    lines = run_bench("session_index.py", *args, cwd=tmp_path)
    text = "\n".join(lines)
    assert "reply: 8 turns in 2 conversations, threshold 4 messages" in text
    syncs = re.search(r"one delta sync: median [\d.]+ ms \((\d+) syncs\)", text)
    assert syncs is not None
    assert int(syncs.group(1)) > 0  # the source was on: the index was written
    found = re.search(r"10 queries \((\d+) found a conversation\)", text)
    assert found is not None
    assert int(found.group(1)) > 0
    assert re.fullmatch(r"reply_overhead_ms=-?\d+\.\d\d search_p50_ms=\d+\.\d\d", lines[-1])


@pytest.mark.slow
def test_e2ee_latency_bench_compares_an_encrypted_dm_with_a_plain_one(tmp_path: Path) -> None:
    """The bench runs its own Synapse and bot, checks every answer's encryption, and ends
    with its line (a small run: the figures need the default size)."""
    lines = run_bench("e2ee_latency.py", "--messages", "2", cwd=tmp_path)
    text = "\n".join(lines)
    assert re.search(r"unencrypted DM +median +[\d.]+ ms .*\(n=2\)", text)
    assert re.search(r"encrypted DM +median +[\d.]+ ms .*\(n=2\)", text)
    assert re.fullmatch(r"added_median_ms=-?\d+\.\d", lines[-1])


@pytest.mark.timeout(300)  # eight fresh mindroom processes: slow on a busy machine
def test_cli_latency_bench_times_each_command_of_the_given_tree_and_ends_with_its_line(
    tmp_path: Path,
) -> None:
    """One repetition of each command; the bench itself checks each one's exit code and
    message (a config error, a refused second run), so its figures measure those paths."""
    lines = run_bench(
        "cli_latency.py", "--repeat", "1", "--tree", str(REPO), cwd=tmp_path, timeout=280
    )
    text = "\n".join(lines)
    assert f"mindroom from {REPO}" in text
    for case in ("mindroom --help", "config error", "second run refused", "mindroom doctor"):
        assert re.search(rf"{case} +cpu median +\d+ ms .*\(n=1\)", text), case
    assert re.fullmatch(
        r"cli_help_ms=\d+ config_error_ms=\d+ second_run_ms=\d+ doctor_ms=\d+", lines[-1]
    ), lines[-1]


def test_dashboard_pages_bench_times_every_page_over_a_big_scope(tmp_path: Path) -> None:
    """A small run (the figures need the default 10k entries)."""
    lines = run_bench("dashboard_pages.py", "--entries", "600", "--rounds", "3", cwd=tmp_path)
    text = "\n".join(lines)
    assert "600 entries and 600 history records" in text
    for page in ("scope listing", "scope search", "entry + history", "memory settings"):
        assert re.search(rf"{re.escape(page)} +p50 +[\d.]+ ms", text), page
    assert re.fullmatch(r"max_page_p50_ms=\d+\.\d", lines[-1])


@pytest.mark.slow
@pytest.mark.timeout(600)  # four Synapses and two PostgreSQL: over 120 s on a busy machine
def test_scale_bench_compares_both_modes_and_two_processes_with_one(tmp_path: Path) -> None:
    """A small run of ``bench/scale.py``: four Synapses, two PostgreSQL, and the line it ends
    with (the figures need the default size)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scale.py"), "--agents", "4", "--threads", "8"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    text = done.stdout
    assert re.search(r"one process +[\d.]+ replies/s; CPU cores used: mindroom [\d.]+", text)
    assert re.search(
        r"two processes +[\d.]+ replies/s; CPU cores used: mindroom 1 [\d.]+, "
        r"mindroom 2 [\d.]+",
        text,
    )
    for mode in ("clientserver", "appservice"):  # two processes against one, in each mode
        assert f"8 threads at once, {mode} mode on PostgreSQL: one process vs two" in text
    assert text.count("bottleneck: ") == 4
    per_reply = r"mindroom CPU per reply: one process [\d.]+ ms, two processes [\d.]+ ms"
    assert len(re.findall(per_reply, text)) == 2
    assert re.fullmatch(
        r"appservice_startup_s=\d+\.\d clientserver_startup_s=\d+\.\d "
        r"two_process_speedup=\d+\.\d\dx",
        lines[-1],
    )


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
