"""Vector search with the real local embedder: search time, loading, re-embedding, memory.

For each size it writes that many entries into daily files of a fresh scope (as
``bench/memory_search.py`` does), builds the keyword index, then gives every entry a stored
vector: random unit vectors stand in for the bulk, written straight into ``vectors.db`` under
the embedder's model id and each text's hash, because embedding 100k entries would take about
half an hour here and the time of a search does not depend on the vectors' values. Then, with
the real all-MiniLM-L6-v2:

- ``load``: the first sync of a new process (reads the entries and every stored vector);
- ``search``: ``VectorIndex.search(query, 10)`` as a caller makes it: checks the files for
  changes, embeds the query, scores every entry, takes the top 10 (median, p95); ``embed`` is
  the query embedding alone (median);
- ``re-embed``: 1,000 entries are changed by rewriting their files (real conversation turns from
  ``../shared/data/locomo-dev.json`` when present), then one sync re-indexes those files and
  embeds exactly those 1,000 texts (``keywords``: the keyword index's share of that);
- ``rss``: the process's resident memory after the search runs.

    python bench/vector_search.py [--sizes 1000 10000 100000] [--queries 60] [--threads N]

Targets: search median <= 25 ms at 100k entries including the query embedding;
re-embedding 1,000 changed entries <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_search import p95, vocabulary, write_scope  # noqa: E402

from mindroom.adapters.embeddings.select import shared_embedder  # noqa: E402
from mindroom.memory.files.markdown import new_entry_id, render_entry  # noqa: E402
from mindroom.memory.search.index import MemoryIndex  # noqa: E402
from mindroom.memory.search.vectors import VectorIndex, content_hash  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"
CHANGED = 1000


def conversation_texts() -> tuple[list[str], list[str]]:
    """Entry texts and questions from the LoCoMo development set (empty when absent)."""
    if not DATA.exists():
        return [], []
    texts, questions = [], []
    for sample in json.loads(DATA.read_text(encoding="utf-8")):
        talk = sample["conversation"]
        for key, turns in talk.items():
            if key.startswith("session_") and isinstance(turns, list):
                when = talk.get(f"{key}_date_time", "")
                texts += [f"{t['speaker']} ({when}): {t['text']}" for t in turns]
        questions += [str(qa["question"]) for qa in sample["qa"]]
    return texts, questions


def changed_texts(texts: list[str], rng: random.Random, words: list[str]) -> list[str]:
    """The ``CHANGED`` new entry texts of the re-embedding run: real conversation turns when
    there are enough of them, else made-up sentences."""
    fresh = [f"{t} (changed)" for t in texts[:CHANGED]] if len(texts) >= CHANGED else []
    fresh += [f"Changed entry {i}: {' '.join(rng.sample(words, 12))}." for i in range(CHANGED)]
    return fresh[:CHANGED]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def seed_vectors(index: MemoryIndex, db_path: Path, model_id: str, dims: int) -> None:
    """A stored random unit vector for every entry text (stand-ins: see the module doc)."""
    rng = np.random.default_rng(7)
    texts = {e.text for es in index.changes(None).files.values() for e in es}
    db = sqlite3.connect(db_path)
    db.execute(
        "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, hash BLOB NOT NULL, "
        "vector BLOB NOT NULL, PRIMARY KEY (model, hash)) WITHOUT ROWID"
    )
    rows = []
    for text in texts:
        vector = rng.standard_normal(dims).astype(np.float32)
        rows.append((model_id, content_hash(text), (vector / np.linalg.norm(vector)).tobytes()))
    db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
    db.commit()
    db.close()


def change_entries(root: Path, new_texts: list[str]) -> None:
    """Rewrite the first daily files so that exactly ``len(new_texts)`` entries change."""
    files = sorted((root / "memory").glob("*.md"))
    left = list(new_texts)
    for path in files:
        if not left:
            break
        lines = path.read_text(encoding="utf-8").splitlines()
        entries = [i for i, line in enumerate(lines) if line.startswith("- ")]
        for i in entries[: len(left)]:
            lines[i : i + 1] = render_entry(new_entry_id(), left.pop(0))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(fn, *args) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main(sizes: list[int], queries: int, threads: int | None) -> None:
    embedder = shared_embedder(None, Path.cwd())
    if embedder is None:
        sys.exit("install mindroom[embeddings] first (pip install -e '.[embeddings]')")
    start = time.perf_counter()
    embedder.embed(["load the model"])
    print(f"model load (import included): {time.perf_counter() - start:.1f} s")
    if threads:
        import torch

        torch.set_num_threads(threads)
    dims = embedder.embed(["x"]).shape[1]
    rng = random.Random(42)
    words = vocabulary(rng)
    texts, questions = conversation_texts()
    fresh = changed_texts(texts, rng, words)
    asks = (questions or [" ".join(rng.sample(words, 4)) for _ in range(queries)])[:queries]
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores; other work slows every column)")
    print(
        f"{'entries':>8} {'load':>7} {'search med':>11} {'search p95':>11} {'embed med':>10} "
        f"{'re-embed 1k':>12} {'(keywords)':>10} {'rss':>8}"
    )
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root, state = Path(tmp) / "workspace", Path(tmp) / "state"
            write_scope(root, size, rng, words)
            index = MemoryIndex(state / "index.db", root)
            index.rebuild()
            seed_vectors(index, state / "vectors.db", embedder.model_id, dims)
            vectors = VectorIndex(index, embedder, state / "vectors.db")
            load = timed(vectors.sync)
            assert vectors.embedded == 0
            for ask in asks[:5]:
                vectors.search(ask, 10)
            searched = [timed(vectors.search, ask, 10) for ask in asks]
            embedded = [timed(embedder.embed, [ask]) for ask in asks]
            rss = rss_mb()
            change_entries(root, fresh)
            reindex = timed(index.sync)  # the keyword side's share of following the edit
            reembed = reindex + timed(vectors.sync)
            assert vectors.embedded == CHANGED, vectors.embedded
            vectors.close()
            index.close()
        print(
            f"{size:>8} {load:>6.2f}s {statistics.median(searched) * 1000:>9.1f}ms "
            f"{p95(searched) * 1000:>9.1f}ms {statistics.median(embedded) * 1000:>8.1f}ms "
            f"{reembed:>11.1f}s {reindex:>9.2f}s {rss:>6.0f}MB"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print("targets: search median <= 25 ms at 100k (query embedding included); re-embed 1k <= 10 s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    args = parser.parse_args()
    main(args.sizes, args.queries, args.threads)
